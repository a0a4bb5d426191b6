//go:build !linux

package rdma

import "os"

// readAttr reads one attribute file.
func readAttr(name string) ([]byte, error) { return os.ReadFile(name) }
