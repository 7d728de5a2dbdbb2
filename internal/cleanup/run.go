package cleanup

import (
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Terminator ends a tree once and reports what it observed: a live
// tree's Terminate (TERM, termGrace, KILL, killGrace; its facts
// cumulative over calls) or the recovery of a dead sidecar's leftover
// (reaper.Recover). It is called again after an incomplete result
// (docs/rules.md#r20); an error (a leftover recovery cannot prove,
// reaper.ErrUnprovable) ends the cleanup.
type Terminator func() (reaper.Termination, error)

// Job is one cleanup: close the ACP session where there is one, then end
// the tree and build the proof.
type Job struct {
	// Target is what the proof is about: session, key, reason, origin and
	// containment mode (Begin).
	Target Target
	// Send sends ACP session/close; nil: no close is sent and the proof's
	// protocolClose is Skip.
	Send Sender
	// Close is the policy Send is tried under.
	Close ClosePolicy
	// Skip is protocolClose when Send is nil (zero: "skipped").
	Skip protocol.ProtocolClose
	// AfterClose runs once the close phase is over, before the tree is
	// ended (the session closes the provider connection here); may be nil.
	AfterClose func()
	// Terminate ends the tree; nil: nothing was launched and the proof is
	// complete by construction (docs/rules.md#r1).
	Terminate Terminator
	// Before, if set, gives the errors known just before the termination
	// (an OOM kill count), reported after the close's.
	Before func() []protocol.ProofError
	// Clean filters the termination's error messages (redaction); nil
	// keeps them.
	Clean func(string) string
}

// Run performs j and returns its first proof, complete or not. It blocks
// (the close's Window plus the termination's graces); it runs off any
// session actor. The error is the Terminator's refusal (a leftover that
// names nothing recovery can prove): then there is no proof.
func Run(j Job) (*protocol.Proof, error) {
	p := Begin(j.Target, time.Now())
	if j.Send != nil {
		r := CloseACP(j.Close, j.Send)
		p.ProtocolClose = r.Close
		p.Errors = append(p.Errors, r.Errors...)
	} else if j.Skip.Outcome != "" {
		p.ProtocolClose = j.Skip
	}
	if j.AfterClose != nil {
		j.AfterClose()
	}
	if j.Before != nil {
		p.Errors = append(p.Errors, j.Before()...)
	}
	if j.Terminate == nil {
		markNothingLaunched(p)
		Finish(p, time.Now())
		return p, nil
	}
	t, err := j.Terminate()
	if err != nil {
		return nil, err
	}
	ApplyTermination(p, t, j.Clean)
	Finish(p, time.Now())
	return p, nil
}

// Retained is an incomplete cleanup kept until its tree is proven gone
// (docs/rules.md#r15, #r20).
type Retained struct {
	// First is the incomplete proof already handed out; it is not changed.
	First *protocol.Proof
	// Terminate ends the tree again (the same Terminator the first run
	// used).
	Terminate Terminator
	// Backoff spaces the retries (retainedRetryMinMs doubling to
	// retainedRetryMaxMs).
	Backoff Backoff
	// Stop ends the retries (the sidecar stops); nil: never.
	Stop <-chan struct{}
	// Progress, if set, is given every incomplete proof of a retry.
	Progress func(*protocol.Proof)
	// Clean filters error messages as in Job.
	Clean func(string) string
}

// Retain retries r's termination with r.Backoff, never giving up for a
// count, until it is complete (true: the final proof, same cleanupId and
// startedAt, attempts counted) or r.Stop closes or the Terminator refuses
// (false: the latest proof). Every retry keeps the first run's
// protocol-close outcome and errors, in order, and replaces the
// termination's facts with the latest (a tree's are cumulative).
func Retain(r Retained) (*protocol.Proof, bool) {
	base := Copy(r.First)
	base.Signals, base.Processes, base.ProcessesOmitted = []protocol.ProofSignal{}, []protocol.ProofProcess{}, 0
	base.Errors = base.Errors[:closeAndBeforeErrors(r.First)]
	p := Copy(r.First)
	b := r.Backoff
	for !p.Complete {
		if !b.Wait(r.Stop) {
			return p, false
		}
		t, err := r.Terminate()
		if err != nil {
			return p, false
		}
		next := Copy(base)
		ApplyTermination(next, t, r.Clean)
		next.Attempts = p.Attempts + 1
		Finish(next, time.Now())
		p = next
		if !p.Complete && r.Progress != nil {
			r.Progress(p)
		}
	}
	return p, true
}

// closeAndBeforeErrors is how many of p's errors came before its
// termination: those of the protocol close and Job.Before, which lead the
// list (Run).
func closeAndBeforeErrors(p *protocol.Proof) int {
	for n, e := range p.Errors {
		switch e.Code {
		case protocol.ErrProtocolCloseFailed, protocol.ErrProtocolCloseTimeout, protocol.ErrProviderOOM:
		default:
			return n
		}
	}
	return len(p.Errors)
}
