package s3test

import "syscall"

// setPdeathsig asks Linux to SIGKILL the server if the test process dies
// before Stop (a killed `go test` must not leave it running).
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
