package store

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Spare files: inodes allocated ahead of need.
//
// Creating a file is the one slow step of a small write on a busy ext4:
// the inode allocator skips inodes freed in the last moments
// (ext4's recently_deleted), and on a filesystem where files come and go
// it walks many before it finds one — 0.1–0.3 ms of CPU per create on
// the machine of docs/architecture.md ("Performance"), against ~10 µs for
// a rename. A session's open creates four files on its path (the key's
// hold file, the record's lock file, the record's and the ledger entry's
// temp files). A store that keeps spares (KeepSpares) creates empty temp
// files, 0600 and named like every temp file (".tmp-<hex>"), in its
// sessions/ and owned/ directories ahead of need, off the caller's path,
// and hands one out where a file would be created: as a temp file to
// write and rename into place, or renamed (without replacing) to the name
// of a lock file that does not exist yet. The owner makes them
// (FillSpares) when it is not waiting on the directory.
//
// A spare left behind by a killed sidecar is an ordinary stale temp file:
// RemoveStaleTemps removes it after its age. A spare is never used once it
// is spareMaxAge old, so a sibling's RemoveStaleTemps (age a minute) never
// removes one this store is about to use.

// spareMaxAge is the age after which a spare is discarded rather than used
// (half the age after which the ledger sweep removes a stale temp file,
// internal/adapter/recover.go).
const spareMaxAge = 30 * time.Second

// spare is one pre-created temp file, empty, named name in its
// directory; dev and ino identify it (the pool holds no descriptor, so a
// store's spares cost no file descriptors).
type spare struct {
	name     string
	dev, ino uint64
	made     time.Time
}

// sparePool holds a Store's spares, per directory. It runs no goroutine:
// FillSpares makes them in its caller's.
type sparePool struct {
	want int // spares kept per directory
	mu   sync.Mutex
	// byDir: the spares of each directory (its path as the SafeDir has
	// it), oldest first; filling: a FillSpares is making the directory's.
	byDir   map[string][]spare
	filling map[string]bool
	closed  bool
}

// KeepSpares makes s keep n (at least 1) spare files in each of its
// sessions/ and owned/ directories, made by FillSpares, and use them
// where it would create a file (see above). It makes none itself. Call
// Close to remove them. Calling it again has no effect.
func (s *Store) KeepSpares(n int) {
	s.spareOnce.Do(func() {
		s.spares.Store(&sparePool{want: max(n, 1), byDir: map[string][]spare{}, filling: map[string]bool{}})
	})
}

// FillSpares makes s's spares up to KeepSpares' n where any are missing,
// in the calling goroutine (a directory another FillSpares is filling is
// skipped); it returns when they are full, the store is closed or a
// create failed.
// Nothing for a store without spares. A write that takes a spare does not
// refill: a refill's creates hold the directory's lock and a journal
// handle while the inode allocator searches (above), so the writes right
// after them would wait for it. The owner refills when its latency-bound
// writes are done — the sidecar after it answers an open.
func (s *Store) FillSpares() {
	p := s.pool()
	if p == nil {
		return
	}
	for _, dir := range []string{s.sessions, s.owned} {
		p.mu.Lock()
		run := !p.closed && !p.filling[dir] && len(p.byDir[dir]) < p.want
		if run {
			p.filling[dir] = true
		}
		p.mu.Unlock()
		if run {
			p.fill(dir)
		}
	}
}

// Close removes s's spares and makes FillSpares make no more (a store
// without spares has nothing to do). s stays usable: later
// writes create their files as a store without spares does. Errors: none
// so far (a spare that cannot be removed is left to RemoveStaleTemps).
func (s *Store) Close() error {
	p := s.pool()
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.closed = true // a FillSpares under way removes what it makes next
	left := p.byDir
	p.byDir = map[string][]spare{}
	p.mu.Unlock()
	for dir, l := range left {
		d, err := OpenSafeDir(dir)
		if err != nil {
			continue
		}
		for _, sp := range l {
			if st, err := d.Lstat(sp.name); err == nil && uint64(st.Dev) == sp.dev && st.Ino == sp.ino {
				_ = d.Remove(sp.name)
			}
		}
		d.Close()
	}
	return nil
}

// fill creates spares in dir until it holds p.want, the pool closes or a
// create fails, then clears p.filling[dir] (which its caller set).
func (p *sparePool) fill(dir string) {
	d, err := OpenSafeDir(dir)
	if err == nil {
		defer d.Close()
	}
	for {
		var sp spare
		if err == nil {
			var f *os.File
			if f, sp.name, err = d.CreateTemp(); err == nil {
				var st unix.Stat_t
				if err = unix.Fstat(int(f.Fd()), &st); err == nil {
					sp.dev, sp.ino, sp.made = uint64(st.Dev), st.Ino, time.Now()
				}
				f.Close()
				if err != nil {
					_ = d.Remove(sp.name)
				}
			}
		}
		p.mu.Lock()
		if err != nil || p.closed {
			p.filling[dir] = false
			p.mu.Unlock()
			if err == nil {
				_ = d.Remove(sp.name)
			}
			return
		}
		p.byDir[dir] = append(p.byDir[dir], sp)
		full := len(p.byDir[dir]) >= p.want
		if full {
			p.filling[dir] = false
		}
		p.mu.Unlock()
		if full {
			return
		}
	}
}

// take hands out one of d's spares, still named in d, empty and younger
// than spareMaxAge; ok is false when there is none (the caller creates
// its file itself). A nil pool has none.
func (p *sparePool) take(d *SafeDir) (f *os.File, name string, ok bool) {
	if p == nil {
		return nil, "", false
	}
	for {
		p.mu.Lock()
		l := p.byDir[d.path]
		if len(l) == 0 {
			p.mu.Unlock()
			return nil, "", false
		}
		sp := l[0] // the oldest: none waits until it is too old to use
		p.byDir[d.path] = l[1:]
		p.mu.Unlock()
		if time.Since(sp.made) < spareMaxAge {
			// By name: no link, a regular file of this euid (d.OpenFile);
			// gone or not that file any more, it is not ours to remove.
			f, err := d.OpenFile(sp.name, os.O_RDWR, fileMode)
			if err != nil {
				continue
			}
			same, empty := spareState(f, sp)
			if same && empty {
				return f, sp.name, true
			}
			f.Close()
			if !same {
				continue
			}
		}
		// Too old, or written into: removed, if its name is still its own.
		if st, err := d.Lstat(sp.name); err == nil && uint64(st.Dev) == sp.dev && st.Ino == sp.ino {
			_ = d.Remove(sp.name)
		}
	}
}

// spareState reports whether f, opened by sp's name, is sp's file, and
// whether it is still empty (a spare something wrote into is not used).
func spareState(f *os.File, sp spare) (same, empty bool) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return false, false
	}
	return uint64(st.Dev) == sp.dev && st.Ino == sp.ino, st.Size == 0
}

// pool is s's spare pool, nil for a store without spares.
func (s *Store) pool() *sparePool { return s.spares.Load() }

// createTemp is d.CreateTemp, from s's spares when it keeps them.
func (s *Store) createTemp(d *SafeDir) (*os.File, string, error) {
	if f, name, ok := s.pool().take(d); ok {
		return f, name, nil
	}
	return d.CreateTemp()
}

// openOrCreate opens name in d read-write (O_RDWR|O_CREATE, fileMode, as
// d.OpenFile), creating it from a spare when s keeps them: the spare is
// renamed to name unless name exists meanwhile (then the existing file is
// opened and the spare removed). Errors: d.OpenFile's.
func (s *Store) openOrCreate(d *SafeDir, name string) (*os.File, error) {
	p := s.pool()
	if p == nil {
		return d.OpenFile(name, os.O_RDWR|os.O_CREATE, fileMode)
	}
	f, err := d.OpenFile(name, os.O_RDWR, fileMode)
	if !errors.Is(err, os.ErrNotExist) {
		return f, err
	}
	if sf, tmp, ok := p.take(d); ok {
		if d.renameNoReplace(tmp, name) == nil {
			return sf, nil
		}
		_ = d.Remove(tmp)
		sf.Close()
	}
	return d.OpenFile(name, os.O_RDWR|os.O_CREATE, fileMode)
}
