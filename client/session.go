package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Session is one admitted sidecar session. Its methods are safe for
// concurrent use, but the sidecar runs one turn per session at a time
// (TURN_ACTIVE).
type Session struct {
	c   *Client
	id  string
	res OpenResult
	// ended: this handle's Close was answered (a proof or
	// CLEANUP_INCOMPLETE); WaitLifecycle then fails at once.
	ended atomic.Bool
}

// ID is the sidecar session id ("s-" and 16 hex digits).
func (s *Session) ID() string { return s.id }

// Result is the session/open result (identity, agent, models, modes,
// process, permissionBinding); nil for a handle made by Client.Attach.
func (s *Session) Result() *OpenResult {
	if s.res.Session == "" {
		return nil
	}
	r := s.res
	return &r
}

// Prompt runs one turn (session/prompt). onUpdate (may be nil) receives
// the session/update notifications whose requestId is p.RequestID, in seq
// order, on the calling goroutine, all of them before Prompt returns
// (docs/protocol.md §6: the response follows the turn's updates). A turn
// that fails, is cancelled or times out is still a result (Status); an
// error means the request itself was refused (SESSION_NOT_FOUND,
// TURN_ACTIVE, DUPLICATE_REQUEST_ID, SESSION_CLOSING,
// PROVIDER_PROCESS_LOST, -32602), the transport failed, or it was never
// sent: -32600 INVALID_REQUEST when its frame is over the sidecar's frame
// limit (capabilities.maxFrameBytes; the sidecar would answer it with id
// null, docs/protocol.md §3), see Error.
//
// If ctx ends first, the turn is cancelled with $/cancelRequest (the same
// as session/cancel for it, docs/protocol.md §7) and Prompt goes on
// waiting, delivering updates to onUpdate, for the sidecar's final answer
// of the turn, so that the session is free for the next Prompt when it
// returns. The sidecar ends a cancelled turn when the agent answers the
// cancel, or after bounds.closeTimeoutMs at the latest (docs/protocol.md
// §8 session/cancel); Prompt waits that long plus 2 s (5 s in all if the
// bounds are unknown because Initialize was not run). It then returns
// DataCodeCancelled together with the turn's result when the answer came
// (Status "cancelled", or whatever the turn ended with first), or nil when
// it did not come in time; in that case the turn's later updates go to
// Options.OnUpdate.
func (s *Session) Prompt(ctx context.Context, p PromptParams, onUpdate func(Update)) (*PromptResult, error) {
	var deliver func([]Update)
	if onUpdate != nil {
		deliver = func(ups []Update) {
			for _, u := range ups {
				onUpdate(u)
			}
		}
	}
	return s.prompt(ctx, p, deliver)
}

// PromptBatches runs one turn as Prompt does, but hands the turn's updates
// to onBatch (may be nil) in batches, on the calling goroutine: each a
// non-empty slice, in seq order, of the updates read since the previous
// batch (what one read of the sidecar's stdout brought, or more when
// onBatch is slower than the stream); the slice is the caller's to keep.
// One call per batch instead of one per update is for hosts that forward
// or store updates in bulk. Results, errors and cancellation are Prompt's.
func (s *Session) PromptBatches(ctx context.Context, p PromptParams, onBatch func([]Update)) (*PromptResult, error) {
	return s.prompt(ctx, p, onBatch)
}

func (s *Session) prompt(ctx context.Context, p PromptParams, onBatch func([]Update)) (*PromptResult, error) {
	const method = "session/prompt"
	c := s.c
	key := turnKey{s.id, p.RequestID}
	sink := newTurnSink()
	c.subs.mu.Lock()
	// A second Prompt with the same id is refused by the sidecar
	// (TURN_ACTIVE or DUPLICATE_REQUEST_ID); it must not steal the sink.
	_, busy := c.subs.turns[key]
	if !busy {
		c.subs.turns[key] = sink
	}
	c.subs.mu.Unlock()
	if !busy {
		defer c.endTurn(key, sink)
	}
	deliver := func() {
		if ups := sink.take(); len(ups) > 0 && onBatch != nil {
			onBatch(ups)
		}
	}

	params := struct {
		Session string `json:"session"`
		PromptParams
	}{s.id, p}
	w, id, err := c.dispatch(ctx, method, params)
	if err != nil {
		return nil, err
	}
	waitCtx, stopWait := context.WithCancel(context.Background())
	defer stopWait()
	var raw json.RawMessage
	answered := make(chan error, 1)
	go func() { answered <- w.Wait(waitCtx, &raw) }()
	done := ctx.Done()
	var cancelled *Error       // set once ctx has ended
	var grace <-chan time.Time // the bound of the wait after the cancel
	for {
		select {
		case <-sink.wake:
			deliver()
		case err := <-answered:
			// The read loop hands every update to the sink before it reads
			// the response, so what the sink holds now is the rest.
			deliver()
			if err != nil {
				if cancelled != nil {
					return nil, cancelled
				}
				return nil, convert(method, err)
			}
			var res PromptResult
			if err := decode(method, raw, &res); err != nil {
				if cancelled != nil {
					return nil, cancelled
				}
				return nil, err
			}
			if cancelled != nil {
				return &res, cancelled
			}
			return &res, nil
		case <-done:
			c.cancelRequest(id)
			deliver()
			cancelled = convert(method, ctx.Err())
			done = nil
			t := time.NewTimer(c.cancelGrace())
			defer t.Stop()
			grace = t.C
		case <-grace:
			deliver()
			return nil, cancelled
		}
	}
}

// cancelGrace is how long a Prompt whose ctx ended waits for the turn's
// answer: the sidecar's closeTimeoutMs (its bound on a cancelled turn,
// docs/protocol.md §8 session/cancel) plus a margin for the transport.
func (c *Client) cancelGrace() time.Duration {
	const margin = 2 * time.Second
	ms := c.info.Bounds.CloseTimeoutMs
	if ms <= 0 {
		ms = 3000
	}
	return time.Duration(ms)*time.Millisecond + margin
}

// Cancel runs session/cancel for the active turn: true when a turn was
// cancelled (its Prompt then returns Status "cancelled").
func (s *Session) Cancel(ctx context.Context) (bool, error) {
	var res struct {
		Cancelled bool `json:"cancelled"`
	}
	err := s.c.call(ctx, "session/cancel", map[string]string{"session": s.id}, &res)
	return res.Cancelled, err
}

// CancelTurn runs session/cancel for the turn requestID: the active turn
// if it is that one, or that queued turn (docs/protocol.md §8
// session/prompt, Queued turns; its Prompt then returns Status
// "cancelled"). False when no such turn runs or waits.
func (s *Session) CancelTurn(ctx context.Context, requestID string) (bool, error) {
	var res struct {
		Cancelled bool `json:"cancelled"`
	}
	err := s.c.call(ctx, "session/cancel", map[string]string{"session": s.id, "requestId": requestID}, &res)
	return res.Cancelled, err
}

// SetModel runs session/setModel and returns the verified model state
// (MODEL_UNAVAILABLE, UNSUPPORTED_CONTROL, …).
func (s *Session) SetModel(ctx context.Context, model string) (*Models, error) {
	var res struct {
		Models *Models `json:"models"`
	}
	err := s.c.call(ctx, "session/setModel", map[string]string{"session": s.id, "model": model}, &res)
	return res.Models, err
}

// SetMode runs session/setMode and returns the verified mode state
// (MODE_UNAVAILABLE, UNSUPPORTED_CONTROL, PERMISSION_POLICY_UNENFORCEABLE).
func (s *Session) SetMode(ctx context.Context, mode string) (*Modes, error) {
	var res struct {
		Modes *Modes `json:"modes"`
	}
	err := s.c.call(ctx, "session/setMode", map[string]string{"session": s.id, "mode": mode}, &res)
	return res.Modes, err
}

// SetConfigOption runs session/setConfigOption; value must be a string or
// a bool (else -32602, field "value"). It returns the agent's ACP
// SessionConfigOption objects verbatim.
func (s *Session) SetConfigOption(ctx context.Context, key string, value any) ([]json.RawMessage, error) {
	var res struct {
		ConfigOptions []json.RawMessage `json:"configOptions"`
	}
	err := s.c.call(ctx, "session/setConfigOption", map[string]any{"session": s.id, "key": key, "value": value}, &res)
	return res.ConfigOptions, err
}

// Status runs session/status (from the persisted record, checked against
// the admitted identity).
func (s *Session) Status(ctx context.Context) (*StatusResult, error) {
	var res StatusResult
	if err := s.c.call(ctx, "session/status", map[string]string{"session": s.id}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Close runs session/close and returns the complete cleanup proof. A tree
// that could not be proven gone is the error CLEANUP_INCOMPLETE (its
// Proof() is the incomplete proof; the final one comes through
// Options.OnProof). Closing again returns the same proof.
func (s *Session) Close(ctx context.Context, p CloseParams) (*Proof, error) {
	params := struct {
		Session string `json:"session"`
		CloseParams
	}{s.id, p}
	var res struct {
		Proof *Proof `json:"proof"`
	}
	if err := s.c.call(ctx, "session/close", params, &res); err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.DataCode == string(protocol.ErrCleanupIncomplete) {
			s.ended.Store(true)
		}
		return nil, err
	}
	s.ended.Store(true)
	return res.Proof, nil
}

// handler serves what the sidecar sends on the connection's read loop.
// Notifications are queued (never run there), so the order of the wire is
// kept and a callback can call the Client.
type handler struct{ c *Client }

// Handle implements jsonrpc2.Handler.
func (h handler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	c := h.c
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	if !req.Notif {
		// Registered here, on the read loop, so that a notice (or the
		// sidecar's $/cancelRequest) read after this request finds it
		// (settle.go).
		hctx, cancel := context.WithCancel(ctx)
		var key permKey
		switch req.Method {
		case "session/requestPermission":
			key = permRequestKey(params)
		case "session/elicitation":
			key = elicitRequestKey(params)
		}
		ask := c.cb.asks.add(key, idJSON(req.ID), cancel)
		id, method := req.ID, req.Method
		started := c.track(func() {
			defer cancel()
			defer c.cb.asks.remove(ask)
			c.answer(hctx, ctx, conn, id, method, params)
		})
		if !started {
			cancel()
			c.cb.asks.remove(ask)
		}
		return
	}
	switch req.Method {
	case "session/update":
		// Only what the fast path (updates.go) left: the same routing.
		var u Update
		if json.Unmarshal(params, &u) != nil {
			return
		}
		c.wire.router.route(u)
		c.wire.router.flush()
	case "cleanup/proof":
		var n struct {
			Proof *Proof `json:"proof"`
		}
		if f := c.opts.OnProof; f != nil && json.Unmarshal(params, &n) == nil && n.Proof != nil {
			c.cb.events.push(func() { f(*n.Proof) })
		}
	case "session/exited":
		var e Exited
		if json.Unmarshal(params, &e) != nil {
			return
		}
		c.cb.asks.settle(false, func(k permKey) bool { return k.session == e.Session })
		c.endLifecycle(e.Session)
		if f := c.opts.OnExited; f != nil {
			c.cb.events.push(func() { f(e) })
		}
	case protocol.NotifySessionLifecycle:
		n, ok := decodeLifecycle(params)
		if !ok {
			return
		}
		c.onLifecycle(n)
		if f := c.opts.OnLifecycle; f != nil {
			c.cb.events.push(func() { f(n) })
		}
	case protocol.NotifySessionPolicyBreach:
		var n PolicyBreachNotice
		if f := c.opts.OnPolicyBreach; f != nil && json.Unmarshal(params, &n) == nil {
			c.cb.events.push(func() { f(n) })
		}
	case protocol.NotifySessionNetwork:
		var n NetworkNotice
		if f := c.opts.OnNetwork; f != nil && json.Unmarshal(params, &n) == nil {
			c.cb.events.push(func() { f(n) })
		}
	case "session/journal":
		var n JournalNotice
		if f := c.opts.OnJournal; f != nil && json.Unmarshal(params, &n) == nil {
			c.cb.events.push(func() { f(n) })
		}
	case protocol.NotifySessionExtNotification:
		var n ExtNotification
		if f := c.opts.OnExtNotification; f != nil && json.Unmarshal(params, &n) == nil {
			c.cb.events.push(func() { f(n) })
		}
	case "session/elicitationDecided", "session/elicitationComplete":
		c.onElicitationNotice(req.Method, params)
	case "$/cancelRequest":
		c.onCancelRequest(params)
	case "session/permission":
		var d PermissionDecision
		if json.Unmarshal(params, &d) != nil {
			return
		}
		c.onDecision(d)
		if f := c.opts.OnDecision; f != nil {
			c.cb.events.push(func() { f(d) })
		}
	}
}

// answer answers one sidecar request: through Options.OnRequest when set;
// else session/requestPermission through Options.OnPermission (Cancelled()
// without it), anything else -32601. The callback gets hctx (settle.go);
// the answer is written with the connection's ctx.
func (c *Client) answer(hctx, ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, method string, params json.RawMessage) {
	if f := c.opts.OnRequest; f != nil {
		rawID, _ := json.Marshal(id)
		res, err := f(hctx, Request{ID: rawID, Method: method, Params: params})
		if err == nil {
			_ = conn.Reply(ctx, id, res)
			return
		}
		_ = conn.ReplyWithError(ctx, id, asRPCError(err))
		return
	}
	if method == protocol.MethodSessionExtRequest && c.opts.OnExtRequest != nil {
		c.answerExt(hctx, ctx, conn, id, params) // ext.go
		return
	}
	if method == "session/elicitation" {
		_ = conn.Reply(ctx, id, c.answerElicitation(hctx, params))
		return
	}
	if method != "session/requestPermission" {
		_ = conn.ReplyWithError(ctx, id, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "unknown method " + method})
		return
	}
	out := Cancelled()
	var req PermissionRequest
	if c.opts.OnPermission != nil && json.Unmarshal(params, &req) == nil {
		out = c.opts.OnPermission(hctx, req)
	}
	if out.Outcome == "" {
		out = Cancelled()
	}
	_ = conn.Reply(ctx, id, out)
}
