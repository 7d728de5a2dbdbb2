package statestore

import "syscall"

// maxRSSMiB converts ru_maxrss (KiB on Linux) to MiB.
func maxRSSMiB(ru *syscall.Rusage) float64 { return float64(ru.Maxrss) / 1024 }
