package statestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// backend is one kind of store (file://, s3://) under logical object
// names ("keys/<enc>/head", "keys/<enc>/archives/<gen>-<hex>"). Every
// method's failure other than the named sentinels is the store's (callers
// wrap it as ErrUnavailable); a putHead failure other than errPrecondition
// is an unknown outcome.
type backend interface {
	kind() string
	// getHead returns the head object and its etag; ErrNotFound if none.
	getHead(ctx context.Context, name string) ([]byte, string, error)
	// putHead writes a head object if its current etag is ifMatch, or, for
	// ifMatch "", if none exists; it returns the new etag. A failed
	// condition is errPrecondition.
	putHead(ctx context.Context, name string, data []byte, ifMatch string) (string, error)
	// deleteHead removes the head if its etag is ifMatch (errPrecondition
	// otherwise; nil if it is already gone).
	deleteHead(ctx context.Context, name, ifMatch string) error
	// newObject starts writing an object that commit stores under name
	// only if no object has that name.
	newObject(ctx context.Context, name string) (objectWriter, error)
	// getObject opens an object; ErrNotFound if none.
	getObject(ctx context.Context, name string) (io.ReadCloser, error)
	// list calls fn with the name of every object under prefix.
	list(ctx context.Context, prefix string, fn func(name string) error) error
	// deleteObject removes an object (nil if it is already gone).
	deleteObject(ctx context.Context, name string) error
}

// objectWriter is an archive object being written.
type objectWriter interface {
	io.Writer
	// commit stores the object and verifies it by read-back: the stored
	// object must be n bytes with SHA-256 sum (of everything written).
	commit(sum []byte, n int64) error
	// abort discards what was written; after a failed commit too.
	abort()
}

// fileBackend is a file:// store: object names map to paths under root
// (directories 0700, files 0600). Heads are written under an flock on the
// key directory's ".lock" file, compared by etag (hex SHA-256 of the head's
// bytes), through a temp file that is fsynced, renamed into place and
// followed by an fsync of the directory — the same conditional semantics
// as S3's If-Match / If-None-Match: * (PROTOCOL §10.2 "Fencing").
type fileBackend struct{ root string }

func (f *fileBackend) kind() string { return "file" }

func (f *fileBackend) path(name string) string {
	return filepath.Join(f.root, filepath.FromSlash(name))
}

func fileETag(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (f *fileBackend) getHead(_ context.Context, name string) ([]byte, string, error) {
	b, err := readSmall(f.path(name))
	if err != nil {
		return nil, "", err
	}
	return b, fileETag(b), nil
}

// readSmall reads a head file (at most maxHeadBytes), never through a link.
func readSmall(p string) ([]byte, error) {
	fh, err := os.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxHeadBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxHeadBytes {
		return nil, corruptf("head over %d bytes", maxHeadBytes)
	}
	return b, nil
}

// lock takes the flock of name's directory, re-checking after locking
// that the lock file is still the one named (a Discard may unlink it).
func (f *fileBackend) lock(name string) (func(), error) {
	dir := filepath.Dir(f.path(name))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	lp := filepath.Join(dir, ".lock")
	for {
		fh, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE|oNoFollow, 0o600)
		if err != nil {
			return nil, err
		}
		for {
			err = unix.Flock(int(fh.Fd()), unix.LOCK_EX)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			fh.Close()
			return nil, err
		}
		held, err1 := fh.Stat()
		named, err2 := os.Lstat(lp)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return func() { fh.Close() }, nil
		}
		fh.Close()
		if err1 != nil {
			return nil, err1
		}
	}
}

func (f *fileBackend) checkLocked(p, ifMatch string) error {
	cur, err := readSmall(p)
	switch {
	case errors.Is(err, ErrNotFound):
		if ifMatch != "" {
			return errPrecondition
		}
		return nil
	case err != nil:
		return err
	case ifMatch == "" || fileETag(cur) != ifMatch:
		return errPrecondition
	}
	return nil
}

func (f *fileBackend) putHead(_ context.Context, name string, data []byte, ifMatch string) (string, error) {
	unlock, err := f.lock(name)
	if err != nil {
		return "", err
	}
	defer unlock()
	p := f.path(name)
	if err := f.checkLocked(p, ifMatch); err != nil {
		return "", err
	}
	if err := writeAtomic(p, data); err != nil {
		return "", err
	}
	return fileETag(data), nil
}

// testHookFileBeforeRename, when set by tests, runs in writeAtomic after
// the temp file is synced and before the rename.
var testHookFileBeforeRename func(tmp string) error

// writeAtomic writes p by temp file + fsync + rename + directory fsync.
func writeAtomic(p string, data []byte) error {
	dir := filepath.Dir(p)
	t, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := t.Name()
	ok := false
	defer func() {
		if !ok {
			t.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := t.Write(data); err != nil {
		return err
	}
	if err := t.Sync(); err != nil {
		return err
	}
	if h := testHookFileBeforeRename; h != nil {
		if err := h(tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	ok = true
	t.Close()
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (f *fileBackend) deleteHead(_ context.Context, name, ifMatch string) error {
	unlock, err := f.lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	p := f.path(name)
	cur, err := readSmall(p)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if fileETag(cur) != ifMatch {
		return errPrecondition
	}
	if err := os.Remove(p); err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

func (f *fileBackend) getObject(_ context.Context, name string) (io.ReadCloser, error) {
	fh, err := os.OpenFile(f.path(name), os.O_RDONLY|oNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return fh, err
}

func (f *fileBackend) list(ctx context.Context, prefix string, fn func(string) error) error {
	dir := f.path(strings.TrimSuffix(prefix, "/"))
	names, err := readNames(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue // temp files of writes in progress
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(strings.TrimSuffix(prefix, "/") + "/" + n); err != nil {
			return err
		}
	}
	return nil
}

func (f *fileBackend) deleteObject(_ context.Context, name string) error {
	err := os.Remove(f.path(name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeKeyDirs removes a discarded key's lock file and empty directories
// (best effort: a directory another sidecar wrote into meanwhile stays).
func (f *fileBackend) removeKeyDirs(keyDir string) {
	d := f.path(keyDir)
	os.Remove(filepath.Join(d, "archives"))
	os.Remove(filepath.Join(d, ".lock"))
	os.Remove(d)
}

func (f *fileBackend) newObject(_ context.Context, name string) (objectWriter, error) {
	p := f.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	sweepStaleTemps(filepath.Dir(p), staleTempAge)
	t, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return nil, err
	}
	return &fileObject{f: t, final: p}, nil
}

// staleTempAge is how long an archive's temp file may go unwritten before
// the key's next publication removes it: a writer appends continuously,
// so one this old was left by a sidecar killed mid-publication
// (adversarial trial: a 511 MB one stayed for good).
const staleTempAge = time.Hour

// sweepStaleTemps removes the ".tmp-*" files of dir unmodified for age
// (best effort).
func sweepStaleTemps(dir string, age time.Duration) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".tmp-") || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// fileObject writes an archive to a temp file; commit fsyncs it, reads it
// back and hashes it, then links it to its final name (failing if that
// name exists: the If-None-Match: * of a file store) and fsyncs the
// directory.
type fileObject struct {
	f     *os.File
	final string
}

func (o *fileObject) Write(p []byte) (int, error) { return o.f.Write(p) }

func (o *fileObject) commit(sum []byte, n int64) error {
	if err := o.f.Sync(); err != nil {
		return err
	}
	if _, err := o.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha256.New()
	got, err := io.CopyBuffer(h, o.f, make([]byte, copyBufSize))
	if err != nil {
		return err
	}
	if got != n || !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("read-back of %s: %d bytes, want %d, or hash differs", filepath.Base(o.final), got, n)
	}
	if err := os.Link(o.f.Name(), o.final); err != nil {
		return err
	}
	o.abort()
	return syncDir(filepath.Dir(o.final))
}

func (o *fileObject) abort() {
	o.f.Close()
	os.Remove(o.f.Name())
}

// randomHex returns n random bytes in hex (object names).
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux or macOS
	}
	return hex.EncodeToString(b)
}
