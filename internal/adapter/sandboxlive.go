package adapter

import (
	"path/filepath"
	"strings"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A state dir is never writable to a sandboxed agent (docs/protocol.md
// §19): every state dir this sidecar uses when a sandbox is set up is
// protected in it (sandboxPaths). A state dir first used later would not
// be, by the domains of the trees already running, so an open naming one
// that a live sandboxed tree can write — beneath its cwd, HOME, TMPDIR or
// sandbox.writable, and not kept read-only there — is refused
// SANDBOX_CONFLICT (found by a fresh-user trial: one agent rewrote another
// session's record). liveSandboxes holds what each live sandboxed tree
// may write; setupSandbox registers it under the same lock under which it
// reads the state dirs, and an open checks its state dir, already
// registered as one of this sidecar's, under that lock: either the tree's
// domain protects the dir, or the open sees the tree.

// liveSandboxes is the Manager's record of live sandboxed trees' writable
// roots, by session.
type liveSandboxes struct {
	mu   sync.Mutex
	live map[*session]liveSandbox
}

// liveSandbox is one tree's writable roots and the paths kept read-only
// beneath them (bind mounts), all resolved.
type liveSandbox struct {
	id       string
	writable []string
	readOnly []string
}

// add records s's tree's writable and read-only paths (l.mu held).
func (l *liveSandboxes) addLocked(s *session, writable, readOnly []string) {
	if l.live == nil {
		l.live = map[*session]liveSandbox{}
	}
	l.live[s] = liveSandbox{id: s.id, writable: writable, readOnly: readOnly}
}

// forget drops s: its tree is proven gone.
func (l *liveSandboxes) forget(s *session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, s)
}

// checkStateDir refuses dir (a state dir, as the open named it) when a
// live sandboxed tree other than self's can write it: SANDBOX_CONFLICT,
// data.paths [dir resolved]. nil when none can.
func (l *liveSandboxes) checkStateDir(dir string, self *session) *protocol.Error {
	real := filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		real = r
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for s, ls := range l.live {
		if s == self || !beneathAny(real, ls.writable) || beneathAny(real, ls.readOnly) {
			continue
		}
		e := protocol.Domain(protocol.ErrSandboxConflict, "the stateDir lies where live session "+ls.id+
			"'s sandbox lets its agent write, so its records and ownership ledger would not be safe from that agent; use a stateDir outside every sandboxed session's cwd, HOME, TMPDIR and sandbox.writable", false)
		e.Data.Paths = []string{real}
		return e
	}
	return nil
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
