//go:build linux || darwin

package reaper

import (
	"fmt"
	"os"
)

// StdioPipes makes a provider's three pipes (Supervisor.Start and
// internal/reaper/tablemode's Start): child ends (stdin read, stdout
// write, stderr write) and parent ends (the opposite), three of each in
// that order. On error (from pipe(2), wrapped) none stays open.
func StdioPipes() (child, parent []*os.File, err error) {
	for i := 0; i < 3; i++ {
		r, w, perr := os.Pipe()
		if perr != nil {
			closeFiles(child)
			closeFiles(parent)
			return nil, nil, fmt.Errorf("reaper: pipe: %w", perr)
		}
		if i == 0 {
			child, parent = append(child, r), append(parent, w)
		} else {
			child, parent = append(child, w), append(parent, r)
		}
	}
	return child, parent, nil
}

// closeFiles closes every file of fs.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
