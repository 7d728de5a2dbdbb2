package registry

import (
	"errors"
	"io/fs"
	"os"
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// A session key is held in two ways (docs/protocol.md §8 session/open,
// SESSION_KEY_IN_USE): within this sidecar by the Manager's table of live
// sessions by key, and across sidecars sharing a stateDir by the key's
// flock (store.KeyLock). The flock is taken in admission before the
// record, journal or ledger are touched, and kept until the session's last
// write to the key's files — its journal closed after the final proof, or
// a retained cleanup's final proof journaled. Within this process the
// flock is shared by reference count (KeyLocks): an earlier session of the
// key finishing its journal must not make a new session of this sidecar
// look like another sidecar's.

// KeyLocks is the session-key flocks this sidecar holds, by lock-file
// path (store.Store.KeyLockPath), each shared by reference count. The zero
// value holds none and is ready; safe for concurrent use.
type KeyLocks struct {
	t refTable[keyLockRef]
}

// keyLockRef is one flock this sidecar holds and how many holds share it.
type keyLockRef struct {
	l    *store.KeyLock
	refs int
}

// Hold takes one hold of key's flock in st: a new flock if this sidecar
// has none, else another reference to it. The returned release is
// idempotent; the last one releases the flock, removing its hold file when
// the key has neither record nor journal left in st. Errors:
// store.ErrKeyHeld (another sidecar holds it; a *store.KeyHeldError), or
// the store's.
func (k *KeyLocks) Hold(st *store.Store, key string) (func(), error) {
	path := st.KeyLockPath(key)
	k.t.mu.Lock()
	defer k.t.mu.Unlock()
	ref := k.t.refs[path]
	if ref == nil {
		l, err := st.LockKey(key)
		if err != nil {
			return nil, err
		}
		ref = &keyLockRef{l: l}
		k.t.put(path, ref)
	}
	ref.refs++
	released := false
	return func() {
		k.t.mu.Lock()
		defer k.t.mu.Unlock()
		if released {
			return
		}
		released = true
		if ref.refs--; ref.refs == 0 {
			if k.t.refs[path] == ref {
				delete(k.t.refs, path)
			}
			if keyLeftNothing(st, key) {
				// A refused open or a discarded key leaves no hold file
				// behind (found by a fresh-user trial).
				_ = ref.l.Remove()
			}
			ref.l.Release()
		}
	}, nil
}

// keyLeftNothing reports whether key has neither a record nor a journal
// segment in st (its hold file may then go).
func keyLeftNothing(st *store.Store, key string) bool {
	if _, err := st.Load(key); !errors.Is(err, store.ErrNotFound) {
		return false
	}
	stem := journal.Stem(key)
	for i := 0; i < journal.Segments; i++ {
		if _, err := os.Lstat(journal.SegmentPath(st.SessionsDir(), stem, i)); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

// ReleaseAll drops every flock still held (Manager.Wait: a retained
// cleanup stopped by shutdown keeps its hold until then; the process exit
// would drop it anyway).
func (k *KeyLocks) ReleaseAll() {
	k.t.mu.Lock()
	defer k.t.mu.Unlock()
	for path, ref := range k.t.refs {
		ref.l.Release()
		delete(k.t.refs, path)
	}
}

// refTable is a table of shared, reference-counted handles by key (the
// open journals and held key flocks), guarded by its own mutex.
type refTable[T any] struct {
	mu   sync.Mutex
	refs map[string]*T
}

// put adds v under key; the caller holds r.mu.
func (r *refTable[T]) put(key string, v *T) {
	if r.refs == nil {
		r.refs = map[string]*T{}
	}
	r.refs[key] = v
}
