//go:build !linux

package acpclient

import "io"

// pollPipe returns r: outside Linux a provider's stdout is read through the
// Go runtime's poller (pipepoll_linux.go).
func pollPipe(r io.ReadCloser) io.ReadCloser { return r }
