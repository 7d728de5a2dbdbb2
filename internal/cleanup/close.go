package cleanup

import (
	"context"
	"errors"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// errGone ends a close whose provider is gone (ClosePolicy.Gone).
var errGone = errors.New("the provider is gone")

// goneMsg is the protocol-close error of a close the provider's exit (or
// the closed connection) ended before an answer.
const goneMsg = "the provider exited or closed its connection before session/close was answered"

// Call is one ACP session/close request in flight. Wait blocks until the
// agent answers (nil, or the agent's error), the connection closes
// (jsonrpc2.ErrClosed) or ctx ends (ctx's error); after a Wait whose ctx
// ended the same answer can still be waited for again.
type Call interface {
	Wait(ctx context.Context) error
}

// Abandoner is a Call that can tell the agent its answer is no longer
// awaited: the sidecar sends it ACP $/cancel_request (docs/protocol.md
// §22). CloseACP calls Abandon on a call it gives up on (the window ended
// while the call was unanswered).
type Abandoner interface {
	Abandon()
}

// abandon tells call's agent the sidecar gave up on it, if it can.
func abandon(call Call) {
	if a, ok := call.(Abandoner); ok {
		a.Abandon()
	}
}

// Sender sends one ACP session/close for the target's ACP session.
type Sender func() (Call, error)

// ClosePolicy is how one target's ACP session/close is tried
// (docs/rules.md#r16, #r20).
type ClosePolicy struct {
	// Attempt bounds the answer to one attempt (closeTimeoutMs): past it
	// the attempt is reported timed out (PROTOCOL_CLOSE_TIMEOUT) but stays
	// the target's only close until it settles; when it settles with a
	// failure inside Window, a retry follows.
	Attempt time.Duration
	// Window bounds the whole close, from the first attempt: no attempt
	// is started, and no timed-out attempt waited on, past it. A live
	// close has Window = Attempt (one closeTimeoutMs budget); a retained
	// target (a late session) has a longer one.
	Window time.Duration
	// Attempts caps the attempts (a live close's protocolCloseAttempts);
	// 0: no count, only Window and Gone bound them (a retained target,
	// docs/rules.md#r20).
	Attempts int
	// Backoff is the wait between an error answer and the next attempt.
	Backoff Backoff
	// Gone, when it closes, ends the close: the provider is gone, nothing
	// more can be closed (nil: never).
	Gone <-chan struct{}
	// Describe is the (redacted) message of an agent's error answer.
	Describe func(error) string
}

// CloseResult is what the close phase of one target did.
type CloseResult struct {
	// Close is the final outcome: ok, error or timeout.
	Close protocol.ProtocolClose
	// Errors has one entry per failed or timed-out attempt, in order
	// (PROTOCOL_CLOSE_FAILED, PROTOCOL_CLOSE_TIMEOUT); a close that failed
	// and then succeeded keeps its failures here.
	Errors []protocol.ProofError
	// Sent counts the session/close requests sent.
	Sent int
}

// CloseACP is the one ACP close loop: attempts go one at a time, an error
// answer is retried after the policy's backoff, a timed-out attempt is
// waited on until it settles and retried only if it settles with a
// failure, all inside p.Window, at most p.Attempts times (when set), and
// never once p.Gone has closed or the connection is closed.
func CloseACP(p ClosePolicy, send Sender) CloseResult {
	base, cancelGone := context.WithCancelCause(context.Background())
	defer cancelGone(nil)
	ctx, cancel := context.WithTimeout(base, p.Window)
	defer cancel()
	if p.Gone != nil {
		go func() {
			select {
			case <-p.Gone:
				cancelGone(errGone)
			case <-ctx.Done():
			}
		}()
	}
	describe := p.Describe
	if describe == nil {
		describe = func(err error) string { return err.Error() }
	}
	timeoutMsg := "session/close did not answer within " + p.Attempt.String()
	var r CloseResult
	fail := func(code protocol.DataCode, msg string, outcome protocol.CloseOutcome) {
		r.Errors = append(r.Errors, protocol.ProofError{Code: code, Message: msg})
		r.Close = protocol.ProtocolClose{Outcome: outcome, Error: msg}
	}
	b := p.Backoff
	for {
		call, err := send()
		r.Sent++
		timedOut := false
		if err == nil {
			actx, acancel := context.WithTimeout(ctx, p.Attempt)
			err = call.Wait(actx)
			// Timed out: the attempt's bound or the window ran out — not the
			// provider's exit, which ends the wait too.
			timedOut = err != nil && actx.Err() != nil && !errors.Is(context.Cause(ctx), errGone)
			acancel()
			if timedOut {
				fail(protocol.ErrProtocolCloseTimeout, timeoutMsg, protocol.CloseTimeout)
				if ctx.Err() != nil {
					abandon(call)
					return r // the window ended with it
				}
				err = call.Wait(ctx) // still the target's only close
			}
		}
		switch {
		case err == nil:
			r.Close = protocol.ProtocolClose{Outcome: protocol.CloseOK}
			return r
		case errors.Is(context.Cause(ctx), errGone) || errors.Is(err, jsonrpc2.ErrClosed):
			if timedOut {
				// The close had run out its time before the provider went:
				// its outcome stays timeout (docs/rules.md#r16, #r29); the
				// agent never answered it with an error.
				return r
			}
			fail(protocol.ErrProtocolCloseFailed, goneMsg, protocol.CloseError)
			return r
		case ctx.Err() != nil:
			if call != nil {
				abandon(call)
			}
			if !timedOut {
				fail(protocol.ErrProtocolCloseTimeout, timeoutMsg, protocol.CloseTimeout)
			} else {
				r.Close = protocol.ProtocolClose{Outcome: protocol.CloseTimeout, Error: timeoutMsg}
			}
			return r
		}
		fail(protocol.ErrProtocolCloseFailed, describe(err), protocol.CloseError)
		if p.Attempts > 0 && r.Sent >= p.Attempts {
			return r
		}
		if !b.Wait(ctx.Done()) {
			return r
		}
	}
}
