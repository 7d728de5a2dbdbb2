// Package config is the sidecar's configuration of its sessions: the
// bounds initialize.bounds reports (Bounds), the caps against unbounded
// growth (Caps), and the Manager's Config — where providers' environment
// comes from, the defaults of an open that gives none, the sandbox and
// egress the machine enforces, the launcher, the state store. The daemon
// (cmd/acpx-sidecar) fills it from its flags; internal/adapter's Manager
// and every internal/session actor read it and never change it.
package config

import (
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/egress"
	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Bounds are the time and attempt bounds of admission and cleanup, the
// ones initialize.bounds reports (Wire; docs/rules.md#bounds, where each
// one's default and flag is listed). DefaultBounds holds the defaults; the
// sidecar's flags take theirs from it.
type Bounds struct {
	// HandshakeTimeout bounds admission, launch to record saved, of an
	// open that gives no handshakeTimeoutMs, and each setModel/setMode/
	// setConfigOption call to the agent (--handshake-timeout-ms).
	HandshakeTimeout time.Duration
	// CloseTimeout bounds one ACP session/close (all attempts of a live
	// session's close together) and a cancelled turn's wait for the agent
	// (--close-timeout-ms).
	CloseTimeout time.Duration
	// TermGrace is the wait after SIGTERM to a tree (--term-grace-ms).
	TermGrace time.Duration
	// KillGrace is the wait after SIGKILL to a tree, and after
	// cgroup.kill of a recovered leftover (--kill-grace-ms).
	KillGrace time.Duration
	// Shutdown bounds `shutdown` (--shutdown-ms; by default
	// ShutdownFor of the three above).
	Shutdown time.Duration
	// ProtocolCloseAttempts bounds the ACP session/close attempts of a
	// live session's close, all inside one CloseTimeout (1 + retries); a
	// retained target's are bounded by RetainedCloseWindow instead
	// (--protocol-close-attempts; docs/rules.md#r16, #r20).
	ProtocolCloseAttempts int
	// RetainedRetryMin and RetainedRetryMax bound the retained cleanup
	// backoff, which doubles from Min to Max (--retained-retry-min-ms,
	// --retained-retry-max-ms).
	RetainedRetryMin, RetainedRetryMax time.Duration
	// RetainedCloseWindow bounds the ACP session/close of a retained
	// target (a session created after its admission was given up), all
	// attempts together: a failing close is retried with backoff for no
	// count until it succeeds, this has passed or the provider is gone
	// (--retained-close-window-ms; docs/rules.md#r20).
	RetainedCloseWindow time.Duration
}

// DefaultBounds returns the defaults of docs/rules.md#bounds: the one
// place each is stated (the flags' defaults and help read them here).
func DefaultBounds() Bounds {
	b := Bounds{HandshakeTimeout: 30 * time.Second, CloseTimeout: 2 * time.Second,
		TermGrace: 2 * time.Second, KillGrace: 2 * time.Second,
		ProtocolCloseAttempts: 4, RetainedRetryMin: 10 * time.Millisecond, RetainedRetryMax: 100 * time.Millisecond,
		RetainedCloseWindow: 10 * time.Second}
	b.Shutdown = ShutdownFor(b.CloseTimeout, b.TermGrace, b.KillGrace)
	return b
}

// ShutdownFor is the default shutdown bound for these close, term and
// kill bounds: their sum plus 1 s, so every proof is written before the
// sidecar gives up (docs/rules.md#bounds: 7 s with the defaults).
func ShutdownFor(closeTimeout, termGrace, killGrace time.Duration) time.Duration {
	return closeTimeout + termGrace + killGrace + time.Second
}

// Wire returns b as initialize.bounds reports it, in milliseconds
// (docs/protocol.md §7).
func (b Bounds) Wire() protocol.Bounds {
	return protocol.Bounds{HandshakeTimeoutMs: b.HandshakeTimeout.Milliseconds(),
		CloseTimeoutMs: b.CloseTimeout.Milliseconds(), TermGraceMs: b.TermGrace.Milliseconds(),
		KillGraceMs: b.KillGrace.Milliseconds(), ShutdownMs: b.Shutdown.Milliseconds(),
		ProtocolCloseAttempts: b.ProtocolCloseAttempts, RetainedRetryMinMs: b.RetainedRetryMin.Milliseconds(),
		RetainedRetryMaxMs: b.RetainedRetryMax.Milliseconds(), RetainedCloseWindowMs: b.RetainedCloseWindow.Milliseconds()}
}

// Caps are the caps on what a session, a turn or the sidecar may hold —
// counts, bytes and one wait — that keep a hostile agent or a busy host
// from growing the sidecar without bound (docs/protocol.md §16, §20,
// §21). They are flags but not in initialize.bounds. A zero cap means its
// default (DefaultCaps), except where a field says otherwise.
type Caps struct {
	// MaxQueuedTurns bounds the `queue: true` prompts waiting per session
	// (--max-queued-turns): 0 means protocol.DefaultMaxQueuedTurns, < 0
	// none (a queue: true prompt behind a turn gets TURN_ACTIVE).
	MaxQueuedTurns int
	// MaxPendingAsks and MaxPendingAskBytes bound the permission asks of
	// one turn waiting for the host, by count and by the bytes of their
	// ACP params (--max-pending-asks, --max-pending-ask-bytes; ≤ 0 means
	// protocol.DefaultMaxPendingAsks, protocol.DefaultMaxPendingAskBytes):
	// an ask beyond them is decided as nonInteractivePermissions says
	// (docs/protocol.md §20).
	MaxPendingAsks, MaxPendingAskBytes int
	// StateRead bounds how long session/status waits for a busy actor
	// before it is answered from the session's snapshot
	// (--state-read-ms; ≤ 0 means protocol.DefaultStateReadMs).
	StateRead time.Duration
	// MaxProviderLineBytes bounds one provider stdout line, in bytes
	// (--max-provider-line-bytes; ≤ 0 means
	// protocol.DefaultMaxProviderLineBytes). A longer line is discarded
	// and the connection survives, unlike acp-go-sdk's 10 MiB scanner cap
	// that kills it (docs/architecture.md, ACP client side).
	MaxProviderLineBytes int
	// JournalMaxBytes is the size at which a session journal's live
	// segment is rotated (--journal-max-bytes; ≤ 0 means
	// journal.DefaultMaxBytes).
	JournalMaxBytes int64
	// MaxSessions bounds the live sessions admitted at once
	// (--max-sessions; ≤ 0 means none): an open beyond it is
	// SIDECAR_AT_CAPACITY (internal/adapter/capacity.go; docs/protocol.md
	// §21). It has no default here: the sidecar derives one from its
	// descriptor limit.
	MaxSessions int
	// MaxLiveTrees bounds the provider trees alive at once
	// (--max-live-trees; ≤ 0 means none): an open or revive beyond it
	// waits FIFO up to its reviveWaitMs, then is SIDECAR_AT_CAPACITY
	// (internal/registry/livetrees.go; docs/protocol.md §24). The
	// sidecar's default is MaxSessions.
	MaxLiveTrees int
}

// ShutdownPublishAllowance is what the default --shutdown-ms adds when a
// state store is configured: shutdown closes every live session, and each
// close publishes its provider state once the tree is gone
// (docs/protocol.md §24).
const ShutdownPublishAllowance = time.Minute

// DefaultSweepInterval is --sweep-interval-ms's default: a live sidecar
// sweeps its state dirs' ledgers for dead sidecars' leftovers once a
// minute (internal/adapter/sweep.go).
const DefaultSweepInterval = time.Minute

// DefaultCaps returns the caps' defaults, each defined once where the
// layer that enforces it lives (protocol, journal, this package); the
// sidecar's flags take theirs from here.
func DefaultCaps() Caps {
	return Caps{MaxQueuedTurns: protocol.DefaultMaxQueuedTurns, MaxPendingAsks: protocol.DefaultMaxPendingAsks,
		MaxPendingAskBytes: protocol.DefaultMaxPendingAskBytes, StateRead: protocol.DefaultStateReadMs * time.Millisecond,
		MaxProviderLineBytes: protocol.DefaultMaxProviderLineBytes, JournalMaxBytes: journal.DefaultMaxBytes}
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
	// pins and whether this machine can enforce it (EgressConfig).
	Egress EgressConfig
	// Sandbox is the kernel sandbox: the default mode and what this
	// machine enforces (internal/admission/sandbox.go; docs/protocol.md §19).
	Sandbox admission.SandboxConfig
	// PermissionTimeout bounds a host escalation when the open gives no
	// permissionTimeoutMs (≤ 0 means protocol.DefaultPermissionTimeoutMs;
	// docs/protocol.md §18.3).
	PermissionTimeout time.Duration
	// Launcher launches and contains provider trees: ReaperLauncher of the
	// sidecar's *reaper.Supervisor, or a fake in tests. nil means no
	// containment: every open is refused with PLATFORM_UNSUPPORTED.
	Launcher launch.Launcher
	// SweepInterval is how often a running sidecar sweeps the ledgers of
	// its state dirs for dead sidecars' leftovers (--sweep-interval-ms;
	// ≤ 0: only at start and first use; internal/adapter/sweep.go).
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

// EgressConfig is the sidecar's side of `sandbox.network.allow`
// (docs/protocol.md §19.1): its --resolve pins, whether this machine can
// make a tree's network namespace, and the counters every session adds
// to (sidecar/stats `network`).
type EgressConfig struct {
	// Pins are the --resolve flags; nil = none.
	Pins egress.Pins
	// Unsupported is egress.Probe's error: non-nil, an open with an allow
	// list is PLATFORM_UNSUPPORTED with it (and
	// capabilities.sandbox.networkAllow is false). Tests' zero Config
	// leaves it nil and must then run where the probe passes.
	Unsupported error
	// ResolvConf is the resolver configuration whose nameservers the
	// tree's DNS answers on; "" = /etc/resolv.conf.
	ResolvConf string
	// MaxConnections bounds the connections forwarded at once by every
	// session together (each holds ~6 of the sidecar's descriptors); 0 =
	// no bound. The daemon derives it from its descriptor limit
	// (docs/protocol.md §21).
	MaxConnections int
}
