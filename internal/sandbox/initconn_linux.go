//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitConn is a launcher's end of a tree's init control socket (the
// protocol is nsinit_linux.go's). Make it before the fork (NewInitConn),
// hand ChildFD to the init as its InitCtlFD, then CloseChild; Serve
// answers the init until the socket closes; Close ends it (the init then
// reaps freely and leaves once alone).
type InitConn struct {
	f, child *os.File
}

// NewInitConn makes the socketpair (both ends close-on-exec: ForkExec
// clears it on the one it dups into the init).
func NewInitConn() (*InitConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	return &InitConn{f: os.NewFile(uintptr(fds[0]), "init-ctl"), child: os.NewFile(uintptr(fds[1]), "init-ctl-child")}, nil
}

// ChildFD is the init's end, to pass in its ProcAttr.Files.
func (c *InitConn) ChildFD() uintptr { return c.child.Fd() }

// CloseChild closes the init's end here (after the fork).
func (c *InitConn) CloseChild() {
	if c.child != nil {
		c.child.Close()
		c.child = nil
	}
}

// Close closes the launcher's end (and the init's, if still here).
func (c *InitConn) Close() {
	c.CloseChild()
	c.f.Close()
}

// Serve answers the init until the socket closes (Close, or the init
// gone): for each child the init announces it calls look — which reads
// the init's children from /proc (procfs.Children) while the exited one
// is still a zombie — then lets the init reap it; once agentReaped is
// closed it tells the init so, once. It returns when the socket is
// closed or fails.
func (c *InitConn) Serve(look func(), agentReaped <-chan struct{}) {
	in := make(chan byte)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(in)
		var b [1]byte
		for {
			n, err := c.f.Read(b[:])
			if n == 1 {
				select {
				case in <- b[0]:
				case <-done:
					return
				}
			}
			if err != nil && err != syscall.EINTR {
				return
			}
		}
	}()
	for {
		select {
		case b, ok := <-in:
			if !ok {
				return
			}
			if b == InitChildExited {
				look()
				if _, err := c.f.Write([]byte{InitAck}); err != nil {
					return
				}
			}
		case <-agentReaped:
			agentReaped = nil
			if _, err := c.f.Write([]byte{InitAgentReaped}); err != nil {
				return
			}
		}
	}
}
