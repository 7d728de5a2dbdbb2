package adapter

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A state dir is never writable to a sandboxed agent (docs/protocol.md
// §19): every state dir this sidecar uses when a sandbox is set up is
// protected in it (sandboxPaths). A state dir first used later would not
// be, by the domains of the trees already running, so an open naming one
// that a live sandboxed tree can write — beneath its cwd, HOME, TMPDIR or
// sandbox.writable, and not kept read-only there — is refused
// SANDBOX_CONFLICT (found by a fresh-user trial: one agent rewrote another
// session's record); so is one that holds such a path (a writable root
// inside a state dir). liveSandboxes holds what each live sandboxed tree
// may write; setupSandbox registers it under the same lock under which it
// reads the state dirs, and an open checks its state dir and only then
// registers it as one of this sidecar's, under that lock (openStateDir).

// liveSandboxes is the Manager's record of live sandboxed trees' writable
// roots, by session.
type liveSandboxes struct {
	mu   sync.Mutex
	live map[*session]liveSandbox
}

// liveSandbox is one tree's writable roots and the paths kept read-only
// beneath them (bind mounts), all resolved, and its key's private HOME
// ("" if none), a writable root inside its own state dir.
type liveSandbox struct {
	id       string
	writable []string
	readOnly []string
	home     string
}

// add records s's tree's writable and read-only paths and its private
// HOME (l.mu held).
func (l *liveSandboxes) addLocked(s *session, writable, readOnly []string, home string) {
	if l.live == nil {
		l.live = map[*session]liveSandbox{}
	}
	l.live[s] = liveSandbox{id: s.id, writable: writable, readOnly: readOnly, home: home}
}

// forget drops s: its tree is proven gone.
func (l *liveSandboxes) forget(s *session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, s)
}

// openStateDir is storeFor(dir), unless a live sandboxed tree other than
// self's can write in dir (checkStateDirLocked: e set, nothing opened, so
// a refused dir never becomes one of this sidecar's state dirs). The
// check and the store's registration happen under l.mu, under which
// setupSandbox reads the state dirs and registers its tree: either that
// tree's domain protects dir, or this open sees the tree. err is
// storeFor's.
func (m *Manager) openStateDir(dir string, self *session) (st *store.Store, e *protocol.Error, err error) {
	m.sbx.mu.Lock()
	defer m.sbx.mu.Unlock()
	if e := m.sbx.checkStateDirLocked(dir, self); e != nil {
		return nil, e, nil
	}
	st, err = m.storeFor(dir)
	return st, nil, err
}

// checkStateDirLocked refuses dir (a state dir, as the open named it) when a
// live sandboxed tree other than self's can write in it — dir lies
// beneath one of its writable roots (and not beneath a path kept
// read-only there), or holds one: SANDBOX_CONFLICT, data.paths [dir
// resolved]. nil when none can.
func (l *liveSandboxes) checkStateDirLocked(dir string, self *session) *protocol.Error {
	if len(l.live) == 0 {
		return nil
	}
	real := resolveExisting(dir)
	for s, ls := range l.live {
		inWritable := beneathAny(real, ls.writable) && !beneathAny(real, ls.readOnly)
		// A private HOME lies in its own state dir by design: that state
		// dir is protected in every tree (sandboxPaths), the HOME alone
		// writable, by its key's tree alone.
		others := slices.DeleteFunc(slices.Clone(ls.writable), func(w string) bool { return w == ls.home && ls.home != "" })
		if s == self || !inWritable && !holdsAny(real, others) {
			continue
		}
		e := protocol.Domain(protocol.ErrSandboxConflict, "the stateDir lies where live session "+ls.id+
			"'s sandbox lets its agent write, so its records and ownership ledger would not be safe from that agent; use a stateDir outside every sandboxed session's cwd, HOME, TMPDIR and sandbox.writable", false)
		e.Data.Paths = []string{real}
		return e
	}
	return nil
}

// resolveExisting is dir with the symlinks of its longest existing prefix
// resolved: a state dir that does not exist yet is made where its parent
// really is (a link to an agent's cwd included).
func resolveExisting(dir string) string {
	dir = filepath.Clean(dir)
	rest := ""
	for p := dir; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return dir
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// holdsAny reports whether some path of paths lies beneath dir (a
// writable root inside a state dir opens part of it to the agent).
func holdsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if p != dir && beneathAny(p, []string{dir}) {
			return true
		}
	}
	return false
}

// beneathAny reports whether p is one of roots or lies beneath one.
func beneathAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}
