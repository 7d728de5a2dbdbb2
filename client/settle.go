package client

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A permission handler (Options.OnPermission, or Options.OnRequest for
// session/requestPermission) runs with a context that ends as soon as the
// sidecar has settled the question without it (docs/protocol.md §9
// session/requestPermission: "if the turn ends first, the agent gets
// cancelled and a late host answer is ignored"; §18.3 Permission bound):
//
//   - a session/permission notice for the same session, requestId and
//     toolCallId with a decision other than "escalated", whose rule is not
//     "host" (the host's own answer): timeout, cancelled (cancel, close,
//     shutdown, turn end) or a decision made otherwise. Notices settle the
//     asks of one key in the order they were asked;
//   - the result of the session/prompt whose turn the ask belongs to;
//   - the result of session/close of its session (or CLEANUP_INCOMPLETE),
//     a session/exited of its session, or the result of shutdown;
//   - the connection closing.

// permKey names one ask as the sidecar's notices name it.
type permKey struct{ session, requestID, toolCallID string }

// permAsk is one pending sidecar request's handler context: key names a
// permission ask (or an elicitation, toolCallID elicitTool) as notices
// name it; id is the request's JSON-RPC id (JSON text), which the
// sidecar's $/cancelRequest names.
type permAsk struct {
	key    permKey
	id     string
	cancel context.CancelFunc
}

// permAsks holds the pending asks in arrival order. Asks are added on the
// read loop (so before any later notice is handled) and removed when
// their handler returns.
type permAsks struct {
	mu   sync.Mutex
	list []*permAsk
}

func (a *permAsks) add(k permKey, id string, cancel context.CancelFunc) *permAsk {
	p := &permAsk{key: k, id: id, cancel: cancel}
	a.mu.Lock()
	a.list = append(a.list, p)
	a.mu.Unlock()
	return p
}

func (a *permAsks) remove(p *permAsk) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, q := range a.list {
		if q == p {
			a.list = append(a.list[:i], a.list[i+1:]...)
			return
		}
	}
}

// settle cancels and removes the asks match selects; first stops after
// the first one.
func (a *permAsks) settle(first bool, match func(permKey) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	kept := a.list[:0]
	done := false
	for _, p := range a.list {
		if !done && match(p.key) {
			p.cancel()
			done = first
			continue
		}
		kept = append(kept, p)
	}
	clear(a.list[len(kept):])
	a.list = kept
}

// settleID cancels and removes the ask of request id (the sidecar's
// $/cancelRequest: the agent withdrew it, docs/protocol.md §22).
func (a *permAsks) settleID(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, p := range a.list {
		if p.id == id {
			p.cancel()
			a.list = append(a.list[:i], a.list[i+1:]...)
			return
		}
	}
}

// permRequestKey reads the key of a session/requestPermission request.
func permRequestKey(params json.RawMessage) permKey {
	var r struct {
		Session   string  `json:"session"`
		RequestID *string `json:"requestId"`
		ToolCall  struct {
			ToolCallID string `json:"toolCallId"`
		} `json:"toolCall"`
	}
	_ = json.Unmarshal(params, &r)
	return permKey{r.Session, deref(r.RequestID), r.ToolCall.ToolCallID}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// onDecision settles the ask a session/permission notice decided.
func (c *Client) onDecision(d PermissionDecision) {
	if d.Decision == protocol.DecisionEscalated || d.Rule == "host" {
		return
	}
	k := permKey{d.Session, deref(d.RequestID), d.ToolCallID}
	c.cb.asks.settle(true, func(p permKey) bool { return p == k })
}

// onRecv sees every frame the read loop decodes, before a response is
// handed to its caller: it learns the frame limit from initialize and
// settles the asks that a turn's, a close's or shutdown's answer ends,
// and ends the lifecycle watches of sessions that such an answer ends
// (lifecycle.go).
func (c *Client) onRecv(req *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if req == nil || resp == nil || req.Params == nil && req.Method != "shutdown" {
		return
	}
	ok := resp.Error == nil && resp.Result != nil
	var p struct {
		Session   string  `json:"session"`
		RequestID *string `json:"requestId"`
	}
	if req.Params != nil {
		_ = json.Unmarshal(*req.Params, &p)
	}
	var errCode string
	if resp.Error != nil {
		errCode = errorDataCode(resp.Error)
	}
	if p.Session != "" && lifecycleEnds(req.Method, ok, errCode) {
		c.endLifecycle(p.Session) // lifecycle.go
	}
	switch req.Method {
	case "session/open":
		c.onOpenAnswer(resp)
	case "initialize":
		var res struct {
			Capabilities struct {
				MaxFrameBytes int64 `json:"maxFrameBytes"`
			} `json:"capabilities"`
		}
		if ok && json.Unmarshal(*resp.Result, &res) == nil && res.Capabilities.MaxFrameBytes > 0 {
			c.wire.frameLimit.Store(res.Capabilities.MaxFrameBytes)
		}
	case "session/prompt":
		if ok && p.RequestID != nil {
			rid := *p.RequestID
			c.cb.asks.settle(false, func(k permKey) bool { return k.session == p.Session && k.requestID == rid })
		}
	case "session/close":
		if ok || errCode == string(protocol.ErrCleanupIncomplete) {
			c.cb.asks.settle(false, func(k permKey) bool { return k.session == p.Session })
		}
	case "shutdown":
		if ok {
			c.endLifecycle("")
			c.cb.asks.settle(false, func(permKey) bool { return true })
		}
	}
}

func errorDataCode(e *jsonrpc2.Error) string {
	if e.Data == nil {
		return ""
	}
	var d struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(*e.Data, &d)
	return d.Code
}
