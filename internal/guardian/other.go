//go:build !linux

package guardian

// Main returns 2 at once: there is no guardian on this platform.
func Main([]string) int { return 2 }
