package session

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/policy"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/internal/usage"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// turn is the active prompt turn of a session; it owns the permission
// authority of its lifetime (docs/rules.md#r27).
type turn struct {
	requestID string
	ridJSON   []byte // requestID as a JSON string (session/update params)
	reply     Reply
	ctx       context.Context // cancelled when the turn ends: host permission asks die with it
	end       context.CancelFunc
	stopHost  func() bool // stops the $/cancelRequest hook
	cancelled bool
	failErr   *protocol.TurnError
	cost      *protocol.Cost // this turn's cost (basis "turn")
	costBase  float64        // the session's cumulative cost when the turn began
	pending   map[*acpclient.PermissionAsk]*pendingAsk
	// pendingBytes: the ACP params bytes of pending (bounded per turn,
	// docs/protocol.md §20).
	pendingBytes int
	timers       []*time.Timer
	// elicits: the elicitations waiting for the host (elicitation.go),
	// within the same bound as pending.
	elicits map[*acpclient.AgentMsg]*policy.Elicit
	// receipts: the usage the agent reported on its own extension
	// (receipt.go).
	receipts usage.TurnReceipts
}

// promptResponse is ACP session/prompt's result; ACP's Usage has the host
// protocol's field names, so it decodes straight into protocol.Usage.
type promptResponse struct {
	StopReason string          `json:"stopReason"`
	Usage      *protocol.Usage `json:"usage"`
}

// startTurn admits one session/prompt (docs/protocol.md §8
// session/prompt): one active turn per session (TURN_ACTIVE) unless the
// prompt asks to queue behind it (queue.go), request ids unique within
// the session (DUPLICATE_REQUEST_ID).
func (s *Actor) startTurn(ctx context.Context, p protocol.PromptParams, reply Reply) {
	if e := s.usable(); e != nil {
		reply(nil, e)
		return
	}
	if s.turns.turn != nil && !p.Queue {
		reply(nil, protocol.Domain(protocol.ErrTurnActive, "turn "+protocol.QuoteShort(s.turns.turn.requestID)+" is still running", true))
		return
	}
	if s.turns.turn != nil && len(s.turns.queue) >= s.m.maxQueuedTurns() {
		e := protocol.Domain(protocol.ErrTurnActive, "turn "+protocol.QuoteShort(s.turns.turn.requestID)+" is still running and "+
			strconv.Itoa(len(s.turns.queue))+" turns are queued (--max-queued-turns)", true)
		n := len(s.turns.queue)
		e.Data.Queued = &n
		reply(nil, e)
		return
	}
	if e := s.ctl.held.Refusal(); e != nil { // seedcontrols.go
		reply(nil, e)
		return
	}
	if e := s.slashRefusal(p.Prompt); e != nil {
		reply(nil, e)
		return
	}
	if s.turns.usedIDs[p.RequestID] {
		reply(nil, protocol.Domain(protocol.ErrDuplicateRequestID, "requestId "+protocol.QuoteShort(p.RequestID)+" was already used in this session or an earlier session of its key", false))
		return
	}
	// The blocks go to the agent as the host wrote them, once the agent's
	// promptCapabilities allow each (docs/protocol.md §23); a refused
	// prompt leaves its requestId unused.
	prompt, e := acpclient.PromptBlocks(p.Prompt, s.rec.agentCaps)
	if e != nil {
		reply(nil, e)
		return
	}
	s.turns.usedIDs[p.RequestID] = true
	if s.turns.turn != nil {
		s.enqueue(ctx, p, prompt, reply)
		return
	}
	s.beginTurn(ctx, p, prompt, reply)
}

// beginTurn makes p the active turn and sends it to the agent.
func (s *Actor) beginTurn(ctx context.Context, p protocol.PromptParams, prompt json.RawMessage, reply Reply) {
	tctx, end := context.WithCancel(context.Background())
	t := &turn{requestID: p.RequestID, ridJSON: jsonString(p.RequestID), reply: reply, ctx: tctx, end: end,
		pending: map[*acpclient.PermissionAsk]*pendingAsk{}}
	t.stopHost = context.AfterFunc(ctx, func() {
		s.post(func() { s.cancelTurn(&t.requestID, "request cancelled") })
	})
	if p.TimeoutMs != nil {
		t.timers = append(t.timers, time.AfterFunc(time.Duration(*p.TimeoutMs)*time.Millisecond, func() {
			s.post(func() {
				if s.turns.turn == t {
					t.failErr = &protocol.TurnError{Code: protocol.ErrTurnTimeout, Message: "the turn exceeded timeoutMs", Retryable: true}
					s.cancelTurn(&t.requestID, "turn timeout")
				}
			})
		}))
	}
	t.costBase = s.acct.CostAmount()
	s.turns.turn = t
	s.moveTo(protocol.StateTurn)
	s.networkTurn(p.RequestID)
	// The id is on disk before the agent sees the prompt: a sidecar killed
	// mid-turn leaves it used, the record shows the session ran a turn, and
	// a resumed session's lastRequestId is this turn's, as the live
	// session's is from now on (found by a fresh-user trial).
	rid := p.RequestID
	s.persist(func(r *store.Record) { recordRequestID(r, rid); r.LastRequestID = &rid })
	s.turns.lastReqID = &rid
	conn, backendSessionID := s.conn, s.rec.identity.BackendSessionID
	go func() {
		var resp promptResponse
		err := conn.Call(context.Background(), acp.AgentMethodSessionPrompt, acpclient.PromptRequest{SessionID: backendSessionID, Prompt: prompt, Meta: p.Meta}, &resp)
		s.post(func() { s.turnReturned(t, &resp, err) })
	}()
}

// turnReturned handles the ACP session/prompt response, after every update
// the agent sent before it (same ordered inbox).
func (s *Actor) turnReturned(t *turn, resp *promptResponse, err error) {
	if s.turns.turn != t {
		return // the turn already ended (cancel grace, close, provider loss)
	}
	res := protocol.PromptResult{Status: protocol.TurnCompleted, StopReason: resp.StopReason}
	switch {
	case err != nil && errors.Is(err, jsonrpc2.ErrClosed):
		s.turns.lostInTurn = true
		res = protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{
			Code: protocol.ErrProviderProcessLost, Message: "the provider connection closed during the turn"}}
	case err != nil && t.cancelled:
		res = protocol.PromptResult{Status: protocol.TurnCancelled, StopReason: protocol.StopCancelled}
	case errors.Is(err, acpclient.ErrAgentHung):
		res = protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{Code: protocol.ErrEnsureFailed,
			Message: "the prompt could not be sent: the agent is not reading its stdin (hung)"}}
	case err != nil:
		var je *jsonrpc2.Error
		msg := "the agent failed the turn"
		if errors.As(err, &je) {
			msg += ": " + s.red.Clean(je.Message)
		}
		res = protocol.PromptResult{Status: protocol.TurnFailed, Error: &protocol.TurnError{Code: protocol.ErrEnsureFailed, Message: msg}}
	case resp.StopReason == protocol.StopCancelled || t.cancelled:
		res.Status = protocol.TurnCancelled
	}
	if err == nil {
		res.Usage = resp.Usage
	}
	s.finishTurn(res)
}

// finishTurn ends the active turn with res: answers its pending permission
// asks `cancelled`, sends the queued frames, accounts usage and cost,
// persists, fsyncs the journal, replies, and starts the next queued turn.
func (s *Actor) finishTurn(res protocol.PromptResult) {
	t := s.turns.turn
	if t == nil {
		return
	}
	for ask, pa := range t.pending {
		s.answerPermission(ask, pa, nil, "", "turn ended")
	}
	s.cancelElicitations(t, "turn ended")
	s.turns.turn = nil
	s.networkTurn("")
	if s.state.Is(protocol.StateTurn) {
		s.moveTo(protocol.StateOpen)
	}
	t.end()
	t.stopHost()
	for _, tm := range t.timers {
		tm.Stop()
	}
	if t.failErr != nil && res.Status != protocol.TurnFailed {
		res.Status, res.Error = protocol.TurnFailed, t.failErr
	}
	res.RequestID = t.requestID
	if r := t.receipts.Accepted(); r != nil {
		// The agent's own receipt of the whole prompt (receipt.go).
		u := r.Usage
		res.Usage = &u
		if r.Cost != nil {
			res.Cost = r.Cost
		}
	}
	if res.Cost == nil && t.cost != nil {
		res.Cost = t.cost
	}
	s.pub.Flush() // the turn's updates go out before the record write
	if res.Usage != nil {
		s.acct.AddTurn(t.requestID, *res.Usage)
	}
	s.persist(func(r *store.Record) {
		recordRequestID(r, t.requestID)
		r.LastRequestID = &t.requestID
		now := store.NowStamp()
		r.LastPromptAt = &now
		usage.RecordRequestCost(r, t.requestID, res.Cost)
	})
	// Every update of the turn is sent, and durable, before its answer.
	s.pub.SyncJournal()
	s.m.Stats.CountTurn(res.Status)
	s.act.snapDirty = true // usage, lastRequestId
	t.reply(res, nil)
	s.startQueued()
	s.afterTurn() // lifecycle.go: retire a per-turn session, arm a warm one's idle bound
}

// cancelTurn cancels the active turn if requestID (nil = any) names it:
// ACP session/cancel to the agent, pending permission asks answered
// `cancelled`, and the turn ends `cancelled` when the agent answers or
// after CloseTimeout at the latest. Reports whether a turn was cancelled.
func (s *Actor) cancelTurn(requestID *string, why string) bool {
	t := s.turns.turn
	if t == nil || (requestID != nil && *requestID != t.requestID) {
		return false
	}
	if t.cancelled {
		return true
	}
	t.cancelled = true
	s.log.Info("turn cancelled", zap.String("why", why))
	for ask, pa := range t.pending {
		s.answerPermission(ask, pa, nil, "", "turn cancelled")
	}
	s.cancelElicitations(t, "turn cancelled")
	conn, backendSessionID := s.conn, s.rec.identity.BackendSessionID
	go func() {
		_ = conn.Notify(acp.AgentMethodSessionCancel, acp.CancelNotification{SessionId: acp.SessionId(backendSessionID)})
	}()
	t.timers = append(t.timers, time.AfterFunc(s.m.Config.Bounds.CloseTimeout, func() {
		s.post(func() {
			if s.turns.turn == t {
				s.finishTurn(protocol.PromptResult{Status: protocol.TurnCancelled, StopReason: protocol.StopCancelled})
			}
		})
	}))
	return true
}

// restoreUsage loads usage, cost and used request ids from a resumed record.
func (s *Actor) restoreUsage(r *store.Record) {
	s.acct.Restore(r)
	s.turns.lastReqID = r.LastRequestID
	// Request ids stay unique across resume (docs/protocol.md §8
	// session/prompt).
	for id := range r.RequestTokenUsage {
		s.turns.usedIDs[id] = true
	}
	if r.LastRequestID != nil {
		s.turns.usedIDs[*r.LastRequestID] = true
	}
	var ids []string
	if raw, ok := r.Acpx.Extra[requestIDsKey]; ok && json.Unmarshal(raw, &ids) == nil {
		for _, id := range ids {
			s.turns.usedIDs[id] = true
		}
	}
}

// requestIDsKey is the record's acpx key listing every request id used in
// the session ("acpx.request_ids"), so ids stay unique across resume.
const requestIDsKey = launch.RequestIDsKey

// recordRequestID adds id to the record's acpx.request_ids (once).
func recordRequestID(r *store.Record, id string) {
	var ids []string
	if raw, ok := r.Acpx.Extra[requestIDsKey]; ok {
		_ = json.Unmarshal(raw, &ids)
	}
	if contains(ids, id) {
		return
	}
	if r.Acpx.Extra == nil {
		r.Acpx.Extra = map[string]json.RawMessage{}
	}
	r.Acpx.Extra[requestIDsKey], _ = json.Marshal(append(ids, id))
}

// persist writes the actor's view into the record; fn may add to it.
func (s *Actor) persist(fn func(r *store.Record)) {
	if s.rec.st == nil || s.rec.identity.BackendSessionID == "" {
		return
	}
	err := s.rec.st.Update(s.key, func(r *store.Record) error {
		if r.BackendSessionID != s.rec.identity.BackendSessionID {
			return errRecordTaken
		}
		r.LastUsedAt = store.NowStamp()
		r.LastSeq = int64(s.pub.Seq())
		launch.RecordControls(r, s.ctl.models, s.ctl.modes)
		r.Acpx.ModelControl = s.ctl.modelCtl
		r.Acpx.PinnedModelID, r.Acpx.PinnedModeID = s.ctl.pins.Model, s.ctl.pins.Mode
		s.acct.ToRecord(r)
		if fn != nil {
			fn(r)
		}
		return nil
	})
	switch {
	case errors.Is(err, errRecordTaken):
		s.log.Info("session record not updated: it names another ACP session now (the key was reopened)")
		return
	case err != nil:
		s.log.Warn("session record not updated", zap.Error(err))
	}
	s.pub.NoteRecordWrite(err) // internal/outbox
	s.pub.RetryLedger(s.end.tree != nil && s.rec.st != nil && s.state.Is(protocol.StateOpen, protocol.StateTurn),
		func() error { return s.writeLedger(s.rec.st, s.end.tree) })
}

// waitingAsks is how many of the turn's asks wait at the host: permission
// asks and elicitations together, what Caps.MaxPendingAsks bounds
// (docs/protocol.md §20).
func (t *turn) waitingAsks() int { return len(t.pending) + len(t.elicits) }

// jsonString encodes a requestId as a JSON string.
func jsonString(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}
