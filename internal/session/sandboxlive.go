package session

import (
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A state dir is never writable to a sandboxed agent (docs/protocol.md
// §19): every state dir this sidecar uses when a sandbox is set up is
// protected in it (admission.SandboxConfig.SandboxPaths). A state dir first used later would not
// be, by the domains of the trees already running, so an open naming one
// that a live sandboxed tree can write — beneath its cwd, HOME, TMPDIR or
// sandbox.writable, and not kept read-only there — is refused
// SANDBOX_CONFLICT (found by a fresh-user trial: one agent rewrote another
// session's record); so is one that holds such a path (a writable root
// inside a state dir). Shared.Sandboxes (internal/registry's Sandboxes) holds
// what each live sandboxed tree may write; launch.SetupSandbox registers it under
// the same lock under which it reads the state dirs, and an open checks
// its state dir and only then registers it as one of this sidecar's, under
// that lock (openStateDir).

// openStateDir is Router.StoreFor(dir), unless a live sandboxed tree other than
// self's can write in dir (Sandboxes.CheckStateDirLocked: e set, nothing
// opened, so a refused dir never becomes one of this sidecar's state
// dirs). The check and the store's registration happen under m.Sandboxes's
// lock, under which launch.SetupSandbox reads the state dirs and registers its
// tree: either that tree's domain protects dir, or this open sees the
// tree. err is StoreFor's.
func (m *Shared) openStateDir(dir string, self *Actor) (st *store.Store, e *protocol.Error, err error) {
	m.Sandboxes.Lock()
	defer m.Sandboxes.Unlock()
	if e := m.Sandboxes.CheckStateDirLocked(dir, self.id); e != nil {
		return nil, e, nil
	}
	st, err = m.Router.StoreFor(dir)
	return st, nil, err
}
