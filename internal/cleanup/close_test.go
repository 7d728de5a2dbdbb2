package cleanup

import (
	"slices"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

func codes(errs []protocol.ProofError) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = string(e.Code)
	}
	return out
}

func eq(a, b []string) bool { return slices.Equal(a, b) }

const (
	failed   = string(protocol.ErrProtocolCloseFailed)
	timedOut = string(protocol.ErrProtocolCloseTimeout)
)

// TestCloseACP_ErrorAnswersRetriedOneAtATime (docs/rules.md#r16): an error
// answer is retried only after it settled, and the failures stay in the
// result, in order, though the last attempt succeeded.
func TestCloseACP_ErrorAnswersRetriedOneAtATime(t *testing.T) {
	a := &fakeAgent{answers: []answer{{err: errRefused, delay: 5 * time.Millisecond}, {err: errRefused}, {}}}
	r := CloseACP(ClosePolicy{Attempt: time.Second, Window: time.Second, Attempts: 4, Backoff: Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}}, a.send)
	if r.Close.Outcome != protocol.CloseOK || r.Sent != 3 || !eq(codes(r.Errors), []string{failed, failed}) {
		t.Fatalf("result %+v, want ok after 3 attempts with 2 failures kept", r)
	}
	if a.overlap.Load() {
		t.Errorf("two session/close attempts were in flight at once")
	}
}

// TestCloseACP_LiveCloseStopsAtItsAttemptCap: a live close (Attempts set)
// gives up after that many error answers, reporting each.
func TestCloseACP_LiveCloseStopsAtItsAttemptCap(t *testing.T) {
	a := &fakeAgent{answers: []answer{{err: errRefused}, {err: errRefused}, {err: errRefused}, {err: errRefused}, {}}}
	r := CloseACP(ClosePolicy{Attempt: time.Second, Window: time.Second, Attempts: 4, Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond}}, a.send)
	if r.Close.Outcome != protocol.CloseError || r.Sent != 4 || len(r.Errors) != 4 || r.Close.Error != errRefused.Error() {
		t.Fatalf("result %+v, want error after exactly 4 attempts", r)
	}
}

// TestCloseACP_RetainedTargetRetriedBeyondAnyCount (docs/rules.md#r20): a
// retained target (Attempts 0) whose close fails four times gets a fifth
// that succeeds.
func TestCloseACP_RetainedTargetRetriedBeyondAnyCount(t *testing.T) {
	a := &fakeAgent{answers: []answer{{err: errRefused}, {err: errRefused}, {err: errRefused}, {err: errRefused}, {}}}
	r := CloseACP(ClosePolicy{Attempt: time.Second, Window: 10 * time.Second, Backoff: Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}}, a.send)
	if r.Close.Outcome != protocol.CloseOK || r.Sent != 5 || !eq(codes(r.Errors), []string{failed, failed, failed, failed}) {
		t.Fatalf("result %+v, want ok on the fifth attempt, four failures in order", r)
	}
}

// TestCloseACP_RetainedTargetBoundedByTime: a close that always fails is
// retried until the window ends, not for ever and not for a count.
func TestCloseACP_RetainedTargetBoundedByTime(t *testing.T) {
	a := &fakeAgent{answers: make([]answer, 10000)}
	for i := range a.answers {
		a.answers[i] = answer{err: errRefused}
	}
	start := time.Now()
	r := CloseACP(ClosePolicy{Attempt: time.Second, Window: 80 * time.Millisecond, Backoff: Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}}, a.send)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the close took %v past an 80ms window", took)
	}
	// The window may end during an attempt's wait (that attempt is then
	// reported timed out) or during a backoff (the last error stands).
	if (r.Close.Outcome != protocol.CloseError && r.Close.Outcome != protocol.CloseTimeout) || r.Sent < 5 || len(r.Errors) != r.Sent {
		t.Fatalf("result outcome %v sent %d errors %d: want error after several attempts, one error each", r.Close.Outcome, r.Sent, len(r.Errors))
	}
}

// TestCloseACP_TimedOutCloseRetriedOnlyAfterItSettlesWithAFailure
// (docs/rules.md#r16): an attempt past its bound is reported timed out but
// stays the only close; when it then settles with a failure, a retry
// follows, and it succeeds.
func TestCloseACP_TimedOutCloseRetriedOnlyAfterItSettlesWithAFailure(t *testing.T) {
	a := &fakeAgent{answers: []answer{{err: errRefused, delay: 120 * time.Millisecond}, {}}}
	r := CloseACP(ClosePolicy{Attempt: 30 * time.Millisecond, Window: 10 * time.Second, Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond}}, a.send)
	if r.Close.Outcome != protocol.CloseOK || r.Sent != 2 || !eq(codes(r.Errors), []string{timedOut, failed}) {
		t.Fatalf("result %+v, want timeout, then the late failure, then ok", r)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.overlap.Load() || !a.sentAt[1].After(a.settled[0]) {
		t.Errorf("the retry was sent before the timed-out attempt settled (sent %v, settled %v)", a.sentAt[1], a.settled[0])
	}
}

// TestCloseACP_LiveTimeoutIsTheOnlyAttempt: with one budget (Window =
// Attempt) a close that does not answer is the only one: timeout.
func TestCloseACP_LiveTimeoutIsTheOnlyAttempt(t *testing.T) {
	a := &fakeAgent{answers: []answer{{never: true}}}
	r := CloseACP(ClosePolicy{Attempt: 20 * time.Millisecond, Window: 20 * time.Millisecond, Attempts: 4}, a.send)
	if r.Close.Outcome != protocol.CloseTimeout || r.Sent != 1 || !eq(codes(r.Errors), []string{timedOut}) {
		t.Fatalf("result %+v, want one timed-out attempt", r)
	}
}

// TestCloseACP_ProviderGoneEndsTheClose: once the provider is gone
// nothing is retried and nothing waited on; a close that had already run
// out its time stays timeout (docs/rules.md#r16, #r29: the agent never
// answered it with an error), while one that had not is an error.
func TestCloseACP_ProviderGoneEndsTheClose(t *testing.T) {
	a := &fakeAgent{answers: []answer{{never: true}}}
	gone := make(chan struct{})
	time.AfterFunc(20*time.Millisecond, func() { close(gone) })
	r := CloseACP(ClosePolicy{Attempt: 10 * time.Millisecond, Window: time.Minute, Gone: gone}, a.send)
	if r.Close.Outcome != protocol.CloseTimeout || r.Sent != 1 || !eq(codes(r.Errors), []string{timedOut}) {
		t.Fatalf("result %+v, want the timeout only, one attempt", r)
	}
	b := &fakeAgent{answers: []answer{{never: true}}}
	gone = make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(gone) })
	r = CloseACP(ClosePolicy{Attempt: time.Minute, Window: time.Minute, Gone: gone}, b.send)
	if r.Close.Outcome != protocol.CloseError || r.Sent != 1 || !eq(codes(r.Errors), []string{failed}) {
		t.Fatalf("result %+v, want the provider's exit as the close's error, one attempt", r)
	}
}

// TestBackoff_DoublesToItsCap: 10, 20, 40, 80, 100, 100 ms.
func TestBackoff_DoublesToItsCap(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	var got []time.Duration
	for i := 0; i < 6; i++ {
		got = append(got, b.Next())
	}
	want := []time.Duration{10, 20, 40, 80, 100, 100}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("backoff %v, want %v ms", got, want)
		}
	}
	stop := make(chan struct{})
	close(stop)
	if (&Backoff{Min: time.Hour, Max: time.Hour}).Wait(stop) {
		t.Errorf("Wait did not return false on stop")
	}
}
