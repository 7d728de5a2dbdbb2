//go:build !linux

package launchexec

import (
	"fmt"
	"os"
)

// Main refuses outside Linux: there is no launch entry there.
func Main([]string) int {
	fmt.Fprintln(os.Stderr, "acpx-sidecar "+Arg+": Linux only")
	return 2
}
