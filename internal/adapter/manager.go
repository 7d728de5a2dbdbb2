// Package adapter is the session side of acpx-sidecar: one actor goroutine
// per session owns that session's provider process tree, its ACP
// connection and its record; the Manager routes host requests to actors
// and keeps the registries they share (stores, journals, key locks).
// An actor's state is a few owned parts, each declared in the file that
// works on it: actorLoop (mailbox.go), sessionRecord (record.go),
// controlState (controls.go), turnState and accounting (turnstate.go),
// publisher (notify.go) and cleanupHandoff (close.go). Admission's
// wiring, turns, permissions and controls live here; the launch and the
// handshake are internal/launch's; how a tree is closed, killed and proven gone, and where its proof
// goes, is internal/cleanup's, which drives internal/reaper through the
// Launcher and Tree seams (internal/launch).
package adapter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/egress"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Reply delivers the outcome of one host request: a result (marshalled as
// the JSON-RPC result; nil means {}), or an error (an *protocol.Error; any
// other error is answered as -32603). The host side (internal/rpc) passes
// one with every request that takes a Reply; the session calls it exactly
// once. It is an alias of the plain func type, as rpc.Reply is, so Manager
// implements rpc.Backend while this package does not import internal/rpc.
type Reply = func(result any, err error)

// Host is the host connection as the sessions see it (implemented by
// *rpc.Server).
type Host interface {
	// Notify sends a notification whose params are the JSON bytes given,
	// written verbatim into the frame (docs/architecture.md, "Update
	// path"); it blocks while the host is not reading.
	Notify(method string, params json.RawMessage) error
	// RequestPermission asks the host (docs/protocol.md §9); ctx is the turn's.
	RequestPermission(ctx context.Context, p protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error)
	// PermissionRequests: the host declared capabilities.permissionRequests.
	PermissionRequests() bool
}

// Config configures a Manager: the bounds initialize.bounds reports, the
// caps against unbounded growth, where providers' environment comes from,
// the defaults of an open that gives none, and the launcher.
type Config struct {
	// StateDir is the default stateDir (absolute) for opens without one.
	StateDir string
	// Bounds are the admission and cleanup bounds (initialize.bounds).
	Bounds Bounds
	// Caps bound queues, pending asks, lines, journals and sessions.
	Caps Caps
	// Env is where providers' environment comes from.
	Env admission.ProviderEnv
	// DefaultLimits are the limits of an open that gives none of a kind
	// (--default-memory-bytes, --default-pids, --default-cpu-percent;
	// docs/protocol.md §18.2).
	DefaultLimits protocol.Limits
	// LimitsSupported says whether the machine can enforce limits l
	// (cgroup.LimitsSupported in production; nil = assume it can, and
	// let the launch decide).
	LimitsSupported func(l reaper.Limits) (bool, string)
	// Egress is the sidecar's side of sandbox.network.allow: --resolve
	// pins and whether this machine can enforce it (egress.go).
	Egress EgressConfig
	// Sandbox is the kernel sandbox: the default mode and what this
	// machine enforces (sandbox.go; docs/protocol.md §19).
	Sandbox admission.SandboxConfig
	// PermissionTimeout bounds a host escalation when the open gives no
	// permissionTimeoutMs (≤ 0 means protocol.DefaultPermissionTimeoutMs;
	// docs/protocol.md §18.3).
	PermissionTimeout time.Duration
	// Launcher launches and contains provider trees: launch.ReaperLauncher of the
	// sidecar's *reaper.Supervisor, or a fake in tests. nil means no
	// containment: every open is refused with PLATFORM_UNSUPPORTED.
	Launcher launch.Launcher
	// SweepInterval is how often a running sidecar sweeps the ledgers of
	// its state dirs for dead sidecars' leftovers (--sweep-interval-ms;
	// ≤ 0: only at start and first use; sweep.go).
	SweepInterval time.Duration
	// StateStore publishes and restores provider state
	// (--state-store; docs/protocol.md §24); nil: none.
	StateStore *statestore.Store
	// StateSecrets are paths no provider-state directory may be, hold or
	// lie in: the master key files and a file:// store's root (an
	// archive of them would carry the key, or every key's objects, into
	// the store; adversarial trial). nil = none.
	StateSecrets []string
	// Logger receives structured logs; never given a secret.
	Logger *zap.Logger
}

// DefaultConfig returns a Config with every bound and cap at its default
// (DefaultBounds, DefaultCaps, protocol.DefaultPermissionTimeoutMs).
func DefaultConfig() Config {
	return Config{Bounds: DefaultBounds(), Caps: DefaultCaps(),
		PermissionTimeout: protocol.DefaultPermissionTimeoutMs * time.Millisecond}
}

// Manager routes host requests to session actors and owns retained
// cleanups. Its mutex guards only the routing tables; session state belongs
// to each session's actor goroutine.
type Manager struct {
	cfg  Config
	host Host
	log  *zap.Logger

	mu       sync.Mutex
	sessions map[string]*session // by session id (closed ones included)
	keys     map[string]*session // live sessions by sessionKey
	closing  bool
	finished []*session // sessions whose cleanup ended, oldest first

	// stores are the state directories' stores; recovering the
	// recoveries of dead sidecars' leftovers not finished yet (recover.go).
	// These and the registries below are internal/registry's.
	stores     registry.Stores
	recovering registry.Recoveries
	// journals are the session journals open now (notify.go).
	journals *registry.Journals
	stats    managerStats
	// keyLocks are the session-key flocks this sidecar holds, by
	// lock-file path (keyhold.go).
	keyLocks registry.KeyLocks
	// tmpSpares are private TMPDIRs made ahead of need; refills makes
	// them and the stores' spare files after each open (tmpspares.go).
	tmpSpares *registry.TmpSpares
	refills   registry.SpareRefills
	// sbx: what live sandboxed trees may write (sandboxlive.go).
	sbx registry.Sandboxes
	// netTotals: every session's connections through an allow list
	// (sidecar/stats network; egress.go).
	netTotals egress.Counters
	// netBudget: the connections every session's allow list may forward
	// at once together (--max-connections; egress.go).
	netBudget *egress.Budget
	// trees: the live-tree slots (--max-live-trees; livetrees.go).
	trees *registry.LiveTrees
	// provDirs: the provider-state dirs of live sessions, by session id
	// (provstate.go); stateCtx bounds publications, cancelled when
	// shutdown's bound has passed.
	provDirs    registry.ProviderDirs
	stateCtx    context.Context
	stateCancel context.CancelFunc

	actors   sync.WaitGroup
	retained sync.WaitGroup
	readers  sync.WaitGroup // session/events reads
	// background are the manager's own loops (the live sweep, sweep.go).
	background sync.WaitGroup
	stopCh     chan struct{} // closed at the end of Shutdown: stops actors
	stopOnce   sync.Once
}

// NewManager returns a Manager sending to host.
func NewManager(cfg Config, host Host) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Caps.MaxProviderLineBytes <= 0 {
		cfg.Caps.MaxProviderLineBytes = protocol.DefaultMaxProviderLineBytes
	}
	m := &Manager{cfg: cfg, host: host, log: cfg.Logger, sessions: map[string]*session{},
		keys: map[string]*session{}, stopCh: make(chan struct{}),
		tmpSpares: registry.NewTmpSpares(registry.TmpSparesKept, launch.PrivateTmpParent),
		journals:  registry.NewJournals(cfg.Caps.JournalMaxBytes, cfg.Logger),
		trees:     registry.NewLiveTrees(cfg.Caps.MaxLiveTrees), netBudget: egress.NewBudget(cfg.Egress.MaxConnections)}
	m.stateCtx, m.stateCancel = context.WithCancel(context.Background())
	return m
}

// Bounds reports the bounds in force (initialize.bounds), in ms.
func (m *Manager) Bounds() protocol.Bounds { return m.cfg.Bounds.Wire() }

// Initialize answers `initialize` (docs/protocol.md §7); Pid is filled by rpc.
func (m *Manager) Initialize(p protocol.InitializeParams) protocol.InitializeResult {
	containment := "none" // every open is refused with PLATFORM_UNSUPPORTED
	var mode reaper.Mode
	if m.cfg.Launcher != nil {
		mode = m.cfg.Launcher.Mode()
		containment = string(mode)
	}
	caps := protocol.ServerCaps{Containment: containment, Agents: profiles.Names(), InheritEnv: m.inheritPolicy(),
		Sandbox:      admission.SandboxCaps(m.cfg.Sandbox.Caps, m.cfg.Sandbox.Default, mode, m.cfg.Egress.Unsupported),
		MaxSessions:  max(m.cfg.Caps.MaxSessions, 0),
		MaxLiveTrees: max(m.cfg.Caps.MaxLiveTrees, 0)}
	if ss := m.stateStore(); ss != nil {
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
	if m.cfg.Launcher != nil {
		mode = m.cfg.Launcher.Mode()
	}
	return admission.Settings{StateDir: m.cfg.StateDir, Mode: mode, DefaultLimits: m.cfg.DefaultLimits,
		LimitsSupported: m.cfg.LimitsSupported, Env: m.cfg.Env, Sandbox: m.cfg.Sandbox}
}

// inheritPolicy is the --inherit-env policy in force (docs/protocol.md
// §18.1).
func (m *Manager) inheritPolicy() string {
	if m.cfg.Env.Policy == "" {
		return protocol.InheritMinimal
	}
	return m.cfg.Env.Policy
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Open admits a session (docs/protocol.md §8 session/open). Unknown agents are
// refused before anything is constructed (docs/rules.md#r13); a platform
// without containment is refused before launch (docs/rules.md#r2); an open
// cancelled before it starts launches nothing (docs/rules.md#r1).
func (m *Manager) Open(ctx context.Context, p protocol.OpenParams, reply Reply) {
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
		e := protocol.Domain(protocol.ErrSessionKeyInUse, "sessionKey is held by live session "+other.id, true)
		e.Data.HeldBy = protocol.HeldByThisSidecar
		reply(nil, e)
		return
	}
	if e := m.atCapacityLocked(); e != nil {
		m.mu.Unlock()
		reply(nil, e)
		return
	}
	s := newSession(m, newID("s-"), plan)
	actx, cancel := context.WithCancelCause(ctx)
	s.end.abortAdmission = cancel
	m.sessions[s.id] = s
	m.keys[plan.Params.SessionKey] = s
	m.actors.Add(1)
	m.mu.Unlock()
	go s.run(actx, reply)
}

// errShutdownAbort is the cause of an admission aborted by shutdown.
var errShutdownAbort = errors.New("sidecar shutdown")

// forget drops a session whose open failed: the host never learned its id.
// Its key stays held while an incomplete cleanup is retained.
func (m *Manager) forget(s *session, keepKey bool) {
	m.mu.Lock()
	if m.sessions[s.id] == s {
		delete(m.sessions, s.id)
	}
	if !keepKey && m.keys[s.key] == s {
		delete(m.keys, s.key)
	}
	m.mu.Unlock()
}

// MaxFinishedSessions is how many closed or dead sessions the manager keeps
// answering status and repeated closes for; older ones are retired
// (SESSION_NOT_FOUND), so a long-running sidecar's memory stays bounded.
const MaxFinishedSessions = 1024

// noteFinished records that s's cleanup ended and retires the oldest
// finished sessions beyond MaxFinishedSessions.
func (m *Manager) noteFinished(s *session) {
	m.mu.Lock()
	m.finished = append(m.finished, s)
	var retire []*session
	for len(m.finished) > MaxFinishedSessions {
		old := m.finished[0]
		m.finished = m.finished[1:]
		if m.sessions[old.id] == old {
			delete(m.sessions, old.id)
		}
		retire = append(retire, old)
	}
	m.mu.Unlock()
	for _, old := range retire {
		if old == s {
			s.end.finished = true
			continue
		}
		old := old
		go old.send(func(any, error) {}, func() { old.end.finished = true })
	}
}

// releaseKey frees sessionKey once s is closed or dead and cleaned up.
func (m *Manager) releaseKey(s *session) {
	m.mu.Lock()
	if m.keys[s.key] == s {
		delete(m.keys, s.key)
	}
	m.mu.Unlock()
}

// List lists every session this sidecar knows, oldest first, each as of
// its last state change (it never waits on an actor).
func (m *Manager) List() []protocol.ListEntry {
	m.mu.Lock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].created.Before(all[j].created) })
	out := make([]protocol.ListEntry, 0, len(all))
	for _, s := range all {
		e := s.listEntry()
		m.mu.Lock()
		current := m.sessions[s.id] == s // a failed open is forgotten meanwhile
		m.mu.Unlock()
		if current {
			out = append(out, e)
		}
	}
	return out
}

// Shutdown refuses new opens, closes every live session with origin
// "shutdown" and waits for their proofs and for retained cleanups, bounded
// by Config.Bounds.Shutdown; then stops every actor. It returns one proof per
// session that had launched a provider.
func (m *Manager) Shutdown() []*protocol.Proof {
	m.mu.Lock()
	m.closing = true
	if m.cfg.Launcher != nil {
		m.cfg.Launcher.Seal() // docs/rules.md#r21: nothing launches after this
	}
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].created.Before(all[j].created) })

	type res struct {
		i int
		p *protocol.Proof
		// delivered: p was sent and journaled already; skip: the key's
		// journal was discarded, p is not journaled
		delivered, skip bool
	}
	results := make(chan res, len(all))
	for i, s := range all {
		i, s := i, s
		s.send(func(any, error) { results <- res{i: i} }, func() {
			if s.state.is(protocol.StateClosed) && s.end.proof != nil && s.end.proof.Complete {
				s.end.provenBeforeShutdown.Store(true)
				results <- res{i: i} // closed and proven before shutdown
				return
			}
			delivered := s.state.is(protocol.StateDead) && s.end.proof != nil // its provider-exit proof
			s.close("sidecar shutdown", protocol.OriginShutdown, false, func(r any, err error) {
				var p *protocol.Proof
				if cr, ok := r.(protocol.CloseResult); ok {
					p = cr.Proof
				} else if pe, ok := err.(*protocol.Error); ok {
					p = pe.Data.Proof
					if p == nil {
						p = pe.Data.Cleanup
					}
				}
				results <- res{i: i, p: p, delivered: delivered, skip: s.rec.discarded}
			})
		})
	}
	proofs := make([]*protocol.Proof, len(all))
	delivered := make([]bool, len(all)) // sent and journaled already, or not to be journaled
	deadline := time.NewTimer(m.cfg.Bounds.Shutdown)
	defer deadline.Stop()
	for n := 0; n < len(all); n++ {
		select {
		case r := <-results:
			proofs[r.i], delivered[r.i] = r.p, r.delivered || r.skip
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
		if p == nil && all[i].launched() && !all[i].end.provenBeforeShutdown.Load() {
			if pp := all[i].end.proven.Load(); pp != nil {
				// The tree was proven gone; its publication ran out the
				// bound (it is cancelled: the local state stays).
				p = cleanup.Copy(pp)
				cleanup.AttachPublication(p, &protocol.Publication{State: protocol.PublicationFailed,
					Error: &protocol.ProofError{Code: protocol.ErrStateStoreUnavailable, Message: "the shutdown bound ran out during the publication; the local state is kept"}})
			} else {
				p = all[i].incompleteProof("shutdown bound exceeded")
			}
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
	m.refills.Wait() // no actor is left to ask for one
	m.keyLocks.ReleaseAll()
	m.stores.CloseAll()
	m.tmpSpares.Close()
}

func itoa(i int) string { return strconv.Itoa(i) }

func quoteShort(s string) string { return protocol.QuoteShort(s) }
