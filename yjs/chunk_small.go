//go:build yjs_smallchunks

package yjs

// chunkMax is the most structs a chunk of a struct list holds (store.go). This build
// (go test -tags yjs_smallchunks) keeps chunks of a few structs, so that the tests of every
// list operation cross chunk edges and split chunks even in small documents.
const chunkMax = 4
