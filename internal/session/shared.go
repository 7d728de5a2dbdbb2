package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/egress"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/stats"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// Shared is what every session of one Manager shares: the configuration,
// the host, the counters, the registries (internal/registry) and the
// bounds of publications, with the Router back to the Manager. The Manager
// (internal/adapter) makes one, owns the registries and wait groups it
// points to, and keeps routing; a session reaches it as s.m. The
// registries are safe for concurrent use; the rest is set before the
// first session starts and never changes.
type Shared struct {
	// Config is the Manager's configuration (Logger never nil).
	Config config.Config
	// Host is the host connection (notifications, permission requests).
	Host Host
	// Log receives the sidecar's structured logs; never a secret.
	Log *zap.Logger
	// Stats are the sidecar's counters (sidecar/stats).
	Stats *stats.Counters
	// Stores are the state directories' stores.
	Stores *registry.Stores
	// Journals are the session journals open now (notify.go).
	Journals *registry.Journals
	// KeyLocks are the session-key flocks held, by lock-file path
	// (keyhold.go).
	KeyLocks *registry.KeyLocks
	// TmpSpares are private TMPDIRs made ahead of need; Refills makes
	// them and the stores' spare files after each open (registries.go).
	TmpSpares *registry.TmpSpares
	// Refills is the background refiller of TmpSpares and the stores'
	// spare files, asked after each open (registries.go).
	Refills *registry.SpareRefills
	// Sandboxes are what live sandboxed trees may write (registries.go).
	Sandboxes *registry.Sandboxes
	// NetTotals count every session's connections through an allow list;
	// NetBudget bounds them together (--max-connections; egress.go).
	NetTotals *egress.Counters
	// NetBudget is the --max-connections bound shared by all sessions'
	// allow-list connections; nil bounds nothing (egress.Budget).
	NetBudget *egress.Budget
	// Trees are the live-tree slots (--max-live-trees; registries.go).
	Trees *registry.LiveTrees
	// ProvDirs are the provider-state dirs of live sessions, by session
	// id (provstate.go).
	ProvDirs *registry.ProviderDirs
	// StateCtx bounds publications; cancelled once shutdown's bound has
	// passed.
	StateCtx context.Context
	// Actors counts running actors (Done when one stops); Retained counts
	// retained cleanups (close.go).
	Actors, Retained *sync.WaitGroup
	// Stop is closed at the end of the Manager's Shutdown: every actor
	// stops.
	Stop <-chan struct{}
	// Router is the Manager's side of a session's life.
	Router Router
}

// Router is the Manager's side of a session's life (internal/adapter's
// Manager implements it): the routing tables a session leaves, and the
// stores it opens (each first opened store's ledger is swept for dead
// sidecars' leftovers).
type Router interface {
	// Forget drops a session whose open failed (the host never learned
	// its id); keepKey keeps its key held while an incomplete cleanup is
	// retained.
	Forget(a *Actor, keepKey bool)
	// ReleaseKey frees a's sessionKey once it is closed or dead and
	// cleaned up.
	ReleaseKey(a *Actor)
	// NoteFinished records that a's cleanup ended (the Manager answers
	// status for a bounded number of finished sessions).
	NoteFinished(a *Actor)
	// Closing reports whether the sidecar is shutting down.
	Closing() bool
	// StoreFor opens (or returns) the store of state dir dir. Errors: the
	// store's (store.Open).
	StoreFor(dir string) (*store.Store, error)
}

// NewID returns prefix followed by 16 random hex digits (a session or
// cleanup id).
func NewID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// errShutdownAbort is the cause of an admission aborted by shutdown.
var errShutdownAbort = errors.New("sidecar shutdown")
