package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// session is one session actor. Fields below "actor-owned" are touched only
// by the goroutine running run(); everything else reaches it by sending a
// closure to mb (host requests; mailbox.go) or inbox (provider events and
// worker results, in provider order). The fields above it are set before the
// actor starts and never change (but for the atomics, which are shared on
// purpose), so workers may read them; a worker gets everything else as an
// input value copied on the actor (admissionInput, cleanupInput, controls)
// and hands its result back with post.
type session struct {
	m       *Manager
	id      string
	key     string
	agent   string
	created time.Time
	log     *zap.Logger
	red     *redactor

	// stateDir is the open's stateDir (absolute; --state-dir when the
	// open gave none).
	stateDir string
	// token is the unguessable part of the session's environment marker
	// (admission.go marker): never logged, journaled or reported.
	token string
	// tmpDir is the private TMPDIR made for the session ("" if none),
	// set on the actor before admission starts and removed once the tree
	// is proven gone (sandbox.go).
	tmpDir string

	mb    *mailbox
	inbox chan func()
	gate  *byteGate     // agent bytes posted to inbox, not yet handled (inboxgate.go)
	quit  chan struct{} // closed when the actor has stopped
	// snap is the actor's last published state (mailbox.go): what
	// session/list, sidecar/stats and a bounded session/status read.
	snap atomic.Pointer[sessionSnapshot]

	// abortAdmission cancels the admission (set before the actor starts).
	abortAdmission context.CancelCauseFunc
	hasTree        atomic.Bool
	// provenBeforeShutdown: closed with a complete proof before shutdown
	// began, so shutdown does not repeat that proof.
	provenBeforeShutdown atomic.Bool

	// actor-owned
	open           protocol.OpenParams
	prof           profiles.Profile
	state          lifecycle // changed only by moveTo (state.go)
	st             *store.Store
	tree           Tree
	conn           *acpConn
	identity       protocol.Identity
	agentInfo      protocol.AgentInfo
	agentCaps      agentCaps
	closeSupported bool // the agent advertised sessionCapabilities.close (from the handshake)
	models         *protocol.Models
	modes          *protocol.Modes
	configOpts     []json.RawMessage
	modelCtl       string
	pins           pins // the host's model and mode, re-applied on resume
	resumed        bool
	seq            uint64
	replaying      bool                 // drop updates (session/load replay)
	buffered       []providerUpdate     // updates that arrived during a new-session admission
	extBuffered    []protocol.ExtNotice // extension notifications that arrived during admission (ext.go)
	usedIDs        map[string]bool
	turn           *turn
	lastReqID      *string
	usage          protocol.Usage
	perRequest     map[string]protocol.Usage
	toolTurns      map[string]string // toolCallId -> requestId of the turn it started in
	binding        protocol.PermissionBinding
	cost           *protocol.Cost
	closeReq       *closeAttempt
	proof          *protocol.Proof
	exitSeen       bool
	lostInTurn     bool          // the connection died during a turn
	finished       bool          // the open failed or the session was retired: the actor stops
	pid            int           // the provider's pid, kept after the tree handle is released
	discarded      bool          // the record was deleted at close
	queue          []*queuedTurn // queue: true prompts waiting behind turn, in arrival order (queue.go)
	contextUsage   *protocol.ContextUsage
	closeAsked     time.Time // when the host's close arrived (closeToProofMs)
	// the journal and the frames queued for the host (notify.go)
	jn        *journal.Journal
	jnRelease func()
	jnFailed  bool // the journal could not be opened
	jnWarned  bool // a journal write failure was logged
	out       []outFrame
	outBuf    []byte

	// health is the write health of the journal and the record
	// (persistence.go).
	health persistHealth

	// keyHold releases the session's hold of its key's flock (keyhold.go);
	// nil before admission took it and after it was dropped.
	keyHold func()
	// snapDirty: status-visible state changed since the last publish.
	snapDirty bool
	// withdrawable: what withdraws each host-bound request by the
	// agent's request id, for its $/cancel_request (agentcalls.go).
	withdrawable map[string]func()
}

func newSession(m *Manager, id string, p protocol.OpenParams, prof profiles.Profile) *session {
	s := &session{m: m, id: id, key: p.SessionKey, stateDir: p.StateDir, agent: p.Agent, created: time.Now(), token: newToken(),
		log: m.log.With(zap.String("session", id)), red: newRedactor(m.secretEnv(p)),
		mb: newMailbox(), inbox: make(chan func(), 256), gate: newByteGate(maxInboxBytes), quit: make(chan struct{}),
		open: p, prof: prof, state: lifecycle{protocol.StateAdmitting}, usedIDs: map[string]bool{}, perRequest: map[string]protocol.Usage{},
		toolTurns: map[string]string{}}
	s.publish()
	return s
}

// send runs fn on the actor, after every command sent before it; it never
// blocks. If the actor has stopped (or stops before fn runs), reply gets
// SESSION_NOT_FOUND.
func (s *session) send(reply Reply, fn func()) {
	if !s.mb.put(reply, fn) {
		reply(nil, s.goneError())
	}
}

func (s *session) goneError() *protocol.Error {
	return protocol.Domain(protocol.ErrSessionNotFound, "session "+s.id+" is gone", false)
}

// post delivers a provider event or worker result in order; false if the
// actor has stopped.
func (s *session) post(fn func()) bool {
	select {
	case s.inbox <- fn:
		return true
	case <-s.quit:
		return false
	}
}

func (s *session) launched() bool { return s.hasTree.Load() }

// run is the actor loop. It starts admission and serves until the manager
// stops.
func (s *session) run(ctx context.Context, reply Reply) {
	defer s.m.actors.Done()
	defer func() {
		for _, r := range s.mb.close() {
			r(nil, s.goneError()) // commands that will never run
		}
	}()
	defer close(s.quit)
	defer s.dropKeyHold() // after the journal is closed
	defer s.closeJournal()
	s.startAdmission(ctx, reply)
	for !s.finished {
		select {
		case <-s.mb.ready:
			if fn := s.mb.take(); fn != nil {
				fn()
				s.snapDirty = true
			}
		case fn := <-s.inbox:
			fn()
		case <-s.m.stopCh:
			s.stop()
			return
		}
		// Queued frames go out once the inbox is drained (a burst of
		// updates shares one journal write) or the batch is full.
		if len(s.out) > 0 && (len(s.inbox) == 0 || len(s.out) >= maxOutBatch) {
			s.flushOut()
		}
		if s.snapDirty && len(s.inbox) == 0 {
			s.publish()
		}
	}
}

// stop releases what the actor still holds when the manager stops it.
func (s *session) stop() {
	s.flushOut()
	s.endQueued(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
		Code: protocol.ErrShuttingDown, Message: "the sidecar shut down before the turn started"}})
	if s.turn != nil {
		s.finishTurn(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
			Code: protocol.ErrShuttingDown, Message: "the sidecar shut down during the turn"}})
	}
	if s.conn != nil {
		s.conn.close()
	}
}

// onUpdate handles one ACP session/update from the provider: u.backendSessionID is
// params.sessionId's contents (nil or empty: not given), u.update the raw
// params.update object, forwarded verbatim (cleaned: lineStream).
func (s *session) onUpdate(u providerUpdate) {
	if s.identity.BackendSessionID != "" && len(u.backendSessionID) > 0 && string(u.backendSessionID) != s.identity.BackendSessionID {
		s.log.Debug("session/update for another ACP session discarded")
		return
	}
	switch {
	case s.replaying:
		s.journalHistory(u.update) // docs/protocol.md §11: replay is not live output; §16: journaled as history
		return
	case s.state.is(protocol.StateAdmitting):
		// Kept past the batch, whose buffer is reused: copied.
		s.buffered = append(s.buffered, providerUpdate{update: bytes.Clone(u.update), kind: u.kind})
		return
	case s.state.is(protocol.StateClosing, protocol.StateClosed, protocol.StateDead):
		return // the turn was ended by close; nothing more is live output
	}
	s.forward(u.update, s.trackUpdate(u.kind, u.update))
}

// forward sends one update to the host with the next seq.
//
// origin, when not nil, is the requestId the update belongs to although it
// arrives outside that turn (a tool call of a cancelled turn reporting
// later; trackUpdate).
func (s *session) forward(update json.RawMessage, origin *string) {
	s.seq++
	rid := []byte("null")
	switch {
	case origin != nil:
		rid = jsonString(*origin)
	case s.turn != nil:
		rid = s.turn.ridJSON
	}
	s.emitUpdate(rid, s.seq, update)
}

// trackUpdate keeps the model/mode/config state the agent reports, and the
// turn each tool call started in: it returns that turn's requestId for a
// tool_call_update arriving in another turn or between turns (codex-acp
// 2.x keeps running a cancelled turn's command and reports it later;
// docs/agents.md), else nil. kind is the update's sessionUpdate, as the
// line scan read it (kindOf).
func (s *session) trackUpdate(kind updateKind, update json.RawMessage) *string {
	if kind == kindOther {
		// Message and thought chunks, plans, commands: nothing to keep,
		// and no decoding on the path of the bulk of a turn.
		return nil
	}
	var u struct {
		Kind          string            `json:"sessionUpdate"`
		ToolCallID    string            `json:"toolCallId"`
		Status        string            `json:"status"`
		CurrentModeID string            `json:"currentModeId"`
		ConfigOptions []json.RawMessage `json:"configOptions"`
		Used          *int64            `json:"used"`
		Size          *int64            `json:"size"`
		Cost          *struct {
			Amount   float64 `json:"amount"`
			Currency string  `json:"currency"`
		} `json:"cost"`
	}
	if json.Unmarshal(update, &u) != nil {
		return nil
	}
	s.snapDirty = true // status reports modes, options, usage
	switch u.Kind {
	case "tool_call":
		if s.turn != nil && u.ToolCallID != "" {
			if len(s.toolTurns) >= maxToolTurns {
				s.toolTurns = map[string]string{} // bounded: forget old calls
			}
			s.toolTurns[u.ToolCallID] = s.turn.requestID
		}
	case "tool_call_update":
		rid, known := s.toolTurns[u.ToolCallID]
		if u.Status == string(acp.ToolCallStatusCompleted) || u.Status == string(acp.ToolCallStatusFailed) {
			delete(s.toolTurns, u.ToolCallID)
		}
		if known && (s.turn == nil || s.turn.requestID != rid) {
			return &rid
		}
	case "current_mode_update":
		if s.modes != nil && u.CurrentModeID != "" {
			s.modes.CurrentModeID = u.CurrentModeID
		}
	case "config_option_update":
		if u.ConfigOptions != nil {
			s.applyConfigOptions(u.ConfigOptions)
		}
	case "usage_update":
		// ACP UsageUpdate.cost is the session's cumulative cost: the turn's
		// cost is its growth since the turn began (docs/rules.md#r30).
		if u.Cost != nil {
			s.cost = &protocol.Cost{Amount: u.Cost.Amount, Currency: u.Cost.Currency, Basis: protocol.CostSessionCumulative}
		}
		if u.Used != nil && u.Size != nil && *u.Used >= 0 && *u.Size >= 0 {
			s.contextUsage = &protocol.ContextUsage{Used: *u.Used, Size: *u.Size}
		}
		if s.turn == nil && (u.Cost != nil || u.Used != nil) {
			s.persist(nil) // between turns: nothing else will persist it soon
		}
		if s.turn != nil {
			if u.Cost != nil {
				delta := u.Cost.Amount - s.turn.costBase
				if delta < 0 { // the agent restarted its count (e.g. a new process after resume)
					delta = u.Cost.Amount
				}
				s.turn.cost = &protocol.Cost{Amount: delta, Currency: u.Cost.Currency, Basis: protocol.CostTurn}
			}
		}
	}
	return nil
}

// maxToolTurns bounds the tool-call → turn map of a session (entries leave
// it when the call completes or fails; a session whose agent never says so
// starts the map afresh past this many).
const maxToolTurns = 1024

// onExit handles the provider leader's exit seen by the reaper.
func (s *session) onExit() {
	if s.exitSeen {
		return
	}
	s.exitSeen = true
	if s.state.is(protocol.StateClosing, protocol.StateClosed, protocol.StateAdmitting) {
		return // the close or admission worker owns cleanup
	}
	st := s.tree.ExitStatus()
	ooms := oomKills(s.tree)
	during := protocol.DuringIdle
	if s.turn != nil || s.lostInTurn {
		during = protocol.DuringTurn
	}
	s.log.Warn("provider exited on its own", zap.String("during", string(during)))
	s.notify(protocol.NotifySessionExited, protocol.ExitedNotice{Session: s.id, SessionKey: s.key,
		Pid: s.tree.Pid(), ExitCode: st.Code, Signal: st.Signal, During: during, Reason: exitReason(st, ooms)})
	s.endQueued(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
		Code: protocol.ErrProviderProcessLost, Message: "the provider process exited before the turn started"}})
	if s.turn != nil {
		s.finishTurn(protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
			Code: protocol.ErrProviderProcessLost, Message: "the provider process exited during the turn"}})
	}
	s.moveTo(protocol.StateDead)
	s.startCleanup("provider exited", protocol.OriginProviderExit, false, nil)
}

func (s *session) summary() string {
	state := s.state.current()
	return fmt.Sprintf("session=%s backendSessionId=%s agentSessionId=%s %s", s.key,
		s.identity.BackendSessionID, s.identity.AgentSessionID, state)
}

// listEntry is the session's entry in session/list, as of its last state
// change (the snapshot: it never waits on the actor).
func (s *session) listEntry() protocol.ListEntry {
	return s.snap.Load().entry
}

// incompleteProof is used by Shutdown for a session whose close did not
// answer within the bound; it reads only immutable fields.
func (s *session) incompleteProof(why string) *protocol.Proof {
	return cleanup.Incomplete(s.target(why, protocol.OriginShutdown), why, time.Now())
}
