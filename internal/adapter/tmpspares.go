package adapter

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
// TMPDIR (sandbox.go), made ahead of need, like the store's spare files
// (internal/store/spares.go) and for the same reason — a mkdir in a
// temp directory where files come and go costs 0.1–0.4 ms of the
// filesystem's inode allocation, on the open's path. A sandboxed open
// takes one (renamed to the session's own name, tmpPrefix); after its
// answer spareRefills' goroutine makes the next. Spares are empty 0700
// directories named spareTmpPrefix+random in os.TempDir(); one older than
// spareTmpMaxAge is removed rather than used, and a sidecar's start
// removes those a killed sidecar left (removeStaleTmpSpares).

// tmpSparesKept is how many spare TMPDIRs the Manager keeps.
const tmpSparesKept = 2

// spareTmpPrefix names spare TMPDIRs in os.TempDir().
const spareTmpPrefix = "acpx-spare-tmp-"

// spareTmpMaxAge: a spare this old is not used; removeStaleTmpSpares
// removes only those twice as old, so it never takes a live sidecar's.
const spareTmpMaxAge = 30 * time.Second

// tmpSpares is the Manager's pool of spare TMPDIRs (want of them). It
// runs no goroutine: spareRefills' goroutine fills it (fill), close
// removes what is left.
type tmpSpares struct {
	want   int
	mu     sync.Mutex
	dirs   []tmpSpare // oldest first
	closed bool
}

type tmpSpare struct {
	path string
	made time.Time
}

// take returns a new private TMPDIR named prefix+random in
// privateTmpParent() (0700, empty) made from a spare, or "" when there is
// none fit to use (the caller makes one: os.MkdirTemp). Like the store's,
// a take does not refill: spareRefills does, after the open's answer (a
// mkdir beside the open's own work makes it wait).
func (p *tmpSpares) take(prefix string) string {
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

// refillSpares asks for the session's store's spare files and, when the
// session got a private TMPDIR, the Manager's spare TMPDIRs to be
// refilled: called once the open is answered, when their creates no
// longer delay it.
func (s *session) refillSpares() {
	var tmp *tmpSpares
	if s.end.tmpDir != "" { // only a sidecar that makes private TMPDIRs keeps spares of them
		tmp = &s.m.tmpSpares
	}
	s.m.refills.request(s.rec.st, tmp)
}

// spareRefills runs the refills asked for, one at a time, on a goroutine
// of its own that ends when none is left (so the refills' creates take
// one core at most, never the one writing the answer just sent); the
// Manager's Wait joins it.
type spareRefills struct {
	mu      sync.Mutex
	stores  map[*store.Store]bool // asked for, not yet begun
	tmp     *tmpSpares            // asked for, not yet begun (nil: none)
	running bool
	wg      sync.WaitGroup
}

// request asks for st's spares (nil: none) and tmp's to be refilled.
func (r *spareRefills) request(st *store.Store, tmp *tmpSpares) {
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

func (r *spareRefills) run() {
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
// fails (spareRefills' goroutine, its one caller).
func (p *tmpSpares) fill() {
	for {
		p.mu.Lock()
		done := p.closed || len(p.dirs) >= p.want
		p.mu.Unlock()
		if done {
			return
		}
		dir, err := os.MkdirTemp(privateTmpParent(), spareTmpPrefix)
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

// close removes the spares left; fill makes no more.
func (p *tmpSpares) close() {
	p.mu.Lock()
	p.closed = true
	left := p.dirs
	p.dirs = nil
	p.mu.Unlock()
	for _, sp := range left {
		_ = os.Remove(sp.path)
	}
}

// removeStaleTmpSpares removes the spare TMPDIRs in os.TempDir() that a
// sidecar killed before its close left: empty, this euid's, older than
// twice spareTmpMaxAge. It returns how many.
func removeStaleTmpSpares() int {
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
