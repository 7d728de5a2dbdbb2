package launch

import (
	"errors"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Input is the immutable input of the admission worker, made on the
// actor before the worker starts. The worker reads only this and the
// Worker's values.
type Input struct {
	// Open is the open's params (a revive's: the open's, unchanged).
	Open protocol.OpenParams
	// Prof is the agent's profile (auth rules, binding settings).
	Prof profiles.Profile
	// Store is the state directory's store: records and ledger entries.
	Store *store.Store
	// Exe is the verified executable (sha256 given), else nil; the worker
	// closes it.
	Exe *os.File
	// Env is the launch environment, KEY=VALUE (secret values: the child
	// only).
	Env []string
	// BaseEnv is the base environment (the --inherit-env policy's part
	// plus the open's inheritEnv names), for the profile's auth rules.
	BaseEnv []string
	// Timeout bounds the handshake (handshakeTimeoutMs, else
	// --handshake-timeout).
	Timeout time.Duration
	// Limits are the open's effective limits (docs/protocol.md §18).
	Limits reaper.Limits
	// Plan is the open's kernel sandbox (nil: none); Sandbox is the open
	// result's `sandbox` (docs/protocol.md §19).
	Plan *sandbox.Plan
	// Sandbox is the open result's `sandbox` member; see Plan.
	Sandbox *protocol.SandboxResult
	// Revive is a revive's session and pins; nil for an open.
	Revive *Revive
	// StateSources are the provider-state dirs, resolved in Env and
	// claimed; nil without a state store (docs/protocol.md §24).
	StateSources []statestore.Source
}

// Revive is what a revive adds to an admission (docs/protocol.md §24):
// the ACP session to resume — never a new one — and the host's pins
// (model, mode, config options) to re-apply and verify.
type Revive struct {
	// BackendSessionID is the agent's ACP session id to resume.
	BackendSessionID string
	// Pins are the host's model, mode and config options to re-apply.
	Pins controls.Pins
	// State is the session's provider state (nil without a store): its
	// lease is checked before the launch (Session.Prepare).
	State *provstate.State
}

// Admitted is what a successful admission hands to the actor.
type Admitted struct {
	// Result is the open's answer (docs/protocol.md §8 session/open).
	Result protocol.OpenResult
	// Caps are the agent's capabilities from initialize.
	Caps acpclient.AgentCaps
	// ModelCtl is the model control style the agent took
	// (controls.Setter.UsedStyle).
	ModelCtl string
	// Record is the session record, written in place; RecordSync makes
	// that write durable (the actor starts it as the open is answered).
	Record *store.Record
	// RecordSync is Record's write, pending until made durable; see
	// Record.
	RecordSync *store.Pending
	// Pins are the model and mode (and a revive's options) the host chose.
	Pins controls.Pins
	// Held are the controls held against drift (control key → value).
	Held map[string]string
	// State is the provider state's lease and sources; nil without a
	// state store, and for a revive (it keeps its own).
	State *provstate.State
}

// Result is what the admission worker returns for the actor to adopt.
// Exactly one of Adm and Err is set; Proof is the failed admission's
// cleanup, nil when nothing was launched.
type Result struct {
	// Adm is the admitted session; nil when the admission failed.
	Adm *Admitted
	// Err is why the admission failed; nil when it succeeded.
	Err *protocol.Error
	// Proof is the failed admission's cleanup proof; nil when nothing
	// was launched (or the admission succeeded).
	Proof *protocol.Proof
	// LateClose is the protocol close of a session the agent created
	// after admission gave up (docs/rules.md#r6), nil if none appeared.
	LateClose *cleanup.CloseResult
	// CloseSupported: the agent advertised sessionCapabilities.close.
	CloseSupported bool
	// Reason overrides the proof reason of a failure that launched
	// nothing ("" = BeforeLaunchReason of Err).
	Reason string
}

// envHas reports whether the launch environment gives name a non-empty
// value (the open's env over the base env).
func (in *Input) envHas(name string) bool {
	if v, ok := in.Open.Env[name]; ok {
		return v != ""
	}
	for _, kv := range in.BaseEnv {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v != ""
		}
	}
	return false
}

// loadPrior loads the key's record before the launch, so a resume knows
// what to load: for an open that may resume (resume not false), the
// record of the same agent and cwd; for a revive, the session's own
// record (or, if it cannot be read, one made from what the actor knows,
// so the resume still names the session).
func loadPrior(log *zap.Logger, in Input) *store.Record {
	p := in.Open
	if in.Revive == nil && p.Resume != nil && !*p.Resume {
		return nil
	}
	rec, err := in.Store.Load(p.SessionKey)
	switch {
	case err == nil && in.Revive != nil && rec.BackendSessionID == in.Revive.BackendSessionID:
		return rec
	case err == nil && in.Revive == nil && rec.Acpx.AgentProfile == p.Agent && rec.Cwd == p.Cwd && rec.BackendSessionID != "":
		return rec
	case err != nil && !errors.Is(err, store.ErrNotFound):
		log.Warn("session record unreadable", zap.Error(err))
	}
	if in.Revive == nil {
		return nil
	}
	log.Warn("the revived session's record is missing or names another session; resuming from memory")
	now := store.NowStamp()
	r := &store.Record{Schema: store.Schema, SessionKey: p.SessionKey, Name: p.SessionKey, CreatedAt: now,
		BackendSessionID: in.Revive.BackendSessionID, Messages: []byte("[]"), RequestTokenUsage: map[string]store.TokenUsage{}}
	r.Acpx.AgentProfile = p.Agent
	r.Cwd = p.Cwd
	return r
}
