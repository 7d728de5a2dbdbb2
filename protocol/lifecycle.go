package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"strconv"
)

// Lifecycle and portable provider state (docs/protocol.md §24, after
// PROTOCOL §10.1 and §10.2): a session whose provider tree lives only while
// the sidecar needs it, and the agent's own session state published to a
// shared store so another sidecar, on another machine, can resume it.

// LifecycleMode is session/open `lifecycle` (its string form, or its
// object's `mode`).
type LifecycleMode string

// Lifecycle modes.
const (
	// LifecycleWarm: the provider tree lives from open to close (the
	// default), or until idle for Lifecycle.IdleRetireMs when that is set.
	LifecycleWarm LifecycleMode = "warm"
	// LifecyclePerTurn: the tree lives for the open's admission and each
	// turn; the session retires when a turn has ended and nothing is
	// queued, and revives on the next call that needs the agent.
	LifecyclePerTurn LifecycleMode = "per-turn"
)

// MaxIdleRetireMs bounds Lifecycle.IdleRetireMs (30 days); MaxReviveWaitMs
// bounds OpenParams.ReviveWaitMs (1 hour); DefaultReviveWaitMs is the wait
// of a revive (or an open) for a live-tree slot when the open gives none.
const (
	MaxIdleRetireMs     = 30 * 24 * 60 * 60 * 1000
	MaxReviveWaitMs     = 60 * 60 * 1000
	DefaultReviveWaitMs = 60000
)

// Lifecycle is session/open `lifecycle`: on the wire either a string
// ("warm" | "per-turn") or an object {"mode": "warm", "idleRetireMs": N}.
// IdleRetireMs (ms, 1..MaxIdleRetireMs) is for warm sessions only.
type Lifecycle struct {
	// Mode is LifecycleWarm or LifecyclePerTurn (the string form, or the
	// object's "mode").
	Mode LifecycleMode `json:"mode"`
	// IdleRetireMs retires a warm session idle that many milliseconds
	// after its last turn (1..MaxIdleRetireMs); nil never retires it idle.
	// Refused for per-turn.
	IdleRetireMs *int64 `json:"idleRetireMs,omitempty"`
	// badField and badWhy: the object form had an unknown member or a
	// member of the wrong type; validate refuses it -32602 naming it.
	badField, badWhy string
}

// UnmarshalJSON reads the string or the object form. The object is read
// strictly: an unknown member, or one of the wrong type, is refused by
// validate naming it (lifecycle.<member>: a misspelt member must not
// silently leave the default); another shape is an error.
func (l *Lifecycle) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*l = Lifecycle{Mode: LifecycleMode(s)}
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New(`lifecycle must be "warm", "per-turn" or {"mode": "warm", "idleRetireMs": N}`)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	for k := range members {
		if k != "mode" && k != "idleRetireMs" {
			*l = Lifecycle{badField: "lifecycle." + k, badWhy: "lifecycle has no member " + strconv.Quote(k) +
				`: it is "warm", "per-turn" or {"mode": "warm", "idleRetireMs": N}`}
			return nil
		}
	}
	*l = Lifecycle{}
	if raw, ok := members["mode"]; ok {
		if err := json.Unmarshal(raw, &l.Mode); err != nil {
			*l = Lifecycle{badField: "lifecycle.mode", badWhy: `lifecycle.mode must be "warm" or "per-turn"`}
			return nil
		}
	}
	if raw, ok := members["idleRetireMs"]; ok {
		var ms int64
		if err := json.Unmarshal(raw, &ms); err != nil {
			*l = Lifecycle{badField: "lifecycle.idleRetireMs", badWhy: "lifecycle.idleRetireMs must be an integer (ms)"}
			return nil
		}
		l.IdleRetireMs = &ms
	}
	return nil
}

// MarshalJSON writes the string form when only the mode is set.
func (l Lifecycle) MarshalJSON() ([]byte, error) {
	if l.IdleRetireMs == nil {
		return json.Marshal(string(l.Mode))
	}
	return json.Marshal(struct {
		Mode         LifecycleMode `json:"mode"`
		IdleRetireMs *int64        `json:"idleRetireMs,omitempty"`
	}{l.Mode, l.IdleRetireMs})
}

// PerTurn reports whether l (nil: warm) is the per-turn mode.
func (l *Lifecycle) PerTurn() bool { return l != nil && l.Mode == LifecyclePerTurn }

// validate checks the lifecycle of an open (nil: warm).
func (l *Lifecycle) validate() *Error {
	if l == nil {
		return nil
	}
	if l.badField != "" {
		return InvalidParams(l.badField, l.badWhy)
	}
	switch l.Mode {
	case LifecycleWarm:
	case LifecyclePerTurn:
		if l.IdleRetireMs != nil {
			return InvalidParams("lifecycle.idleRetireMs", "idleRetireMs is for warm sessions (a per-turn session retires after every turn)")
		}
	default:
		return InvalidParams("lifecycle.mode", `lifecycle must be "warm" or "per-turn"`)
	}
	if l.IdleRetireMs != nil && (*l.IdleRetireMs < 1 || *l.IdleRetireMs > MaxIdleRetireMs) {
		return InvalidParams("lifecycle.idleRetireMs", "idleRetireMs must be 1.."+strconv.Itoa(MaxIdleRetireMs))
	}
	return nil
}

// PublishTurn is session/open `publish: "turn"`: publish the provider
// state after every turn too, not only at retire and close.
const PublishTurn = "turn"

// stateDirName is what a stateDirs name may be: it names a part of an
// archive, so it is a plain file-name-like word.
var stateDirName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validateLifecycleMembers checks the §24 members of an open: lifecycle,
// reviveWaitMs, stateDirs and publish.
func (p *OpenParams) validateLifecycleMembers() *Error {
	if e := p.Lifecycle.validate(); e != nil {
		return e
	}
	if p.ReviveWaitMs != nil && (*p.ReviveWaitMs < 0 || *p.ReviveWaitMs > MaxReviveWaitMs) {
		return InvalidParams("reviveWaitMs", "reviveWaitMs must be 0.."+strconv.Itoa(MaxReviveWaitMs))
	}
	names := make([]string, 0, len(p.StateDirs))
	for k := range p.StateDirs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !stateDirName.MatchString(k) {
			return InvalidParams("stateDirs", "stateDirs names are 1-64 of A-Z a-z 0-9 . _ - (not starting with . _ -)")
		}
		if e := checkAbsPath("stateDirs."+k, p.StateDirs[k]); e != nil {
			return e
		}
	}
	if p.Publish != "" && p.Publish != PublishTurn {
		return InvalidParams("publish", `publish must be "turn" or absent`)
	}
	return nil
}

// LifecycleState is session/lifecycle `state`.
type LifecycleState string

// Lifecycle states a session/lifecycle notification reports.
const (
	// LifeParked: the tree was retired and proven gone; the session stays
	// admitted.
	LifeParked LifecycleState = "parked"
	// LifeReviving: a call needs the agent; the tree is being launched and
	// the agent's session resumed.
	LifeReviving LifecycleState = "reviving"
	// LifeLive: the tree runs and the session is ready.
	LifeLive LifecycleState = "live"
)

// NotifySessionLifecycle is the session/lifecycle notification.
const NotifySessionLifecycle = "session/lifecycle"

// Not shared (with types.go's structs, or this file's const blocks): alike runs, other messages and values.

// LifecycleNotice is session/lifecycle {session, sessionKey, state,
// proof?, error?}: Proof is the retire's (state parked after a retire);
// Error is why a revive failed and the session went back to parked.
type LifecycleNotice struct {
	// Session is the id of the session whose tree changed state.
	Session string `json:"session"`
	// SessionKey is that session's key.
	SessionKey string `json:"sessionKey"`
	// State is LifeParked, LifeReviving, LifeLive or LifeEnded.
	State LifecycleState `json:"state"`
	// Proof is the retire's cleanup proof, on parked after a retire;
	// omitted otherwise.
	Proof *Proof `json:"proof,omitempty"`
	// Error is why a revive failed (on parked) or why the session ended
	// (on ended); omitted otherwise.
	Error *TurnError `json:"error,omitempty"`
}

// LifecycleStatus is session/status `lifecycle`: the mode, the tree's
// state (LifeLive, LifeParked, LifeReviving, or "retiring"), how many
// times it retired and revived, and the last revive's duration in ms.
type LifecycleStatus struct {
	// Mode is the session's lifecycle mode, LifecycleWarm or
	// LifecyclePerTurn.
	Mode LifecycleMode `json:"mode"`
	// State is the tree's state: LifeLive, LifeRetiring, LifeParked,
	// LifeReviving, or LifeEnded once the session is closing, closed or
	// dead.
	State LifecycleState `json:"state"`
	// Retires counts the session's retires that parked it.
	Retires int `json:"retires"`
	// Revives counts the session's revives that brought its tree live.
	Revives int `json:"revives"`
	// LastReviveMs is the last successful revive's duration in
	// milliseconds; absent before the first.
	LastReviveMs *int64 `json:"lastReviveMs,omitempty"`
	// IdleRetireMs is the warm session's idle bound, when it has one.
	IdleRetireMs *int64 `json:"idleRetireMs,omitempty"`
}

// LifeRetiring is LifecycleStatus.State while a retire ends the tree and
// publishes (no notification names it).
const LifeRetiring LifecycleState = "retiring"

// LifeEnded: the session is closing, closed or dead: no tree will run
// for it again. session/status reports it, and a session/lifecycle
// notice says it once when a session that had retired ends without a
// close of the host's (a revive that lost the agent's session, a fenced
// retire, a retire whose tree could not be proven gone), with error.
const LifeEnded LifecycleState = "ended"

// Data codes of lifecycle and portable state (docs/protocol.md §24).
const (
	// ErrSessionLost: a revive could not restore the agent's own session
	// (no resume or load, or the agent refused it); the session is closed.
	ErrSessionLost DataCode = "SESSION_LOST"
	// ErrStateFenced: another sidecar took the key over in the state
	// store; this session ended and never publishes again.
	ErrStateFenced DataCode = "STATE_FENCED"
	// ErrStateCorrupt: a published archive failed its checks (AEAD,
	// manifest, links, paths).
	ErrStateCorrupt DataCode = "STATE_CORRUPT"
	// ErrStateTooLarge: provider state over --state-max-bytes,
	// --state-max-entries or --state-max-file-bytes.
	ErrStateTooLarge DataCode = "STATE_TOO_LARGE"
	// ErrStateConflict: the open's provider-state directories are used by
	// (or lie inside those of) another live session of this sidecar.
	ErrStateConflict DataCode = "STATE_CONFLICT"
	// ErrStateStoreUnavailable: the state store could not be reached or
	// answered an error; retryable.
	ErrStateStoreUnavailable DataCode = "STATE_STORE_UNAVAILABLE"
	// ErrControlUnavailable: an open's effort or thinking the agent does
	// not offer.
	ErrControlUnavailable DataCode = "CONTROL_UNAVAILABLE"
)

// OriginRetire is Proof.Origin of a tree a per-turn (or idle warm)
// session retired.
const OriginRetire ProofOrigin = "retire"

// OriginFenced is Proof.Origin of a live tree ended because another
// sidecar took the session's key over in the state store (a publication
// after a turn found it fenced).
const OriginFenced ProofOrigin = "fenced"

// ExitStdinClosed is session/exited `reason` of a provider that closed
// its stdin and lives on: nothing can reach it, so the sidecar ends it
// (issue 33).
const ExitStdinClosed = "stdin-closed"

// ExitFenced is session/exited `reason` of a session ended because another
// sidecar took its key over in the state store.
const ExitFenced = "fenced"

// PublicationState is Publication.State.
type PublicationState string

// Publication states.
const (
	// PublicationPublished: archived, stored, read back and the key's head
	// moved to it.
	PublicationPublished PublicationState = "published"
	// PublicationFailed: nothing new was published; the previous head and
	// the local state are kept. Error says why.
	PublicationFailed PublicationState = "failed"
	// PublicationSkipped: no store, a discarded state, or a fenced key.
	PublicationSkipped PublicationState = "skipped"
)

// Publication is a retire's or close's proof `publication`: the archive
// published (generation, object name, its bytes as stored, its entries,
// its SHA-256 in hex), how long it took (ms), or why not.
type Publication struct {
	// State is PublicationPublished, PublicationFailed or
	// PublicationSkipped.
	State PublicationState `json:"state"`
	// Generation is the key's new head generation; set only when
	// published.
	Generation int64 `json:"generation,omitempty"`
	// Object is the archive's object name in the store; set only when
	// published.
	Object string `json:"object,omitempty"`
	// Bytes is the archive object's size in bytes as stored; set only
	// when published.
	Bytes int64 `json:"bytes,omitempty"`
	// Entries is the number of entries in the archive; set only when
	// published.
	Entries int64 `json:"entries,omitempty"`
	// SHA256 is the archive object's SHA-256 in hex; set only when
	// published.
	SHA256 string `json:"sha256,omitempty"`
	// Ms is how long the publication (or a discard) took, in
	// milliseconds; 0 when it was not run or not timed (a skip with
	// nothing new or a fenced key, one the shutdown bound cut off).
	Ms int64 `json:"ms"`
	// Error says why it failed (e.g. STATE_STORE_UNAVAILABLE,
	// STATE_TOO_LARGE) or, on a skipped one, STATE_FENCED for a key
	// another sidecar took over; the message is redacted.
	Error *ProofError `json:"error,omitempty"`
	// Skipped lists entries left out of the archive (devices, fifos,
	// sockets, links out of their root), as "name/relative/path".
	Skipped []string `json:"skipped,omitempty"`
}

// Restore is session/open `restore`: the archive restored before the
// launch (generation, bytes and entries extracted, ms), the files the
// new environment already held, kept as they were ("name/relative/path"),
// and, when the head's newest archive failed verification and the one
// before it was restored instead, FellBack (docs/protocol.md §24).
type Restore struct {
	// Generation is the generation of the archive restored.
	Generation int64 `json:"generation"`
	// Bytes is the total size in bytes of the file contents extracted
	// (not the archive object's size).
	Bytes int64 `json:"bytes"`
	// Entries is the number of the archive's entries.
	Entries int64 `json:"entries"`
	// Ms is the restore's wall time in milliseconds.
	Ms int64 `json:"ms"`
	// Kept are the "name/relative/path"s the new environment already held
	// and kept as they were (at most 1000); never null.
	Kept []string `json:"kept"`
	// FellBack is set when the head's newest archive failed verification
	// and the one before it was restored; omitted otherwise.
	FellBack *RestoreFellBack `json:"fellBack,omitempty"`
}

// RestoreFellBack is session/open `restore.fellBack`: Generation of the
// head's newest archive, which failed verification, and Error why
// (code STATE_CORRUPT, a redacted message). Its publication is lost;
// Restore.Generation is the archive restored in its place.
type RestoreFellBack struct {
	// Generation is the generation of the newest archive, the one that
	// failed verification.
	Generation int64 `json:"generation"`
	// Error is why it failed: code STATE_CORRUPT and a redacted message.
	Error ProofError `json:"error"`
}

// StoreStatus is session/status `store`: the key's head as this session
// last wrote or read it.
type StoreStatus struct {
	// Generation is that head's generation.
	Generation int64 `json:"generation"`
	// PublishedAt is when the head's archive was published; absent while
	// the key has no archive.
	PublishedAt *Time `json:"publishedAt,omitempty"`
	// Owner is the sidecar that wrote that head.
	Owner StoreOwner `json:"owner"`
}

// StoreOwner names the sidecar that owns a key in the state store.
type StoreOwner struct {
	// SidecarID is the owning sidecar's random id: "sc-" and 16 hex
	// digits.
	SidecarID string `json:"sidecarId"`
	// Hostname is the name of the machine it runs on ("unknown" when it
	// could not be read).
	Hostname string `json:"hostname"`
}

// StateStoreCaps is initialize.capabilities.stateStore: the store's kind
// ("file" or "s3") and the master key's non-secret id.
type StateStoreCaps struct {
	// Kind is the store's kind: "file" or "s3".
	Kind string `json:"kind"`
	// KeyID is 16 hex digits derived from the master key, never the key.
	KeyID string `json:"keyId"`
}
