package cleanup

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

func redact(s string) string { return strings.ReplaceAll(s, "secret-xyz", "[redacted]") }

// TestRun_EveryOriginTakesTheOnePath: each origin's cleanup is one Job;
// the proof names it, closes where there is a session, ends the tree and
// is complete only when the termination saw the tree empty.
func TestRun_EveryOriginTakesTheOnePath(t *testing.T) {
	for _, o := range []protocol.ProofOrigin{protocol.OriginClose, protocol.OriginAdmission, protocol.OriginShutdown,
		protocol.OriginProviderExit, protocol.OriginRecovered} {
		t.Run(string(o), func(t *testing.T) {
			a := &fakeAgent{}
			tr := &fakeTree{}
			j := Job{Target: Target{Session: "s-1", SessionKey: "k", Reason: "why", Origin: o, Containment: reaper.ModeCgroup},
				Terminate: tr.terminate, Clean: redact}
			closed := false
			if o != protocol.OriginProviderExit && o != protocol.OriginRecovered {
				j.Send, j.Close = a.send, ClosePolicy{Attempt: time.Second, Window: time.Second, Attempts: 4}
				j.AfterClose = func() { closed = true }
			}
			p, err := Run(j)
			if err != nil {
				t.Fatal(err)
			}
			if p.Origin != o || p.Session != "s-1" || p.SessionKey != "k" || p.Reason != "why" || !strings.HasPrefix(p.CleanupID, "c-") {
				t.Errorf("proof names %+v", p)
			}
			if !p.Complete || !p.Verified.TreeEmpty || len(p.Processes) != 1 || p.Attempts != 1 || p.Containment != string(reaper.ModeProcessGroup) {
				t.Errorf("proof %+v: want complete, one process, the tree's containment", p)
			}
			wantClose := protocol.CloseSkipped
			if j.Send != nil {
				wantClose = protocol.CloseOK
				if !closed || a.sent != 1 {
					t.Errorf("close sent %d, AfterClose ran %v", a.sent, closed)
				}
			}
			if p.ProtocolClose.Outcome != wantClose || len(p.Errors) != 0 || p.FinishedAt.Before(p.StartedAt.Time) {
				t.Errorf("protocolClose %+v errors %v", p.ProtocolClose, p.Errors)
			}
		})
	}
}

// TestRun_NothingLaunchedIsCompleteByConstruction (docs/rules.md#r1).
func TestRun_NothingLaunchedIsCompleteByConstruction(t *testing.T) {
	p, err := Run(Job{Target: Target{Session: "s", Origin: protocol.OriginAdmission}})
	if err != nil || !p.Complete || p.Verified.Method != "nothing was launched" || p.Signals == nil || p.Processes == nil || p.Errors == nil {
		t.Fatalf("proof %+v err %v", p, err)
	}
	q := NothingLaunched(Target{Session: "s"}, time.Now())
	if !q.Complete || q.Verified != p.Verified || q.CleanupID == p.CleanupID || q.Attempts != 0 || p.Attempts != 0 {
		t.Errorf("NothingLaunched %+v", q)
	}
}

// TestRun_ErrorsInOrder (docs/rules.md#r11, #r12): the close's failures,
// then the errors known before termination, then the termination's
// (redacted).
func TestRun_ErrorsInOrder(t *testing.T) {
	a := &fakeAgent{answers: []answer{{err: errRefused}, {}}}
	tr := &fakeTree{incomplete: 1}
	p, _ := Run(Job{Target: Target{Origin: protocol.OriginClose}, Send: a.send,
		Close: ClosePolicy{Attempt: time.Second, Window: time.Second, Attempts: 4, Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond}},
		Before: func() []protocol.ProofError {
			return []protocol.ProofError{{Code: protocol.ErrProviderOOM, Message: "oom"}}
		},
		Terminate: tr.terminate, Clean: redact})
	if got := codes(p.Errors); !eq(got, []string{failed, string(protocol.ErrProviderOOM), "PROVIDER_KILL_TIMEOUT"}) {
		t.Fatalf("errors %v", got)
	}
	if p.ProtocolClose.Outcome != protocol.CloseOK || p.Complete || strings.Contains(p.Errors[2].Message, "secret-xyz") {
		t.Errorf("proof %+v", p)
	}
}

// TestRun_RecoveryRefusalIsNoProof: a leftover recovery cannot prove
// (reaper.ErrUnprovable) gives an error and no proof.
func TestRun_RecoveryRefusalIsNoProof(t *testing.T) {
	tr := &fakeTree{refuse: reaper.ErrUnprovable}
	p, err := Run(Job{Target: Target{Origin: protocol.OriginRecovered}, Terminate: tr.terminate})
	if p != nil || !errors.Is(err, reaper.ErrUnprovable) {
		t.Fatalf("proof %v err %v", p, err)
	}
}

// TestRetain_RetriesTerminationUntilProven (docs/rules.md#r15, #r20): an
// incomplete cleanup is retried with the backoff, for no count, until the
// tree is proven gone; the final proof keeps cleanupId, startedAt and the
// close's errors, counts attempts, and carries the latest termination's
// facts once (not once per retry). The first proof is not changed.
func TestRetain_RetriesTerminationUntilProven(t *testing.T) {
	a := &fakeAgent{answers: []answer{{err: errRefused}}}
	tr := &fakeTree{incomplete: 6}
	first, _ := Run(Job{Target: Target{Origin: protocol.OriginClose}, Send: a.send,
		Close:     ClosePolicy{Attempt: time.Second, Window: time.Second, Attempts: 1},
		Terminate: tr.terminate})
	if first.Complete {
		t.Fatal("first run complete")
	}
	firstErrs := len(first.Errors)
	var progress []int
	final, ok := Retain(Retained{First: first, Terminate: tr.terminate, Backoff: Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond},
		Progress: func(p *protocol.Proof) { progress = append(progress, p.Attempts) }})
	if !ok || !final.Complete || final.Attempts != 7 || final.CleanupID != first.CleanupID || final.StartedAt != first.StartedAt {
		t.Fatalf("final %+v ok %v", final, ok)
	}
	if got := codes(final.Errors); !eq(got, []string{failed}) || final.ProtocolClose.Outcome != protocol.CloseError {
		t.Errorf("final errors %v protocolClose %+v: want the close's failure kept", got, final.ProtocolClose)
	}
	if len(final.Signals) != 7 || len(final.Processes) != 1 {
		t.Errorf("final signals %d processes %d: want the last termination's 7 and 1", len(final.Signals), len(final.Processes))
	}
	if len(progress) != 5 || first.Complete || len(first.Errors) != firstErrs {
		t.Errorf("progress %v; first proof changed: %+v", progress, first)
	}
}

// TestRetain_StopsWithTheSidecar: a stop ends the retries with the latest
// proof.
func TestRetain_StopsWithTheSidecar(t *testing.T) {
	tr := &fakeTree{incomplete: 1 << 30}
	first, _ := Run(Job{Target: Target{Origin: protocol.OriginShutdown}, Terminate: tr.terminate})
	stop := make(chan struct{})
	time.AfterFunc(30*time.Millisecond, func() { close(stop) })
	p, ok := Retain(Retained{First: first, Terminate: tr.terminate, Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond}, Stop: stop})
	if ok || p.Complete || p.CleanupID != first.CleanupID {
		t.Fatalf("proof %+v ok %v", p, ok)
	}
}

// TestIncomplete_ShutdownPastItsBound: the synthesized proof of a session
// whose cleanup outlived shutdown's bound.
func TestIncomplete_ShutdownPastItsBound(t *testing.T) {
	p := Incomplete(Target{Session: "s", Origin: protocol.OriginShutdown, Containment: reaper.ModeCgroup}, "shutdown bound exceeded", time.Now())
	if p.Complete || p.Attempts != 0 || p.Containment != "cgroup" || !eq(codes(p.Errors), []string{string(protocol.ErrCleanupIncomplete)}) || p.ProtocolClose.Outcome != protocol.CloseSkipped {
		t.Fatalf("proof %+v", p)
	}
}
