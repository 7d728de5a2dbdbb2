// Package store persists one acpx session record per session key under
// <stateDir>/sessions and the ownership ledger of live providers under
// <stateDir>/owned (docs/architecture.md, Durability; docs/operations.md,
// "The ownership ledger"). Records are byte-compatible with the npm
// acpx@0.19.1 runtime's file store: same paths, same schema
// (acpx.session.v1), same snake_case keys, 0600 files in 0700 directories.
//
// Writes are atomic (temp file in the same directory, fsync, rename, fsync of
// the directory) and serialised across goroutines and processes by an flock
// on a per-key lock file <sessions>/.<EncodeKey(key)>.lock. Readers take no
// lock: they always see either the old or the new file. The npm acpx runtime
// writes atomically too but takes no flock, so a sidecar and acpx writing the
// same record concurrently can still lose an update.
package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotFound is wrapped by Load and Update when no record exists for a key.
var ErrNotFound = errors.New("store: record not found")

// ErrCorrupt is wrapped by Load and Update when a record file exists but is
// not a JSON object, has a schema other than Schema, or names a different
// acpx_record_id than its key.
var ErrCorrupt = errors.New("store: corrupt record")

// ErrNotDirectory is wrapped by Open's error when the state directory, or
// its sessions or owned directory, exists and is not a directory: a
// condition that does not clear by waiting.
var ErrNotDirectory = errors.New("is not a directory")

const (
	dirMode  = 0o700
	fileMode = 0o600
)

// MaxRecordBytes bounds a record file Load reads (64 MiB); a larger one is
// ErrCorrupt, never read into memory.
const MaxRecordBytes = 64 << 20

// Store is a handle on one stateDir. It holds no open files (its spares,
// KeepSpares in spares.go, are kept by name); all methods are safe for
// concurrent use by goroutines and processes.
type Store struct {
	dir      string
	sessions string
	owned    string
	warnings []string
	now      func() time.Time
	// spares: nil, or the pool KeepSpares made (once, spareOnce).
	spares    atomic.Pointer[sparePool]
	spareOnce sync.Once
}

// Open prepares stateDir (an absolute path) for use: it creates stateDir
// (0700) if missing, and stateDir/sessions and stateDir/owned (0700, chmod'ed
// to exactly 0700 when Open creates them), and opens each of the three
// once for the process's life (held.go: later accesses go beneath those
// handles). Existing directories are never
// chmod'ed: a sessions/ or owned/ with any group/other bit, a stateDir
// writable by group/other, or one not owned by the effective uid is reported
// by Warnings. (npm acpx, by contrast, chmods sessions/ to 0700 on every
// write.) Errors: relative path, a path
// component that is not a directory, or the underlying mkdir/stat error.
func Open(stateDir string) (*Store, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("store: stateDir %q is not absolute", stateDir)
	}
	dir := filepath.Clean(stateDir)
	s := &Store{
		dir:      dir,
		sessions: filepath.Join(dir, "sessions"),
		owned:    filepath.Join(dir, "owned"),
		now:      time.Now,
	}
	for _, d := range []string{s.dir, s.sessions, s.owned} {
		if err := s.ensureDir(d, d != s.dir); err != nil {
			return nil, err
		}
		if err := holdDir(d); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ensureDir creates d (0700) if missing, or checks an existing d.
func (s *Store) ensureDir(d string, ours bool) error {
	err := os.Mkdir(d, dirMode)
	switch {
	case err == nil:
		if err := os.Chmod(d, dirMode); err != nil { // undo any umask
			return fmt.Errorf("store: %w", err)
		}
		return syncDir(filepath.Dir(d))
	case errors.Is(err, fs.ErrExist):
	case errors.Is(err, fs.ErrNotExist) && !ours:
		if err := os.MkdirAll(d, dirMode); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("store: %w", err)
	}
	fi, err := os.Stat(d)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if ours && isLink(d) {
		// sessions/ and owned/ are the sidecar's own: a link there would
		// send every record, lock and journal somewhere else.
		return &UnsafeFileError{Path: d, Reason: "is a symbolic link"}
	}
	if !fi.IsDir() {
		return fmt.Errorf("store: %s: %w", d, ErrNotDirectory)
	}
	mask := fs.FileMode(0o022) // stateDir: the user's; only shared write access matters
	if ours {
		mask = 0o077
	}
	if perm := fi.Mode().Perm(); perm&mask != 0 {
		s.warnings = append(s.warnings, fmt.Sprintf("%s has mode %#o, want 0700 (not changed)", d, perm))
	}
	if st, ok := fi.Sys().(*syscallStat); ok && int(st.Uid) != os.Geteuid() {
		s.warnings = append(s.warnings, fmt.Sprintf("%s is owned by uid %d, not %d", d, st.Uid, os.Geteuid()))
	}
	return nil
}

// Warnings lists problems Open found with pre-existing directories (mode
// wider than 0700, foreign owner). Open does not fix them.
func (s *Store) Warnings() []string { return append([]string(nil), s.warnings...) }

// Dir returns the absolute, cleaned stateDir.
func (s *Store) Dir() string { return s.dir }

// SessionsDir returns <stateDir>/sessions.
func (s *Store) SessionsDir() string { return s.sessions }

// OwnedDir returns <stateDir>/owned.
func (s *Store) OwnedDir() string { return s.owned }

// RecordPath returns <stateDir>/sessions/<EncodeKey(key)>.json. It does not
// validate key.
func (s *Store) RecordPath(key string) string {
	return filepath.Join(s.sessions, EncodeKey(key)+".json")
}

func (s *Store) lockPath(key string) string {
	return filepath.Join(s.sessions, "."+EncodeKey(key)+".lock")
}

// Load reads the record for key. Errors: ErrInvalidKey, ErrNotFound (no
// file), ErrCorrupt (not a JSON object of the right types, wrong schema, or
// acpx_record_id ≠ key), or the read error. It takes no lock.
func (s *Store) Load(key string) (*Record, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	p := s.RecordPath(key)
	var b []byte
	err := withDir(s.sessions, func(d *SafeDir) (err error) {
		b, err = d.ReadFile(filepath.Base(p), MaxRecordBytes)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: load %s: %w", filepath.Base(p), ErrNotFound)
	}
	if err != nil {
		if errors.Is(err, ErrUnsafeFile) || errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("store: load: %w", err)
	}
	r := new(Record)
	if err := r.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, p, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%w: %s: schema %q", ErrCorrupt, p, r.Schema)
	}
	if r.SessionKey != key {
		return nil, fmt.Errorf("%w: %s: acpx_record_id does not match the key", ErrCorrupt, p)
	}
	return r, nil
}

// Save writes r to RecordPath(r.SessionKey) atomically, holding the key's
// flock. Before writing it fills defaults in r: Schema if empty, CreatedAt
// (now) and LastUsedAt (CreatedAt) if empty, and always sets UpdatedAt to now
// (TimeLayout). Errors: ErrInvalidKey, ErrInvalidRecord (Validate), or the
// I/O error; on error the previous file is untouched and r is unchanged.
func (s *Store) Save(r *Record) error {
	if err := ValidateKey(r.SessionKey); err != nil {
		return err
	}
	unlock, err := s.lock(r.SessionKey)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = s.saveLocked(r, true)
	return err
}

// SaveDeferred is Save without its fsyncs: when it returns the record is
// in place (every process reads it), and it is durable once the returned
// Pending's Sync returns — the admission of a session answers its open
// between the two (docs/architecture.md, "Durability"). Errors: as Save.
func (s *Store) SaveDeferred(r *Record) (*Pending, error) {
	if err := ValidateKey(r.SessionKey); err != nil {
		return nil, err
	}
	unlock, err := s.lock(r.SessionKey)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.saveLocked(r, false)
}

func (s *Store) saveLocked(r *Record, durable bool) (*Pending, error) {
	c := *r
	now := FormatTime(s.now())
	if c.Schema == "" {
		c.Schema = Schema
	}
	if c.CreatedAt == "" {
		c.CreatedAt = now
	}
	if c.LastUsedAt == "" {
		c.LastUsedAt = c.CreatedAt
	}
	c.UpdatedAt = now
	if err := c.Validate(); err != nil {
		return nil, err
	}
	body, err := encodeFile(&c)
	if err != nil {
		return nil, fmt.Errorf("store: encode: %w", err)
	}
	p, err := s.writeFile(s.sessions, EncodeKey(c.SessionKey)+".json", body, durable)
	if err != nil {
		return nil, err
	}
	*r = c
	return p, nil
}

// Update loads the record for key, calls fn on it and saves the result, all
// under the key's flock, so concurrent Updates from goroutines or processes
// never lose a change. fn must not change SessionKey. If fn returns an
// error nothing is written and that error is returned. Errors: as Load and
// Save, ErrNotFound if there is no record.
func (s *Store) Update(key string, fn func(r *Record) error) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	unlock, err := s.lock(key)
	if err != nil {
		return err
	}
	defer unlock()
	r, err := s.Load(key)
	if err != nil {
		return err
	}
	if err := fn(r); err != nil {
		return err
	}
	if r.SessionKey != key {
		return fmt.Errorf("%w: update changed acpx_record_id", ErrInvalidRecord)
	}
	_, err = s.saveLocked(r, true)
	return err
}

// Delete removes the record for key and its lock file, under the key's
// flock. A missing record is not an error. Use only when the host asked to
// discard persistent state (docs/rules.md#r25).
func (s *Store) Delete(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	unlock, err := s.lock(key)
	if err != nil {
		return err
	}
	defer unlock()
	return withDir(s.sessions, func(d *SafeDir) error {
		if err := d.Remove(filepath.Base(s.RecordPath(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: delete: %w", err)
		}
		// Waiters notice the unlinked lock file (inode check in lock) and retry.
		if err := d.Remove(filepath.Base(s.lockPath(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: delete: %w", err)
		}
		return d.Sync()
	})
}

// lock takes an exclusive flock on the key's lock file and returns its
// release. After locking it checks that the path still names the locked
// inode (Delete may have unlinked it meanwhile) and retries otherwise. The
// lock file is opened through a SafeDir: a link there is refused.
func (s *Store) lock(key string) (func(), error) {
	p := s.lockPath(key)
	d, err := OpenSafeDir(s.sessions)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	defer d.Close()
	for {
		f, err := s.openOrCreate(d, filepath.Base(p))
		if err != nil {
			return nil, fmt.Errorf("store: lock: %w", err)
		}
		fd := int(f.Fd())
		for {
			err = unix.Flock(fd, unix.LOCK_EX)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("store: lock: %w", err)
		}
		var held unix.Stat_t
		if err := unix.Fstat(fd, &held); err != nil {
			f.Close()
			return nil, fmt.Errorf("store: lock: %w", err)
		}
		if named, err := d.Lstat(filepath.Base(p)); err == nil && held.Dev == named.Dev && held.Ino == named.Ino {
			return func() { f.Close() }, nil // close releases the flock
		}
		f.Close()
	}
}

// testHookBeforeRename, when set by tests, runs after the temp file is
// written (and, for a durable write, synced) and before it is renamed
// into place; an error aborts the write as a crash at that point would.
var testHookBeforeRename func(tmp string) error

// writeFile writes data to dir/name atomically: a temp file (0600,
// created exclusively or a spare) in dir, write, rename — all through one
// SafeDir, so no link is followed. The temp name (".tmp-*") never ends in
// ".json", so acpx's directory scan ignores it. durable: the file and the
// directory are fsynced before it returns (nil Pending); else it returns
// the write as a Pending (the file renamed into place, its descriptor and
// the directory's kept for Sync).
func (s *Store) writeFile(dir, name string, data []byte, durable bool) (_ *Pending, err error) {
	d, err := OpenSafeDir(dir)
	if err != nil {
		return nil, err
	}
	f, tmp, err := s.createTemp(d)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("store: write: %w", err)
	}
	placed := false // renamed into place: the descriptors are the Pending's
	defer func() {
		if err != nil && !placed {
			f.Close()
			_ = d.Remove(tmp)
			d.Close()
		}
	}()
	if _, err = f.Write(data); err != nil {
		return nil, fmt.Errorf("store: write: %w", err)
	}
	if durable {
		if err = f.Sync(); err != nil {
			return nil, fmt.Errorf("store: write: %w", err)
		}
	}
	if h := testHookBeforeRename; h != nil {
		if err = h(filepath.Join(dir, tmp)); err != nil {
			return nil, err
		}
	}
	if err = d.Rename(tmp, name); err != nil {
		return nil, fmt.Errorf("store: write: %w", err)
	}
	placed = true
	p := &Pending{f: f, d: d}
	if !durable {
		return p, nil
	}
	return nil, p.syncDir()
}

// Pending is a file written and renamed into place but not yet fsynced
// (Store.SaveDeferred, Store.WriteOwnedDeferred): every process sees it at
// once — a sidecar SIGKILLed after the write leaves it for the next one —
// but a machine crash before Sync returns can lose it or leave it empty.
// A nil *Pending is a write already durable. Its methods are not safe for
// concurrent use.
type Pending struct {
	f *os.File
	d *SafeDir
}

// Sync makes the write durable: fsync of the file, then of its directory
// (the rename). It releases the descriptors; later calls return nil.
// Errors: the fsync's (an I/O error), wrapped "store: write: …".
func (p *Pending) Sync() error {
	if p == nil || p.d == nil {
		return nil
	}
	if p.f != nil {
		err := p.f.Sync()
		if cerr := p.f.Close(); err == nil {
			err = cerr
		}
		p.f = nil
		if err != nil {
			p.Release()
			return fmt.Errorf("store: write: %w", err)
		}
	}
	return p.syncDir()
}

// syncDir fsyncs and closes the directory (closing a file still held).
func (p *Pending) syncDir() error {
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
	err := p.d.Sync()
	p.d.Close()
	p.d = nil
	if err != nil {
		return fmt.Errorf("store: write: %w", err)
	}
	return nil
}

// Release drops the descriptors without syncing (the write stays in place,
// as durable as the kernel makes it on its own). Later calls do nothing.
func (p *Pending) Release() {
	if p == nil || p.d == nil {
		return
	}
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
	p.d.Close()
	p.d = nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: sync dir: %w", err)
	}
	return nil
}
