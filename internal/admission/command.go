package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// verifyCommand checks the command is a regular executable file and, with
// sha256, opens it without following symlinks, hashes it and returns that
// open file to be executed (docs/rules.md#r4); without sha256 it returns a
// nil file. Errors: COMMAND_NOT_EXECUTABLE, COMMAND_DIGEST_MISMATCH,
// RESOURCE_EXHAUSTED (out of descriptors).
func verifyCommand(c *protocol.Command) (*os.File, *protocol.Error) {
	notExec := func(why string) *protocol.Error {
		return protocol.Domain(protocol.ErrCommandNotExecutable, "command.path "+why, false)
	}
	if c.Sha256 == "" {
		fi, err := os.Stat(c.Path)
		if err != nil {
			return nil, notExec("does not exist")
		}
		if !fi.Mode().IsRegular() || unix.Access(c.Path, unix.X_OK) != nil {
			return nil, notExec("is not an executable file")
		}
		return nil, nil
	}
	fd, err := unix.Open(c.Path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT || err == unix.ENOTDIR:
		return nil, notExec("does not exist")
	case err == unix.ELOOP:
		return nil, notExec("is a symlink (with sha256 the file itself is opened, never through a link)")
	case err != nil:
		return nil, OrExhausted("command.path could not be opened", err, notExec("cannot be opened: "+err.Error()))
	}
	f := os.NewFile(uintptr(fd), c.Path)
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		f.Close()
		return nil, notExec("is not an executable file")
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, notExec("cannot be read")
	}
	if !strings.EqualFold(hex.EncodeToString(h.Sum(nil)), c.Sha256) {
		f.Close()
		return nil, protocol.Domain(protocol.ErrCommandDigestMismatch, "command.path does not match command.sha256", false)
	}
	return f, nil
}
