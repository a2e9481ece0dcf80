//go:build !linux

package smallfs

import "errors"

func mount(string, int64) error {
	return errors.New("a tmpfs of a given size is mounted on Linux only")
}
