//go:build !yjs_smallchunks

package yjs

// chunkMax is the most structs a chunk of a struct list holds (store.go).
const chunkMax = 512
