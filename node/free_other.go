//go:build !unix

package node

func freeBytes(string) (int64, bool) { return 0, false }
