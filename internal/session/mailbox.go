package session

import (
	"sync/atomic"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/actor"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Nothing on the host's read loop waits on an actor without a bound
// (docs/protocol.md §20): host requests reach an actor through its
// mailbox, which never blocks the sender; session/list and sidecar/stats
// read the snapshot each actor publishes at every state change; and
// session/status waits for the actor at most config.Config.Caps.StateRead, then is
// answered from the session's last status snapshot.

// sessionSnapshot is what a session last published (publish): its list
// entry, and its status without the process and record parts (nil while
// it is being admitted), with what statusFromSnapshot needs to add them.
type sessionSnapshot struct {
	entry     protocol.ListEntry
	status    *protocol.StatusResult
	tree      launch.Tree  // nil once the tree is released
	st        *store.Store // the record's store (nil before admission)
	discarded bool
}

// publish stores the actor's current state as the session's snapshot: on
// every state change (moveTo) and, for what changes within a state
// (usage, controls, queue), when the actor is idle (run). It runs on the
// actor.
func (s *Actor) publish() {
	e := protocol.ListEntry{Session: s.id, SessionKey: s.key, Agent: s.agent, State: s.state.Current()}
	if s.rec.identity.BackendSessionID != "" {
		id := s.rec.identity
		e.Identity = &id
	}
	if s.turns.turn != nil {
		r := s.turns.turn.requestID
		e.ActiveRequestID = &r
	}
	snap := &sessionSnapshot{entry: e, st: s.rec.st, discarded: s.rec.discarded}
	if !s.state.Is(protocol.StateAdmitting) {
		st := s.liveStatus()
		snap.status = &st
		if !s.state.Is(protocol.StateClosed) {
			snap.tree = s.end.tree
		}
	}
	s.act.snap.Store(snap)
	s.act.snapDirty = false
}

// statusFromSnapshot answers session/status from the last snapshot, with
// the process and the persisted record checked and merged as the actor
// would (status.go), marked FromSnapshot. Safe off the actor.
func (s *Actor) statusFromSnapshot() (any, error) {
	snap := s.act.snap.Load()
	if snap == nil || snap.status == nil {
		return nil, protocol.Domain(protocol.ErrSessionNotFound, "the session is still being admitted", true)
	}
	res := *snap.status
	res.FromSnapshot = true
	processStatus(&res, snap.tree)
	if res.Identity.BackendSessionID == "" || snap.discarded || snap.st == nil {
		return res, nil
	}
	return mergeRecord(res, snap.st)
}

// statusBounded answers session/status: from the actor if it takes the
// request within the state-read bound, else from the snapshot.
func (s *Actor) statusBounded(reply Reply) {
	reply = actor.OnceReply(reply)
	timer := time.AfterFunc(s.m.stateRead(), func() { reply(s.statusFromSnapshot()) })
	s.send(reply, func() {
		timer.Stop()
		reply(s.status())
	})
}

// actorLoop is how work reaches a session's actor and how its state is
// read off it: mb carries host requests (send), inbox provider events and
// worker results (post), both run in order on the one actor goroutine
// (Actor.run). Its members are safe to use from any goroutine.
type actorLoop struct {
	mb    *actor.Mailbox
	inbox chan func()
	gate  *actor.ByteGate // agent bytes posted to inbox, not yet handled (inboxgate.go)
	quit  chan struct{}   // closed when the actor has stopped
	// snap is the actor's last published state: what session/list,
	// sidecar/stats and a bounded session/status read.
	snap atomic.Pointer[sessionSnapshot]
	// snapDirty: status-visible state changed since the last publish
	// (actor-owned).
	snapDirty bool
}

// stateRead is the bound on waiting for a busy actor to read its state
// (config.Config.Caps.StateRead).
func (m *Shared) stateRead() time.Duration {
	if m.Config.Caps.StateRead > 0 {
		return m.Config.Caps.StateRead
	}
	return protocol.DefaultStateReadMs * time.Millisecond
}
