//go:build !unix

package auth

// lockFile is a no-op where advisory locks are not available: concurrent `hub token`
// commands may then lose one another's change (the hub itself only reads the file).
func lockFile(string) (func(), error) { return func() {}, nil }
