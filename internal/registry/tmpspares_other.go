//go:build !linux

package registry

import "errors"

// renameNoReplace is unsupported here (errors.ErrUnsupported): a spare
// TMPDIR is not used and the caller makes one. No containment outside
// Linux applies a sandbox, so none is asked for.
func renameNoReplace(oldPath, newPath string) error { return errors.ErrUnsupported }
