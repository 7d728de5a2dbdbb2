// Package adapter is the host's way into the sessions: its Manager
// implements internal/rpc's Backend, derives each session/open's admission
// plan (internal/admission), starts one session actor per admitted open
// (internal/session) and routes every later request to it by session id;
// it keeps the routing tables (sessions by id, live sessions by key,
// finished ones), owns what the sessions share (session.Shared: the
// registries of internal/registry, the counters, the wait groups), recovers
// dead sidecars' leftovers from the state dirs' ledgers (recover.go,
// sweep.go) and runs shutdown (manager.go, shutdown_proofs.go). It holds
// no session state: that belongs to each actor.
package adapter

import (
	"context"
	"runtime"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo"
	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/egress"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/internal/stats"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Manager routes host requests to session actors (internal/session) and
// owns what they share: the registries, counters and wait groups its
// Shared points to. Its mutex guards only the routing tables; session
// state belongs to each session's actor goroutine. It implements
// session.Router.
type Manager struct {
	// sh is what every session shares (its Config, Host and Log are the
	// Manager's).
	sh *session.Shared

	mu       sync.Mutex
	sessions map[string]*session.Actor // by session id (closed ones included)
	keys     map[string]*session.Actor // live sessions by sessionKey
	closing  bool
	finished []*session.Actor // sessions whose cleanup ended, oldest first

	// recovering are the recoveries of dead sidecars' leftovers not
	// finished yet (recover.go).
	recovering  registry.Recoveries
	stateCancel context.CancelFunc // ends Shared.StateCtx

	actors   sync.WaitGroup // Shared.Actors
	retained sync.WaitGroup // Shared.Retained
	readers  sync.WaitGroup // session/events reads
	// background are the manager's own loops (the live sweep, sweep.go).
	background sync.WaitGroup
	stopCh     chan struct{} // Shared.Stop: closed at the end of Shutdown
	stopOnce   sync.Once
}

// NewManager returns a Manager sending to host, with empty registries.
func NewManager(cfg config.Config, host session.Host) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Caps.MaxProviderLineBytes <= 0 {
		cfg.Caps.MaxProviderLineBytes = protocol.DefaultMaxProviderLineBytes
	}
	m := &Manager{sessions: map[string]*session.Actor{}, keys: map[string]*session.Actor{}, stopCh: make(chan struct{})}
	stateCtx, cancel := context.WithCancel(context.Background())
	m.stateCancel = cancel
	m.sh = &session.Shared{Config: cfg, Host: host, Log: cfg.Logger, Stats: &stats.Counters{},
		Stores: &registry.Stores{}, Journals: registry.NewJournals(cfg.Caps.JournalMaxBytes, cfg.Logger),
		KeyLocks: &registry.KeyLocks{}, TmpSpares: registry.NewTmpSpares(registry.TmpSparesKept, launch.PrivateTmpParent),
		Refills: &registry.SpareRefills{}, Sandboxes: &registry.Sandboxes{}, NetTotals: &egress.Counters{},
		NetBudget: egress.NewBudget(cfg.Egress.MaxConnections), Trees: registry.NewLiveTrees(cfg.Caps.MaxLiveTrees),
		ProvDirs: &registry.ProviderDirs{}, StateCtx: stateCtx, Actors: &m.actors, Retained: &m.retained,
		Stop: m.stopCh, Router: m}
	return m
}

// Bounds reports the bounds in force (initialize.bounds), in ms.
func (m *Manager) Bounds() protocol.Bounds { return m.sh.Config.Bounds.Wire() }

// Initialize answers `initialize` (docs/protocol.md §7); Pid is filled by rpc.
func (m *Manager) Initialize(p protocol.InitializeParams) protocol.InitializeResult {
	containment := "none" // every open is refused with PLATFORM_UNSUPPORTED
	var mode reaper.Mode
	if m.sh.Config.Launcher != nil {
		mode = m.sh.Config.Launcher.Mode()
		containment = string(mode)
	}
	caps := protocol.ServerCaps{Containment: containment, Agents: profiles.Names(), InheritEnv: m.inheritPolicy(),
		Sandbox:      admission.SandboxCaps(m.sh.Config.Sandbox.Caps, m.sh.Config.Sandbox.Default, mode, m.sh.Config.Egress.Unsupported),
		MaxSessions:  max(m.sh.Config.Caps.MaxSessions, 0),
		MaxLiveTrees: max(m.sh.Config.Caps.MaxLiveTrees, 0)}
	if ss := m.sh.Config.StateStore; ss != nil {
		caps.StateStore = &protocol.StateStoreCaps{Kind: ss.Kind(), KeyID: ss.KeyID()}
	}
	return protocol.InitializeResult{ProtocolVersion: protocol.Version,
		ServerInfo:   protocol.Implementation{Name: protocol.ServerName, Version: buildinfo.Version()},
		Capabilities: caps,
		Bounds:       m.Bounds()}
}

// settings is the sidecar's side of every open's admission plan
// (internal/admission), from Config.
func (m *Manager) settings() admission.Settings {
	var mode reaper.Mode
	if m.sh.Config.Launcher != nil {
		mode = m.sh.Config.Launcher.Mode()
	}
	return admission.Settings{StateDir: m.sh.Config.StateDir, Mode: mode, DefaultLimits: m.sh.Config.DefaultLimits,
		LimitsSupported: m.sh.Config.LimitsSupported, Env: m.sh.Config.Env, Sandbox: m.sh.Config.Sandbox}
}

// inheritPolicy is the --inherit-env policy in force (docs/protocol.md
// §18.1).
func (m *Manager) inheritPolicy() string {
	if m.sh.Config.Env.Policy == "" {
		return protocol.InheritMinimal
	}
	return m.sh.Config.Env.Policy
}

// Open admits a session (docs/protocol.md §8 session/open). Unknown agents are
// refused before anything is constructed (docs/rules.md#r13); a platform
// without containment is refused before launch (docs/rules.md#r2); an open
// cancelled before it starts launches nothing (docs/rules.md#r1).
func (m *Manager) Open(ctx context.Context, p protocol.OpenParams, reply session.Reply) {
	plan, e := m.settings().Derive(p, runtime.GOOS)
	if e != nil {
		reply(nil, e)
		return
	}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		reply(nil, protocol.Domain(protocol.ErrShuttingDown, "the sidecar is shutting down", false))
		return
	}
	if other := m.keys[plan.Params.SessionKey]; other != nil {
		m.mu.Unlock()
		e := protocol.Domain(protocol.ErrSessionKeyInUse, "sessionKey is held by live session "+other.ID(), true)
		e.Data.HeldBy = protocol.HeldByThisSidecar
		reply(nil, e)
		return
	}
	if e := m.atCapacityLocked(); e != nil {
		m.mu.Unlock()
		reply(nil, e)
		return
	}
	s := session.New(m.sh, session.NewID("s-"), plan)
	m.sessions[s.ID()] = s
	m.keys[plan.Params.SessionKey] = s
	s.Start(ctx, reply)
	m.mu.Unlock()
}

// Forget drops a session whose open failed: the host never learned its
// id. Its key stays held (keepKey) while an incomplete cleanup is
// retained (session.Router).
func (m *Manager) Forget(s *session.Actor, keepKey bool) {
	m.mu.Lock()
	if m.sessions[s.ID()] == s {
		delete(m.sessions, s.ID())
	}
	if !keepKey && m.keys[s.Key()] == s {
		delete(m.keys, s.Key())
	}
	m.mu.Unlock()
}

// MaxFinishedSessions is how many closed or dead sessions the manager keeps
// answering status and repeated closes for; older ones are retired
// (SESSION_NOT_FOUND), so a long-running sidecar's memory stays bounded.
const MaxFinishedSessions = 1024

// NoteFinished records that s's cleanup ended and retires the oldest
// finished sessions beyond MaxFinishedSessions (session.Router).
func (m *Manager) NoteFinished(s *session.Actor) {
	m.mu.Lock()
	m.finished = append(m.finished, s)
	var retire []*session.Actor
	for len(m.finished) > MaxFinishedSessions {
		old := m.finished[0]
		m.finished = m.finished[1:]
		if m.sessions[old.ID()] == old {
			delete(m.sessions, old.ID())
		}
		retire = append(retire, old)
	}
	m.mu.Unlock()
	for _, old := range retire {
		old.Retire(old == s)
	}
}

// ReleaseKey frees sessionKey once s is closed or dead and cleaned up
// (session.Router).
func (m *Manager) ReleaseKey(s *session.Actor) {
	m.mu.Lock()
	if m.keys[s.Key()] == s {
		delete(m.keys, s.Key())
	}
	m.mu.Unlock()
}

// Closing reports whether Shutdown has begun (session.Router).
func (m *Manager) Closing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closing
}

// List lists every session this sidecar knows, oldest first, each as of
// its last state change (it never waits on an actor).
func (m *Manager) List() []protocol.ListEntry {
	out := make([]protocol.ListEntry, 0)
	for _, s := range m.all() {
		e := s.ListEntry()
		m.mu.Lock()
		current := m.sessions[s.ID()] == s // a failed open is forgotten meanwhile
		m.mu.Unlock()
		if current {
			out = append(out, e)
		}
	}
	return out
}

// all is every session this sidecar knows, oldest first.
func (m *Manager) all() []*session.Actor {
	m.mu.Lock()
	all := make([]*session.Actor, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Created().Before(all[j].Created()) })
	return all
}

// Shutdown refuses new opens, closes every live session with origin
// "shutdown" and waits for their proofs and for retained cleanups, bounded
// by Config.Bounds.Shutdown; then stops every actor. It returns one proof per
// session that had launched a provider.
func (m *Manager) Shutdown() []*protocol.Proof {
	m.mu.Lock()
	m.closing = true
	if m.sh.Config.Launcher != nil {
		m.sh.Config.Launcher.Seal() // docs/rules.md#r21: nothing launches after this
	}
	m.mu.Unlock()
	all := m.all()

	type res struct {
		i int
		session.ShutdownOutcome
	}
	results := make(chan res, len(all))
	for i, s := range all {
		i := i
		s.CloseForShutdown(func(o session.ShutdownOutcome) { results <- res{i, o} })
	}
	proofs := make([]*protocol.Proof, len(all))
	delivered := make([]bool, len(all)) // sent and journaled already, or not to be journaled
	deadline := time.NewTimer(m.sh.Config.Bounds.Shutdown)
	defer deadline.Stop()
	for n := 0; n < len(all); n++ {
		select {
		case r := <-results:
			proofs[r.i], delivered[r.i] = r.Proof, r.Delivered
		case <-deadline.C:
			n = len(all)
		}
	}
	retainedDone := make(chan struct{})
	go func() { m.retained.Wait(); close(retainedDone) }()
	select {
	case <-retainedDone:
	case <-deadline.C:
	}
	out := make([]*protocol.Proof, 0, len(proofs))
	final := make([]shutdownProof, 0, len(proofs))
	for i, p := range proofs {
		if p == nil {
			p = all[i].ShutdownProof() // the bound ran out
		}
		if p != nil {
			out = append(out, p)
			final = append(final, shutdownProof{s: all[i], proof: p, delivered: delivered[i]})
		}
	}
	m.stateCancel()                                 // publications still running give up (their state stays local)
	m.recordShutdownProofs(final)                   // docs/protocol.md §16: journaled whoever asked
	out = append(out, m.recovering.Unfinished()...) // recoveries shutdown could not finish
	m.stopOnce.Do(func() { close(m.stopCh) })
	return out
}

// Wait blocks until every actor and retained cleanup has stopped; call
// after Shutdown.
func (m *Manager) Wait() {
	m.actors.Wait()
	m.retained.Wait()
	m.readers.Wait()
	m.background.Wait()
	m.sh.Refills.Wait() // no actor is left to ask for one
	m.sh.KeyLocks.ReleaseAll()
	m.sh.Stores.CloseAll()
	m.sh.TmpSpares.Close()
}
