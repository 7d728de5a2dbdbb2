//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

// statIdentity is p's device and inode numbers (following links, as
// Build's rules name resolved paths), 0, 0 if it cannot be stat'ed.
func statIdentity(p string) (dev, ino uint64) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Dev), uint64(st.Ino)
}
