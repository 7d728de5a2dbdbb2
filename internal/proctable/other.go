//go:build !linux && !darwin

package proctable

// New fails with ErrUnsupported: there is no reader for this system.
func New() (Reader, error) { return nil, ErrUnsupported }
