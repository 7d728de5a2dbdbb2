package registry

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// Spare private TMPDIRs: the directories a sandboxed session gets as its
// TMPDIR (internal/launch/sandbox.go; docs/protocol.md §19), made ahead of
// need, like the store's spare files
// (internal/store/spares.go) and for the same reason — a mkdir in a
// temp directory where files come and go costs 0.1–0.4 ms of the
// filesystem's inode allocation, on the open's path. A sandboxed open
// takes one (renamed to the session's own name); after its answer
// SpareRefills' goroutine makes the next. Spares are empty 0700
// directories named spareTmpPrefix+random in the TMPDIRs' parent
// directory (os.TempDir() resolved); one older than
// spareTmpMaxAge is removed rather than used, and a sidecar's start
// removes those a killed sidecar left (RemoveStaleTmpSpares).

// TmpSparesKept is how many spare TMPDIRs the Manager keeps.
const TmpSparesKept = 2

// spareTmpPrefix names spare TMPDIRs in os.TempDir().
const spareTmpPrefix = "acpx-spare-tmp-"

// spareTmpMaxAge: a spare this old is not used; RemoveStaleTmpSpares
// removes only those twice as old, so it never takes a live sidecar's.
const spareTmpMaxAge = 30 * time.Second

// TmpSpares is the Manager's pool of spare TMPDIRs (want of them), made
// in parent(). It runs no goroutine: SpareRefills' goroutine fills it
// (fill), Close removes what is left. Make one with NewTmpSpares; safe for
// concurrent use.
type TmpSpares struct {
	want   int
	parent func() string
	mu     sync.Mutex
	dirs   []tmpSpare // oldest first
	closed bool
}

// tmpSpare is one spare TMPDIR and when it was made.
type tmpSpare struct {
	path string
	made time.Time
}

// NewTmpSpares returns an empty pool that keeps want spares, made in the
// directory parent returns when they are made (internal/launch's
// PrivateTmpParent: os.TempDir() with its links resolved).
func NewTmpSpares(want int, parent func() string) *TmpSpares {
	return &TmpSpares{want: want, parent: parent}
}

// Take returns a new private TMPDIR named prefix+random in the pool's
// parent directory (0700, empty) made from a spare, or "" when there is
// none fit to use (the caller makes one: os.MkdirTemp). Like the store's,
// a take does not refill: SpareRefills does, after the open's answer (a
// mkdir beside the open's own work makes it wait).
func (p *TmpSpares) Take(prefix string) string {
	for {
		p.mu.Lock()
		if len(p.dirs) == 0 {
			p.mu.Unlock()
			return ""
		}
		sp := p.dirs[0] // the oldest: none waits until it is too old to use
		p.dirs = p.dirs[1:]
		p.mu.Unlock()
		if time.Since(sp.made) < spareTmpMaxAge && spareFit(sp.path) {
			// Renamed to a name of its own, never over anything there.
			for range 8 {
				dst := filepath.Join(filepath.Dir(sp.path), prefix+strconv.FormatUint(rand.Uint64(), 36))
				err := renameNoReplace(sp.path, dst)
				if err == nil {
					return dst
				}
				if !errors.Is(err, os.ErrExist) {
					break
				}
			}
		}
		_ = os.Remove(sp.path) // only ever an empty directory
	}
}

// spareFit reports whether path is still what a spare was made as: a
// directory (not a link) of this euid, mode 0700, empty.
func spareFit(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return false
	}
	d, err := os.Open(path)
	if err != nil {
		return false
	}
	defer d.Close()
	_, err = d.Readdirnames(1)
	return errors.Is(err, io.EOF)
}

// SpareRefills runs the refills asked for, one at a time, on a goroutine
// of its own that ends when none is left (so the refills' creates take
// one core at most, never the one writing the answer just sent); the
// Manager's Wait joins it (Wait). The zero value is ready; safe for
// concurrent use.
type SpareRefills struct {
	mu      sync.Mutex
	stores  map[*store.Store]bool // asked for, not yet begun
	tmp     *TmpSpares            // asked for, not yet begun (nil: none)
	running bool
	wg      sync.WaitGroup
}

// Request asks for st's spare files (store.Store.FillSpares; nil: none)
// and tmp's spare TMPDIRs (nil: none) to be refilled, starting the
// goroutine if none runs.
func (r *SpareRefills) Request(st *store.Store, tmp *TmpSpares) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st != nil {
		if r.stores == nil {
			r.stores = map[*store.Store]bool{}
		}
		r.stores[st] = true
	}
	if tmp != nil {
		r.tmp = tmp
	}
	if r.running {
		return
	}
	r.running = true
	r.wg.Add(1)
	go r.run()
}

// Wait blocks until the refill goroutine, if one runs, has ended (call
// when no more Request can come).
func (r *SpareRefills) Wait() { r.wg.Wait() }

// run is the refill goroutine: it takes the refills asked for until none
// is left.
func (r *SpareRefills) run() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		stores, tmp := r.stores, r.tmp
		r.stores, r.tmp = nil, nil
		if len(stores) == 0 && tmp == nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		for st := range stores {
			st.FillSpares()
		}
		if tmp != nil {
			tmp.fill()
		}
	}
}

// fill makes spares until the pool holds want, is closed, or a mkdir
// fails (SpareRefills' goroutine, its one caller).
func (p *TmpSpares) fill() {
	for {
		p.mu.Lock()
		done := p.closed || len(p.dirs) >= p.want
		p.mu.Unlock()
		if done {
			return
		}
		dir, err := os.MkdirTemp(p.parent(), spareTmpPrefix)
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = os.Remove(dir)
			return
		}
		p.dirs = append(p.dirs, tmpSpare{path: dir, made: time.Now()})
		p.mu.Unlock()
	}
}

// Close removes the spares left; fill makes no more (Manager.Wait).
func (p *TmpSpares) Close() {
	p.mu.Lock()
	p.closed = true
	left := p.dirs
	p.dirs = nil
	p.mu.Unlock()
	for _, sp := range left {
		_ = os.Remove(sp.path)
	}
}

// RemoveStaleTmpSpares removes the spare TMPDIRs in os.TempDir() that a
// sidecar killed before its Close left: empty, this euid's, older than
// twice spareTmpMaxAge (30 s). It returns how many.
func RemoveStaleTmpSpares() int {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), spareTmpPrefix+"*"))
	n := 0
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if err != nil || !strings.HasPrefix(fi.Name(), spareTmpPrefix) || time.Since(fi.ModTime()) < 2*spareTmpMaxAge {
			continue
		}
		if spareFit(d) && os.Remove(d) == nil {
			n++
		}
	}
	return n
}
