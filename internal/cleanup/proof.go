package cleanup

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Target names what one cleanup ends: the sidecar session, its
// sessionKey, why and from where (docs/protocol.md §12).
type Target struct {
	// Session is the sidecar's session id ("s-…").
	Session string
	// SessionKey is the host's key (= the record id, docs/rules.md#r18).
	SessionKey string
	// Reason is copied into the proof ("host close", …).
	Reason string
	// Origin is what started the cleanup.
	Origin protocol.ProofOrigin
	// Containment is the containment mode in force (the tree's own, once
	// there is a tree, replaces it).
	Containment reaper.Mode
}

// NewCleanupID is a fresh proof cleanupId: "c-" and 16 hex digits.
func NewCleanupID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}

// Begin is the one constructor of a proof: t's names, a fresh cleanupId,
// protocolClose "skipped", empty (never null) lists, attempts 1, startedAt
// now. Nothing is complete until ApplyTermination or NothingLaunched says
// so.
func Begin(t Target, now time.Time) *protocol.Proof {
	return &protocol.Proof{CleanupID: NewCleanupID(), Session: t.Session, SessionKey: t.SessionKey,
		Reason: t.Reason, Origin: t.Origin, ProtocolClose: protocol.ProtocolClose{Outcome: protocol.CloseSkipped},
		Signals: []protocol.ProofSignal{}, Processes: []protocol.ProofProcess{}, Containment: string(t.Containment),
		Attempts: 1, StartedAt: protocol.At(now), Errors: []protocol.ProofError{}}
}

// NothingLaunched is the complete proof of a cleanup with no tree
// (docs/rules.md#r1): verified by construction, attempts 0 (nothing was
// tried: docs/protocol.md §5 cleanup), finished at startedAt.
func NothingLaunched(t Target, now time.Time) *protocol.Proof {
	p := Begin(t, now)
	markNothingLaunched(p)
	Finish(p, now)
	return p
}

// NothingRunning is the complete proof of closing a session whose tree
// is not running: a parked session, whose retire already proved its tree
// gone (docs/protocol.md §24). Attempts 0, finished at startedAt.
func NothingRunning(t Target, now time.Time) *protocol.Proof {
	p := Begin(t, now)
	p.Attempts = 0
	p.Complete, p.Verified = true, protocol.ProofVerified{TreeEmpty: true, Method: "no tree was running (parked: its retire proved it gone)"}
	Finish(p, now)
	return p
}

// AttachPublication records what the publication of the provider state
// that followed p's cleanup did (docs/protocol.md §24); pub nil leaves p
// without one.
func AttachPublication(p *protocol.Proof, pub *protocol.Publication) {
	if p != nil {
		p.Publication = pub
	}
}

// markNothingLaunched makes p the proof of a cleanup with no tree:
// complete by construction, nothing attempted.
func markNothingLaunched(p *protocol.Proof) {
	p.Attempts = 0
	p.Complete, p.Verified = true, protocol.ProofVerified{TreeEmpty: true, Method: "nothing was launched"}
}

// Incomplete is the proof of a cleanup that did not finish in time (a
// shutdown past its bound): incomplete, attempts 0 (no attempt of its
// finished: docs/protocol.md §7 shutdown), one CLEANUP_INCOMPLETE error
// saying why.
func Incomplete(t Target, why string, now time.Time) *protocol.Proof {
	p := Begin(t, now)
	p.Attempts = 0
	p.Errors = append(p.Errors, protocol.ProofError{Code: protocol.ErrCleanupIncomplete, Message: why})
	Finish(p, now)
	return p
}

// ApplyTermination copies a termination's facts into p (signals, the
// capped process list, errors with messages filtered by clean, the
// verification and completeness). t's facts are cumulative, so a retry
// applies its own result over the first's.
func ApplyTermination(p *protocol.Proof, t reaper.Termination, clean func(string) string) {
	for _, sg := range t.Signals {
		p.Signals = append(p.Signals, protocol.ProofSignal{Signal: sg.Signal, Target: sg.Target, At: protocol.At(sg.At), Error: sg.Error})
	}
	capProcesses(p, t.Processes)
	for _, e := range t.Errors {
		msg := e.Message
		if clean != nil {
			msg = clean(msg)
		}
		p.Errors = append(p.Errors, protocol.ProofError{Code: protocol.DataCode(e.Code), Message: msg})
	}
	p.Verified = protocol.ProofVerified{TreeEmpty: t.Verified.TreeEmpty, Method: t.Verified.Method}
	p.Complete = t.Complete
	if t.Containment != "" {
		p.Containment = string(t.Containment)
	}
}

// Finish stamps finishedAt (now) and durationMs (since startedAt).
func Finish(p *protocol.Proof, now time.Time) {
	p.FinishedAt = protocol.At(now)
	p.DurationMs = now.Sub(p.StartedAt.Time).Milliseconds()
}

// Copy is a deep copy of p (its lists are not shared), for a retry that
// keeps adding to a proof already handed out.
func Copy(p *protocol.Proof) *protocol.Proof {
	c := *p
	c.Signals = append([]protocol.ProofSignal{}, p.Signals...)
	c.Processes = append([]protocol.ProofProcess{}, p.Processes...)
	c.Errors = append([]protocol.ProofError{}, p.Errors...)
	return &c
}

// LateSession is the proof of a late session's own cleanup (docs/rules.md#r6):
// the session an agent created after its open was aborted shares the
// open's termination (failed, the open's proof), with a new cleanup id,
// reason "admission aborted", its own protocol close, and its close's
// errors before the open's, in order.
func LateSession(failed *protocol.Proof, late CloseResult) *protocol.Proof {
	p := Copy(failed)
	p.CleanupID = NewCleanupID()
	p.Reason = "admission aborted"
	p.ProtocolClose = late.Close
	p.Errors = append(append([]protocol.ProofError{}, late.Errors...), failed.Errors...)
	return p
}
