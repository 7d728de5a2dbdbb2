//go:build !linux

package s3test

import "syscall"

// setPdeathsig has no equivalent outside Linux: there a killed test
// process can leave the server running.
func setPdeathsig(*syscall.SysProcAttr) {}
