package registry

import (
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Stores is the stores this sidecar opened, one per state directory keyed
// by its cleaned path ("/s" and "/s/" are one store, with one ledger
// sweep), and whether the host is initialized: a store opened after that
// is swept as it opens, one opened before by Initialize's caller
// (docs/protocol.md §6, §7 initialize). The zero value is empty and ready;
// safe for concurrent use.
type Stores struct {
	mu          sync.Mutex
	byDir       map[string]*store.Store
	initialized bool
}

// Open returns dir's store, opening it on first use (store.Open, which
// keeps storeSpares spare files per directory); sweep says the caller must
// sweep its ledger (a new store after Initialize). Errors: store.Open's,
// nothing registered.
func (r *Stores) Open(dir string) (st *store.Store, sweep bool, err error) {
	if dir != "" {
		dir = filepath.Clean(dir)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.byDir[dir]; ok {
		return st, false, nil
	}
	st, err = store.Open(dir)
	if err != nil {
		return nil, false, err
	}
	// Files made ahead of need, so an open does not wait on the
	// filesystem's inode allocation (store/spares.go): an open uses three
	// in sessions/ and two in owned/.
	st.KeepSpares(storeSpares)
	if r.byDir == nil {
		r.byDir = map[string]*store.Store{}
	}
	r.byDir[dir] = st
	return st, r.initialized, nil
}

// storeSpares is how many spare files each store keeps per directory.
const storeSpares = 4

// CloseAll removes every store's spares (Manager.Wait, when nothing
// writes or refills any more).
func (r *Stores) CloseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.byDir {
		_ = st.Close()
	}
}

// Initialize marks the host initialized and returns the stores opened
// before, which the caller sweeps (Open's sweep says so for every later
// one).
func (r *Stores) Initialize() []*store.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.initialized = true
	return values(r.byDir)
}

// All is every store opened so far, in no order.
func (r *Stores) All() []*store.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	return values(r.byDir)
}

// Dirs is every state directory opened so far (cleaned paths), sorted.
func (r *Stores) Dirs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.byDir))
	for d := range r.byDir {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Recoveries is the latest incomplete proof of each recovery of a dead
// sidecar's leftover still being retried, by ledger entry id: shutdown
// reports those it could not finish (docs/protocol.md §7 shutdown, §12);
// and the entries whose recovery runs now, so a later sweep never starts a
// second recovery of one (internal/adapter/sweep.go). The zero value is
// empty and ready; safe for concurrent use.
type Recoveries struct {
	mu      sync.Mutex
	pending map[string]*protocol.Proof
	active  map[string]bool
}

// Begin marks entry id's recovery as running; false if one already is.
func (r *Recoveries) Begin(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[id] {
		return false
	}
	if r.active == nil {
		r.active = map[string]bool{}
	}
	r.active[id] = true
	return true
}

// End marks entry id's recovery as over.
func (r *Recoveries) End(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, id)
}

// Note remembers (p non-nil) or forgets (p nil) entry id's latest
// incomplete proof.
func (r *Recoveries) Note(id string, p *protocol.Proof) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == nil {
		delete(r.pending, id)
		return
	}
	if r.pending == nil {
		r.pending = map[string]*protocol.Proof{}
	}
	r.pending[id] = p
}

// Unfinished is the incomplete proofs noted now, in no order.
func (r *Recoveries) Unfinished() []*protocol.Proof {
	r.mu.Lock()
	defer r.mu.Unlock()
	return values(r.pending)
}

// values is m's values in a new non-nil slice, in no order (Stores.All,
// Stores.Initialize, Recoveries.Unfinished).
func values[K comparable, V any](m map[K]V) []V {
	return slices.AppendSeq(make([]V, 0, len(m)), maps.Values(m))
}
