package registry

import (
	"slices"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fspath"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A state dir is never writable to a sandboxed agent (docs/protocol.md
// §19): every state dir this sidecar uses when a sandbox is set up is
// protected in it (admission.SandboxConfig.SandboxPaths). A state dir first used
// later would not be, by the domains of the trees already running, so an
// open naming one that a live sandboxed tree can write — beneath its cwd,
// HOME, TMPDIR or sandbox.writable, and not kept read-only there — is
// refused SANDBOX_CONFLICT (found by a fresh-user trial: one agent
// rewrote another session's record); so is one that holds such a path (a
// writable root inside a state dir). Sandboxes holds what each live
// sandboxed tree may write; launch.SetupSandbox registers it under
// the same lock under which it reads the state dirs, and an open checks
// its state dir and only then registers it as one of this sidecar's,
// under that lock (internal/session's Shared.openStateDir).

// Sandboxes is the record of live sandboxed trees' writable roots, by
// owner (the session id). Its lock (Lock, Unlock) guards it; the methods
// named …Locked expect it held, the others take it. The zero value is
// empty and ready.
type Sandboxes struct {
	mu   sync.Mutex
	live map[string]liveSandbox
}

// liveSandbox is one tree's writable roots and the paths kept read-only
// beneath them (bind mounts), all resolved, and its key's private HOME
// ("" if none), a writable root inside its own state dir.
type liveSandbox struct {
	writable []string
	readOnly []string
	home     string
}

// Lock takes the lock under which a tree is registered and a state dir
// checked and opened.
func (l *Sandboxes) Lock() { l.mu.Lock() }

// Unlock releases Lock's lock.
func (l *Sandboxes) Unlock() { l.mu.Unlock() }

// AddLocked records owner's tree's writable and read-only paths (resolved)
// and its private HOME ("" if none), replacing what owner had (l's lock
// held).
func (l *Sandboxes) AddLocked(owner string, writable, readOnly []string, home string) {
	if l.live == nil {
		l.live = map[string]liveSandbox{}
	}
	l.live[owner] = liveSandbox{writable: writable, readOnly: readOnly, home: home}
}

// Forget drops owner: its tree is proven gone.
func (l *Sandboxes) Forget(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, owner)
}

// CheckStateDirLocked refuses dir (a state dir, as the open named it) when
// a live sandboxed tree other than self's (self: the opening session's
// id) can write in it — dir lies beneath one of its writable roots (and
// not beneath a path kept read-only there), or holds one: SANDBOX_CONFLICT
// (docs/protocol.md §19), data.paths [dir resolved]. nil when none can.
// l's lock held.
func (l *Sandboxes) CheckStateDirLocked(dir, self string) *protocol.Error {
	if len(l.live) == 0 {
		return nil
	}
	real := fspath.ResolveExisting(dir)
	for owner, ls := range l.live {
		inWritable := fspath.BeneathAny(real, ls.writable) && !fspath.BeneathAny(real, ls.readOnly)
		// A private HOME lies in its own state dir by design: that state
		// dir is protected in every tree (admission's SandboxPaths), the HOME alone
		// writable, by its key's tree alone.
		others := slices.DeleteFunc(slices.Clone(ls.writable), func(w string) bool { return w == ls.home && ls.home != "" })
		if owner == self || !inWritable && !fspath.HoldsAny(real, others) {
			continue
		}
		e := protocol.Domain(protocol.ErrSandboxConflict, "the stateDir lies where live session "+owner+
			"'s sandbox lets its agent write, so its records and ownership ledger would not be safe from that agent; use a stateDir outside every sandboxed session's cwd, HOME, TMPDIR and sandbox.writable", false)
		e.Data.Paths = []string{real}
		return e
	}
	return nil
}
