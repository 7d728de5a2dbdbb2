//go:build !linux

package statestore

import "syscall"

// maxRSSMiB converts ru_maxrss (bytes on macOS) to MiB.
func maxRSSMiB(ru *syscall.Rusage) float64 { return float64(ru.Maxrss) / (1 << 20) }
