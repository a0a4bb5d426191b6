package audit

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// What a failed read says: a process that exits between the GPU's list
// and /proc gives ENOENT (its directory went) or ESRCH (the read raced
// the exit); environ of another user's process gives EACCES.
func TestWhy(t *testing.T) {
	for err, want := range map[error]string{
		&fs.PathError{Op: "openat2", Path: "/proc/7/status", Err: syscall.ENOENT}:  "process ended",
		&fs.PathError{Op: "read", Path: "/proc/7/status", Err: syscall.ESRCH}:      "process ended",
		&fs.PathError{Op: "openat2", Path: "/proc/7/environ", Err: syscall.EACCES}: "permission denied",
		&fs.PathError{Op: "openat2", Path: "/proc/7/environ", Err: syscall.EPERM}:  "permission denied",
		fmt.Errorf("wrapped: %w", errMore):                                         errMore.Error(),
	} {
		if got := why(err); got != want {
			t.Errorf("why(%v) = %q, want %q", err, got, want)
		}
	}
}
