package registry

import (
	"sync"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fspath"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// ProviderDirs is the provider-state directories of live sessions, by
// resolved path, each held by one owner (a session id) at a time
// (docs/protocol.md §24, Portable provider state): an archive never
// carries another session's files. The zero value is empty and ready;
// safe for concurrent use.
type ProviderDirs struct {
	mu   sync.Mutex
	dirs map[string]string // path → owner
}

// Claim registers srcs (their Paths resolved) as owner's; STATE_CONFLICT
// with data.paths [the source's path], nothing registered, when one of
// them is, holds or lies inside another owner's.
func (r *ProviderDirs) Claim(owner string, srcs []statestore.Source) *protocol.Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, src := range srcs {
		for dir, other := range r.dirs {
			if other == owner {
				continue
			}
			if dir == src.Path || fspath.BeneathAny(dir, []string{src.Path}) || fspath.BeneathAny(src.Path, []string{dir}) {
				e := protocol.Domain(protocol.ErrStateConflict, "the provider-state directory "+src.Name+
					" is used by live session "+other+" (an archive never carries another session's files)", false)
				e.Data.Paths = []string{src.Path}
				return e
			}
		}
	}
	if r.dirs == nil {
		r.dirs = map[string]string{}
	}
	for _, src := range srcs {
		r.dirs[src.Path] = owner
	}
	return nil
}

// Release forgets owner's provider-state directories (its session has
// ended).
func (r *ProviderDirs) Release(owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for dir, other := range r.dirs {
		if other == owner {
			delete(r.dirs, dir)
		}
	}
}
