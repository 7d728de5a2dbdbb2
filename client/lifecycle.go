package client

import (
	"context"
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Lifecycle and portable provider state (docs/protocol.md §24): a
// per-turn session's provider tree lives only for its turns (it retires
// after each, parked, and revives on the next call that needs the agent),
// and with a state store (--state-store, --state-key-file) the agent's
// own session files are published at every retire and close so that
// another sidecar can restore them.

// Each alias and constant below is its own documented public name of protocol's (doc.go, Types): alike only in form.

// Lifecycle is OpenParams.Lifecycle: Mode LifecycleWarm (the default) or
// LifecyclePerTurn; IdleRetireMs (ms, 1 … 2592000000) retires a warm
// session idle that long after its last turn (warm only). It is sent as
// the string "per-turn" or "warm" when IdleRetireMs is nil, else as
// {"mode", "idleRetireMs"}.
type Lifecycle = protocol.Lifecycle

// LifecycleMode is Lifecycle.Mode and OpenResult.Lifecycle: "warm" or
// "per-turn".
type LifecycleMode = protocol.LifecycleMode

// Lifecycle modes (docs/protocol.md §24).
const (
	// LifecycleWarm: the provider tree lives from open to close (or until
	// idle for Lifecycle.IdleRetireMs).
	LifecycleWarm = protocol.LifecycleWarm
	// LifecyclePerTurn: the tree lives for the admission and each turn;
	// the session retires after every turn and revives on the next call
	// that needs the agent (Prompt, SetModel, SetMode, SetConfigOption,
	// ExtRequest, AgentSessions).
	LifecyclePerTurn = protocol.LifecyclePerTurn
)

// PublishTurn is OpenParams.Publish "turn": publish the provider state
// after every turn too, not only at retire and close.
const PublishTurn = protocol.PublishTurn

// LifecycleState is the state a session/lifecycle notice reports (and
// LifecycleStatus.State).
type LifecycleState = protocol.LifecycleState

// Lifecycle states (docs/protocol.md §24).
const (
	// LifecycleParked: the tree was retired and proven gone (the notice
	// carries the retire's proof, origin "retire"), or a revive failed
	// and left the session parked (the notice carries the Error). The
	// session stays admitted under the same id.
	LifecycleParked = protocol.LifeParked
	// LifecycleReviving: a call needs the agent; the tree is being
	// launched and the agent's session resumed.
	LifecycleReviving = protocol.LifeReviving
	// LifecycleLive: the tree runs and the session is ready.
	LifecycleLive = protocol.LifeLive
	// LifecycleRetiring is LifecycleStatus.State while a retire ends the
	// tree and publishes; no notice names it.
	LifecycleRetiring = protocol.LifeRetiring
	// LifecycleEnded: the session is closing, closed or dead (status), or
	// — said once, with Error — a session that had retired or is per-turn
	// ended without the host's close: a revive lost the agent's session
	// (SESSION_LOST), another sidecar took the key over (STATE_FENCED), a
	// retire could not prove its tree gone.
	LifecycleEnded = protocol.LifeEnded
)

// LifecycleNotice is the session/lifecycle notification {session,
// sessionKey, state, proof?, error?}: State is LifecycleParked,
// LifecycleReviving or LifecycleLive; Proof is the retire's cleanup proof
// (state parked after a retire), Error why a revive failed (state parked
// again; the calls that waited for it got the error).
type LifecycleNotice = protocol.LifecycleNotice

// LifecycleStatus is StatusResult.Lifecycle: the Mode, the tree's State
// (LifecycleLive, LifecycleRetiring, LifecycleParked or
// LifecycleReviving), how many times the session retired and revived,
// the last revive's duration (LastReviveMs, ms, nil before the first) and
// a warm session's IdleRetireMs.
type LifecycleStatus = protocol.LifecycleStatus

// Restore is OpenResult.Restore: the provider state the open restored
// from the state store before the launch (the archive's Generation, the
// Bytes and Entries extracted, Ms it took) and Kept, the files the new
// environment already held and kept as they were ("name/relative/path").
// Nil when nothing was restored.
type Restore = protocol.Restore

// Publication is Proof.Publication of a retire's or close's proof when a
// state store is configured: State PublicationPublished (Generation,
// Object, Bytes as stored, Entries, SHA256 in hex), PublicationFailed
// (Error says why; the previous head and the local state are kept) or
// PublicationSkipped (a discarded state, a fenced key); Ms is the time it
// took; Skipped lists entries left out of the archive.
type Publication = protocol.Publication

// PublicationState is Publication.State.
type PublicationState = protocol.PublicationState

// Publication states (docs/protocol.md §24).
const (
	PublicationPublished = protocol.PublicationPublished
	PublicationFailed    = protocol.PublicationFailed
	PublicationSkipped   = protocol.PublicationSkipped
)

// StoreStatus is StatusResult.Store: the key's head in the state store as
// this session last wrote or read it (Generation, PublishedAt, the Owner
// sidecar). Nil without --state-store.
type StoreStatus = protocol.StoreStatus

// StoreOwner names the sidecar that owns a key in the state store: its
// SidecarID and Hostname.
type StoreOwner = protocol.StoreOwner

// StateStoreCaps is ServerCaps.StateStore: the store's Kind ("file" or
// "s3") and KeyID, 16 hex digits derived from the master key (never the
// key). Nil without --state-store.
type StateStoreCaps = protocol.StateStoreCaps

// StatsResult is the result of sidecar/stats (docs/protocol.md §17):
// sessions by state (Sessions.Retiring, Parked and Reviving count
// per-turn and idle-retired sessions), turn and proof counters, updates
// forwarded and dropped, close → proof latency (ms), and LiveTrees: the
// provider trees alive now, the launches waiting for a slot and
// --max-live-trees (docs/protocol.md §24).
type StatsResult = protocol.StatsResult

// Stats runs sidecar/stats: counters since this sidecar started. Errors:
// DataCodeTransport, DataCodeCancelled.
func (c *Client) Stats(ctx context.Context) (*StatsResult, error) {
	var res StatsResult
	if err := c.call(ctx, protocol.MethodSidecarStats, map[string]any{}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// lifeWatch is what the read loop last saw of one session's lifecycle,
// for Session.Lifecycle and Session.WaitLifecycle. Guarded by Client.mu.
type lifeWatch struct {
	last    *LifecycleNotice
	changed chan struct{} // closed and replaced at every change
	ended   bool          // closed, lost or exited: no notice follows
	waiters int
}

// watchLocked returns session's watch, made when missing. c.subs.mu is held.
func (c *Client) watchLocked(session string) *lifeWatch {
	w := c.subs.life[session]
	if w == nil {
		w = &lifeWatch{changed: make(chan struct{})}
		c.subs.life[session] = w
	}
	return w
}

// onLifecycle records a session/lifecycle notice; it runs on the read
// loop, so a response read after the notice finds it recorded.
func (c *Client) onLifecycle(n LifecycleNotice) {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	w := c.watchLocked(n.Session)
	w.last = &n
	close(w.changed)
	w.changed = make(chan struct{})
}

// endLifecycle marks session's watch ended (a close's answer, a
// session/exited, SESSION_LOST; "" for every session: shutdown) and
// forgets it; its waiters return DataCodeSessionEnded. It runs on the
// read loop.
func (c *Client) endLifecycle(session string) {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	for id, w := range c.subs.life {
		if session != "" && id != session {
			continue
		}
		w.ended = true
		close(w.changed)
		w.changed = make(chan struct{})
		delete(c.subs.life, id)
	}
}

// Lifecycle returns the last session/lifecycle notice this Client read
// for the session, or nil when none came (a warm session, or a per-turn
// session before its first retire) or the session was closed. It is
// current as of the last frame read: after Prompt returns, it holds every
// notice the sidecar sent before the turn's result (a revive's
// LifecycleReviving and LifecycleLive), not yet the retire that follows
// the result.
func (s *Session) Lifecycle() *LifecycleNotice {
	s.c.subs.mu.Lock()
	defer s.c.subs.mu.Unlock()
	if w := s.c.subs.life[s.id]; w != nil && w.last != nil {
		n := *w.last
		return &n
	}
	return nil
}

// WaitLifecycle waits until the session's latest session/lifecycle notice
// has state and returns it: at once when the latest one read already has
// it, else the first later one that has it. The usual use is after a
// Prompt of a per-turn session: WaitLifecycle(ctx, LifecycleParked)
// returns once the turn's retire has proven the tree gone (the notice's
// Proof; with a state store, Proof.Publication says what was
// published). Each Options.OnLifecycle callback sees the same notices in
// order; WaitLifecycle is for hosts that only need to wait.
//
// Errors: DataCodeCancelled when ctx ends first; DataCodeSessionEnded when
// the session ends while it waits (its session/close answered, its
// provider exited with session/exited, a call failed SESSION_LOST,
// shutdown answered), so no notice will follow, and at once once this
// handle's Close was answered; DataCodeTransport when the sidecar is
// gone. A wait begun after the session ended by other means (another
// handle's Close, Call) lasts until ctx ends.
func (s *Session) WaitLifecycle(ctx context.Context, state LifecycleState) (*LifecycleNotice, error) {
	const method = "session/lifecycle"
	c := s.c
	if s.ended.Load() {
		return nil, newError(method, DataCodeSessionEnded, nil, "session %s was closed", s.id)
	}
	c.subs.mu.Lock()
	w := c.watchLocked(s.id)
	w.waiters++
	defer func() {
		c.subs.mu.Lock()
		w.waiters--
		if w.waiters == 0 && w.last == nil && c.subs.life[s.id] == w {
			delete(c.subs.life, s.id) // made by this wait: nothing to keep
		}
		c.subs.mu.Unlock()
	}()
	for {
		if w.last != nil && w.last.State == state {
			n := *w.last
			c.subs.mu.Unlock()
			return &n, nil
		}
		if w.ended {
			c.subs.mu.Unlock()
			return nil, newError(method, DataCodeSessionEnded, nil, "session %s ended before a %q notice", s.id, state)
		}
		ch := w.changed
		c.subs.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, convert(method, ctx.Err())
		case <-c.proc.done:
			return nil, newError(method, DataCodeTransport, nil, "the sidecar exited before a %q notice of session %s", state, s.id)
		}
		c.subs.mu.Lock()
	}
}

// lifecycleEnds reports whether a response to req ends the lifecycle of
// the session it names (read loop, onRecv): a session/close answered
// (its proof, or CLEANUP_INCOMPLETE), or any call failed SESSION_LOST
// (the revive could not resume the agent's session; it is closed).
func lifecycleEnds(method string, ok bool, errCode string) bool {
	if method == "session/close" && (ok || errCode == string(protocol.ErrCleanupIncomplete)) {
		return true
	}
	return errCode == string(protocol.ErrSessionLost)
}

// decodeLifecycle decodes session/lifecycle params.
func decodeLifecycle(params json.RawMessage) (LifecycleNotice, bool) {
	var n LifecycleNotice
	if json.Unmarshal(params, &n) != nil || n.Session == "" {
		return n, false
	}
	return n, true
}
