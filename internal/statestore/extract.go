package statestore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxManLine bounds one manifest line read on restore (a 4096-byte path
// and a 4096-byte link target, JSON-escaped, fit).
const maxManLine = 64 << 10

// dirFrame is a directory being extracted: its final mode and mtime are
// applied when the archive's order shows it complete (post-order).
type dirFrame struct {
	p     string
	mode  os.FileMode
	mtime time.Time
}

// extractor unpacks one archive into root (a fresh private directory)
// under the archive rules (PROTOCOL §10.2), checking as it goes:
// every path relative, clean, without NUL, under a valid source name and
// at most maxPathLen bytes; entries in strictly increasing component order
// (which rules out duplicates and makes a parent precede its children);
// every parent an extracted directory (never a link: nothing is created
// through a link); only directories, regular files and symlinks under the
// link rule; the limits before anything is written. Its own manifest lines
// go to spool, compared at the end with the archive's manifest.
type extractor struct {
	ctx     context.Context
	root    string
	lim     Limits
	spool   *os.File
	man     *bufio.Writer
	buf     []byte
	entries int64
	bytes   int64
	prev    string
	stack   []dirFrame
	hash    hash.Hash
}

// fdWriter writes to a raw descriptor (restarting on EINTR, as a short
// write is an error).
type fdWriter int

func (w fdWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(int(w), p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, &os.PathError{Op: "write", Path: "restored file", Err: err}
		}
		n += m
	}
	return n, nil
}

func corruptf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...)
}

// tarErr classifies an error of tar.Reader: already classified (a store or
// AEAD failure) passes through; anything else is a malformed archive.
func tarErr(err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTooLarge) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return unavailable("restore", err)
	}
	return corruptf("archive: %v", err)
}

// pathLess orders archive paths component by component (as if "/" sorted
// before every other byte): the order writeArchive's walk produces.
func pathLess(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return true
		}
		if cb == '/' {
			return false
		}
		return ca < cb
	}
	return len(a) < len(b)
}

// validArchivePath checks an archive path's syntax.
func validArchivePath(p string) error {
	switch {
	case p == "" || len(p) > maxPathLen:
		return corruptf("archive path of %d bytes", len(p))
	case strings.IndexByte(p, 0) >= 0:
		return corruptf("archive path with NUL")
	case path.IsAbs(p):
		return corruptf("absolute archive path %q", p)
	case path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../"):
		return corruptf("archive path %q is not clean or escapes", p)
	}
	name, _, _ := strings.Cut(p, "/")
	if validSourceName(name) != nil {
		return corruptf("archive path %q under an invalid source name", p)
	}
	return nil
}

// extract reads the tar from r into x.root and verifies the manifest. It
// returns nil only when the whole archive, its manifest included, was
// consistent; the caller still drains r to its end (the AEAD's final
// segment) and compares the object's hash.
func (x *extractor) extract(r io.Reader) error {
	x.man = bufio.NewWriterSize(x.spool, 64<<10)
	x.buf = make([]byte, copyBufSize)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return corruptf("archive without a manifest")
		}
		if err != nil {
			return tarErr(err)
		}
		if err := x.ctx.Err(); err != nil {
			return unavailable("restore", err)
		}
		if hdr.Name == manifestName {
			if err := x.popTo(""); err != nil {
				return err
			}
			if err := x.compareManifest(tr, hdr); err != nil {
				return err
			}
			if _, err := tr.Next(); err != io.EOF {
				if err == nil {
					return corruptf("an entry after the manifest")
				}
				return tarErr(err)
			}
			return nil
		}
		if err := x.entry(tr, hdr); err != nil {
			return err
		}
	}
}

func (x *extractor) popTo(parent string) error {
	for len(x.stack) > 0 {
		top := x.stack[len(x.stack)-1]
		if top.p == parent {
			return nil
		}
		x.stack = x.stack[:len(x.stack)-1]
		full := filepath.Join(x.root, top.p)
		if err := os.Chmod(full, top.mode); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		if err := os.Chtimes(full, top.mtime, top.mtime); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
	}
	if parent != "" {
		return corruptf("%q has no directory entry before its children", parent)
	}
	return nil
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header) error {
	p := hdr.Name
	if hdr.Typeflag == tar.TypeDir {
		p = strings.TrimSuffix(p, "/")
	}
	if err := validArchivePath(p); err != nil {
		return err
	}
	if x.prev != "" && !pathLess(x.prev, p) {
		return corruptf("entry %q out of order or duplicate", p)
	}
	x.prev = p
	x.entries++
	if x.entries > x.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, x.lim.MaxEntries)
	}
	parent, dirRel := "", ""
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		parent = p[:i]
		if j := strings.IndexByte(parent, '/'); j >= 0 {
			dirRel = parent[j+1:]
		}
	} else if hdr.Typeflag != tar.TypeDir && hdr.Typeflag != tar.TypeReg {
		return corruptf("source %q is neither a directory nor a file", p)
	}
	if err := x.popTo(parent); err != nil {
		return err
	}
	full := filepath.Join(x.root, p)
	perm := os.FileMode(hdr.Mode) & os.ModePerm
	switch hdr.Typeflag {
	case tar.TypeDir:
		if hdr.Size != 0 {
			return corruptf("directory %q with a size", p)
		}
		if err := os.Mkdir(full, 0o700); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		x.stack = append(x.stack, dirFrame{p: p, mode: perm, mtime: hdr.ModTime})
		return writeManLine(x.man, manLine{T: "d", P: p, M: int64(perm)})
	case tar.TypeSymlink:
		if _, reason := linkTargetOK(dirRel, hdr.Linkname); reason != "" {
			return corruptf("link %q: %s", p, reason)
		}
		if err := os.Symlink(hdr.Linkname, full); err != nil {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		return writeManLine(x.man, manLine{T: "l", P: p, L: hdr.Linkname})
	case tar.TypeReg:
		return x.file(tr, hdr, p, full, perm)
	default:
		return corruptf("entry %q of type %q", p, hdr.Typeflag)
	}
}

func (x *extractor) file(tr *tar.Reader, hdr *tar.Header, p, full string, perm os.FileMode) error {
	size := hdr.Size
	if size < 0 {
		return corruptf("file %q with a negative size", p)
	}
	if size > x.lim.MaxFileBytes {
		return fmt.Errorf("%w: %s is %d bytes, limit %d per file", ErrTooLarge, p, size, x.lim.MaxFileBytes)
	}
	if x.bytes+size > x.lim.MaxBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, x.lim.MaxBytes)
	}
	x.bytes += size
	// raw descriptors: os.File would add fcntl and epoll calls per file,
	// several seconds of system time over 89,100 files
	fd, err := unix.Open(full, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("statestore: restore: open %s: %w", p, err)
	}
	f := fdWriter(fd)
	if x.hash == nil {
		x.hash = sha256.New()
	}
	h := x.hash
	h.Reset()
	n, err := io.CopyBuffer(io.MultiWriter(f, h), tr, x.buf)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnavailable) {
			return err
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("statestore: restore: %w", err)
		}
		return tarErr(err)
	}
	tv := unix.NsecToTimeval(hdr.ModTime.UnixNano())
	err = unix.Fchmod(fd, uint32(perm))
	if err == nil {
		err = unix.Futimes(fd, []unix.Timeval{tv, tv})
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("statestore: restore: %s: %w", p, err)
	}
	var sum [sha256.Size]byte
	return writeManLine(x.man, manLine{T: "f", P: p, M: int64(perm), S: size, H: hex.EncodeToString(h.Sum(sum[:0]))})
}

// compareManifest compares the archive's manifest, line by line, with the
// lines extract wrote for what it found (a streaming merge: neither side
// is held in memory). The archive's "absent" lines name sources that had
// no path at publication; they have no entry and are passed over.
func (x *extractor) compareManifest(tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag != tar.TypeReg {
		return corruptf("manifest is not a file")
	}
	if err := x.man.Flush(); err != nil {
		return fmt.Errorf("statestore: restore: %w", err)
	}
	if _, err := x.spool.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("statestore: restore: %w", err)
	}
	local := bufio.NewReaderSize(x.spool, maxManLine)
	arch := bufio.NewReaderSize(tr, maxManLine)
	absent := []byte(`{"t":"absent",`)
	for {
		a, aerr := arch.ReadSlice('\n')
		if aerr == bufio.ErrBufferFull {
			return corruptf("manifest line over %d bytes", maxManLine)
		}
		if aerr != nil && aerr != io.EOF {
			return tarErr(aerr)
		}
		if aerr == io.EOF && len(a) > 0 {
			return corruptf("manifest ends inside a line")
		}
		if bytes.HasPrefix(a, absent) {
			continue
		}
		l, lerr := local.ReadSlice('\n')
		if lerr != nil && lerr != io.EOF {
			return fmt.Errorf("statestore: restore: manifest spool: %w", lerr)
		}
		if aerr == io.EOF || lerr == io.EOF {
			if aerr == io.EOF && lerr == io.EOF {
				return nil
			}
			return corruptf("manifest and archive list different entries")
		}
		if !bytes.Equal(a, l) {
			return corruptf("manifest mismatch at %.200q", l)
		}
	}
}
