package client

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sourcegraph/jsonrpc2"
)

// openWatch follows one Open call's request so that an answer that
// arrives after Open gave up (its ctx ended) is not lost. Both fields are
// guarded by Client.mu.
type openWatch struct {
	answered  bool // the read loop has seen the answer (it is in the Waiter)
	abandoned bool // Open returned; the read loop handles the answer
}

func (c *Client) open(ctx context.Context, p OpenParams) (*Session, error) {
	const method = "session/open"
	id := c.wire.nextID.Add(1)
	ow := &openWatch{}
	c.subs.mu.Lock()
	c.subs.opens[id] = ow
	c.subs.mu.Unlock()
	forget := func() {
		c.subs.mu.Lock()
		delete(c.subs.opens, id)
		c.subs.mu.Unlock()
	}
	w, err := c.dispatchID(ctx, id, method, p)
	if err != nil {
		forget()
		return nil, err
	}
	var raw json.RawMessage
	err = w.Wait(ctx, &raw)
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil && errors.Is(err, ctxErr) {
		c.cancelRequest(id)
		c.subs.mu.Lock()
		answered := ow.answered
		if answered {
			delete(c.subs.opens, id)
		} else {
			ow.abandoned = true
		}
		c.subs.mu.Unlock()
		if answered {
			// The answer came as ctx ended: it is in the Waiter already.
			var late json.RawMessage
			lerr := w.Wait(context.Background(), &late)
			var re *jsonrpc2.Error
			errors.As(lerr, &re)
			c.lateOpen(late, re)
		}
		return nil, convert(method, err)
	}
	forget()
	if err != nil {
		return nil, convert(method, err)
	}
	s := &Session{c: c}
	if err := decode(method, raw, &s.res); err != nil {
		return nil, err
	}
	s.id = s.res.Session
	return s, nil
}

// onOpenAnswer is called on the read loop for every answer to
// session/open: it marks the watch of a running Open, or hands the answer
// of an abandoned one to lateOpen.
func (c *Client) onOpenAnswer(resp *jsonrpc2.Response) {
	if resp.ID.IsString {
		return
	}
	c.subs.mu.Lock()
	ow := c.subs.opens[resp.ID.Num]
	abandoned := ow != nil && ow.abandoned
	if ow != nil {
		ow.answered = true
	}
	if abandoned {
		delete(c.subs.opens, resp.ID.Num)
	}
	c.subs.mu.Unlock()
	if !abandoned {
		return
	}
	var raw json.RawMessage
	if resp.Result != nil {
		raw = *resp.Result
	}
	c.lateOpen(raw, resp.Error)
}

// lateOpen handles the answer to an Open that already returned
// DataCodeCancelled: the proof of a failed open goes to OnProof; an open
// that succeeded after all is closed, and its proof goes to OnProof.
func (c *Client) lateOpen(result json.RawMessage, rerr *jsonrpc2.Error) {
	if rerr != nil {
		if pr := convert("session/open", rerr).Proof(); pr != nil {
			c.deliverProof(*pr)
		}
		return
	}
	var res OpenResult
	if json.Unmarshal(result, &res) != nil || res.Session == "" {
		return
	}
	c.track(func() {
		proof, err := (&Session{c: c, id: res.Session}).Close(context.Background(), CloseParams{Reason: "open cancelled by the host"})
		if err == nil && proof != nil {
			c.deliverProof(*proof)
		}
		// CLEANUP_INCOMPLETE: the final proof follows as cleanup/proof.
	})
}

func (c *Client) deliverProof(p Proof) {
	if f := c.opts.OnProof; f != nil {
		c.cb.events.push(func() { f(p) })
	}
}
