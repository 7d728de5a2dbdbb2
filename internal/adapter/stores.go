package adapter

import (
	"path/filepath"
	"slices"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// storeRegistry is the stores this sidecar opened, one per state
// directory keyed by its cleaned path ("/s" and "/s/" are one store, with
// one ledger sweep), and whether the host is initialized: a store opened
// after that is swept as it opens, one opened before by Initialized.
type storeRegistry struct {
	mu          sync.Mutex
	byDir       map[string]*store.Store
	initialized bool
}

// open returns dir's store, opening it on first use; sweep says the caller
// must sweep its ledger (a new store after initialize).
func (r *storeRegistry) open(dir string) (st *store.Store, sweep bool, err error) {
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

// closeAll removes every store's spares (Manager.Wait, when nothing
// writes or refills any more).
func (r *storeRegistry) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.byDir {
		_ = st.Close()
	}
}

// initialize marks the host initialized and returns the stores opened
// before, which the caller sweeps (open sweeps every later one).
func (r *storeRegistry) initialize() []*store.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.initialized = true
	out := make([]*store.Store, 0, len(r.byDir))
	for _, st := range r.byDir {
		out = append(out, st)
	}
	return out
}

// all is every store opened so far.
func (r *storeRegistry) all() []*store.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*store.Store, 0, len(r.byDir))
	for _, st := range r.byDir {
		out = append(out, st)
	}
	return out
}

// dirs is every state directory opened so far, sorted.
func (r *storeRegistry) dirs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.byDir))
	for d := range r.byDir {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// recoveries is the latest incomplete proof of each recovery still being
// retried, by ledger entry id: shutdown reports those it could not finish;
// and the entries whose recovery runs now, so a later sweep never starts a
// second recovery of one (sweep.go).
type recoveries struct {
	mu      sync.Mutex
	pending map[string]*protocol.Proof
	active  map[string]bool
}

// begin marks entry id's recovery as running; false if one already is.
func (r *recoveries) begin(id string) bool {
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

// end marks entry id's recovery as over.
func (r *recoveries) end(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, id)
}

// note remembers (p non-nil) or forgets entry id's latest proof.
func (r *recoveries) note(id string, p *protocol.Proof) {
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

// unfinished is the pending proofs now.
func (r *recoveries) unfinished() []*protocol.Proof {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*protocol.Proof, 0, len(r.pending))
	for _, p := range r.pending {
		out = append(out, p)
	}
	return out
}
