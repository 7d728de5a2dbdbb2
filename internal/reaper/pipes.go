//go:build linux || darwin

package reaper

import (
	"fmt"
	"os"
)

// stdioPipes makes the provider's three pipes: child ends (stdin read,
// stdout write, stderr write) and parent ends (the opposite).
func stdioPipes() (child, parent []*os.File, err error) {
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

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
