//go:build !linux

package egress

import "syscall"

// New is ErrUnsupported off Linux: egress by name needs a network
// namespace (docs/protocol.md §19.1).
func New(cfg Config) (*Network, error) { return nil, ErrUnsupported }

// closeFD closes a descriptor this package opened.
func closeFD(fd int) { _ = syscall.Close(fd) }

// Probe is ErrUnsupported off Linux.
func Probe() error { return ErrUnsupported }
