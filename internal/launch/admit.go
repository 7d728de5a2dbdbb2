package launch

import (
	"context"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Session is the session's side of an admission: the steps that need the
// session actor's state or its Manager. The admission worker calls them
// off the actor, in the order listed; each must be safe there.
type Session interface {
	// Prepare runs the steps before the tree slot: for an open with a
	// state store, the key's lease and restore (docs/protocol.md §24),
	// returning the provider state and what was restored (nil if
	// nothing); for a revive with a state, the lease check and the
	// restore of removed provider state. Its error launches nothing
	// (STATE_FENCED, STORE_UNAVAILABLE …).
	Prepare(ctx context.Context, in *Input) (*provstate.State, *protocol.Restore, *protocol.Error)
	// TakeTreeSlot waits for a live-tree slot (--max-live-trees,
	// docs/protocol.md §24). It returns the slot's release, or nil and
	// the refusal (SIDECAR_AT_CAPACITY), or nil and nil when ctx ended.
	TakeTreeSlot(ctx context.Context) (release func(), e *protocol.Error)
	// LedgerBeforeLaunch writes the ownership ledger entry the launch
	// waits for, not yet fsynced (docs/protocol.md §18.5); its error
	// launches nothing.
	LedgerBeforeLaunch(st *store.Store) (*store.Pending, error)
	// RecordTree completes the ledger entry with tree's identity,
	// durably, and on failure makes pre durable instead and reports the
	// error to the actor. It blocks; the worker runs it beside the
	// handshake.
	RecordTree(st *store.Store, tree Tree, pre *store.Pending)
	// Started wires a launched tree to the session: it notes that a tree
	// exists, drains its stderr into tail, makes the ACP connection (its
	// events routed to the session) and hands tree and connection to the
	// actor, which watches the tree's exit.
	Started(tree Tree, tail *acpclient.StderrTail) *acpclient.Conn
	// Replaying tells the actor, before session/load is sent, that the
	// updates that follow are replayed history (drop: not even
	// forwarded; a revive's replay was journaled live already).
	Replaying(drop bool)
	// Cleanup closes the agent's session where it can, terminates the
	// tree and returns the proof of a failed admission (origin
	// admission). It blocks.
	Cleanup(c CleanupInput) *protocol.Proof
	// CloseLate closes backendSessionID, a session the agent created
	// after admission gave up, under the retained close policy bounded by
	// tree's exit (docs/rules.md#r16, #r20).
	CloseLate(conn *acpclient.Conn, tree Tree, backendSessionID string) cleanup.CloseResult
	// Cancelled is the open's error once ctx ended: SHUTTING_DOWN, a
	// revive no call waits for, else ACPX_ADMISSION_ABORTED.
	Cancelled(ctx context.Context) *protocol.Error
}

// CleanupInput is the cleanup of a failed admission after the launch.
type CleanupInput struct {
	// Conn is the ACP connection to the launched agent, used for the
	// protocol close.
	Conn *acpclient.Conn
	// Tree is the launched provider tree to terminate and prove gone.
	Tree Tree
	// BackendSessionID is the ACP session to close; "" skips the
	// protocol close (docs/rules.md#r5).
	BackendSessionID string
	// Reason is the proof's reason (docs/protocol.md §8, "Proof reason of
	// a failed admission").
	Reason string
	// CloseSupported: the agent advertised sessionCapabilities.close.
	CloseSupported bool
	// KeepConn closes the connection only after the tree is gone (a late
	// handshake may still answer).
	KeepConn bool
}

// Worker is one session's admission worker: the session's immutable
// values and its Session side.
type Worker struct {
	// ID and Key are the session id and its sessionKey.
	ID, Key string
	// Log is the session's logger (never given a secret).
	Log *zap.Logger
	// Clean redacts a text that may carry the agent's or the open's
	// secrets (docs/rules.md#r14).
	Clean func(string) string
	// Launcher starts the provider tree.
	Launcher Launcher
	// ClientCaps are the capabilities initialize advertises
	// (docs/protocol.md §14, §23).
	ClientCaps acp.ClientCapabilities
	// Session is the session's side of the admission.
	Session Session
}

// Admit runs off the actor: provider state, tree slot, ledger entry,
// launch, handshake, identity, record. It reads only in and w; the
// Session hands the tree and the connection to the actor as soon as they
// exist (provider events need them). The Result is for the actor to
// adopt; its Err is the open's error (docs/protocol.md §5, §8).
func (w *Worker) Admit(ctx context.Context, in Input) Result {
	s := w.Session
	p, timeout := in.Open, in.Timeout
	closeExe := func() {
		if in.Exe != nil {
			in.Exe.Close()
		}
	}
	// With a state store, an open takes its key over and restores the
	// key's archive first: the record it restores is the one a resume
	// reads (docs/protocol.md §24). A key another sidecar took over is
	// not revived on stale state.
	state, restored, e := s.Prepare(ctx, &in)
	if e != nil {
		closeExe()
		return Result{Err: e}
	}
	prior := loadPrior(w.Log, in)
	// A live-tree slot before anything is written or launched
	// (--max-live-trees, docs/protocol.md §24); given back at once if
	// nothing is launched, else once the tree is proven gone.
	release, e := s.TakeTreeSlot(ctx)
	if release == nil {
		closeExe()
		if e == nil {
			e = s.Cancelled(ctx)
		}
		return Result{Err: e}
	}
	launched := false
	defer func() {
		if !launched {
			release()
		}
	}()
	name := "acpx-" + w.ID
	// The ledger entry is written before the fork, so a sidecar killed at
	// any moment after it leaves something the next one can find. If it
	// cannot be written, nothing is launched (docs/protocol.md §18.5).
	pre, err := s.LedgerBeforeLaunch(in.Store)
	if err != nil {
		_ = in.Store.RemoveOwned(w.ID) // a partial entry, if any
		closeExe()
		if e := admission.Exhausted("the ownership ledger entry could not be written, so nothing was launched", err); e != nil {
			return Result{Err: e}
		}
		return Result{Err: protocol.Domain(protocol.ErrStoreUnavailable,
			"the ownership ledger entry could not be written, so nothing was launched: "+ErrText(err), true),
			Reason: "admission failed before launch: the ownership ledger entry could not be written (STORE_UNAVAILABLE)"}
	}
	if in.Revive != nil {
		// From here a tree may change the provider state: a close now
		// publishes it (before, the store still holds it all).
		in.Revive.State.TreeLaunched()
	}
	tree, err := w.Launcher.Start(reaper.Spec{Path: p.Command.Path, Args: p.Command.Args,
		Env: in.Env, Dir: p.Cwd, ExecFile: in.Exe, Name: name, Limits: in.Limits, Sandbox: in.Plan})
	closeExe()
	if err != nil {
		e := launchError(w.Clean, err, p.Command.Args, in.Env)
		pre.Release()
		_ = in.Store.RemoveOwned(w.ID)
		return Result{Err: e} // nothing was launched
	}
	launched = true
	// The entry is completed with the tree's identity, durably, while the
	// agent starts and answers the handshake: the entry written before the
	// launch (pid 0, marker, cgroup parent) already lets a later sidecar
	// find this tree, so nothing waits on this write (two fsyncs) but the
	// end of admission, which never returns before it is done (a failed
	// admission removes the entry after it; the open's result follows it).
	// If it fails, the entry before the launch is made durable instead.
	ledgerDone := make(chan struct{})
	go func() {
		defer close(ledgerDone)
		s.RecordTree(in.Store, tree, pre)
	}()
	defer func() { <-ledgerDone }()
	tail := acpclient.NewStderrTail()
	conn := s.Started(tree, tail)

	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	late := &lateHandshake{}
	adm, backendSessionID, herr := w.handshake(hctx, &in, conn, tree, prior, late)
	if late.waiter != nil {
		backendSessionID = "" // the late watcher owns that close (docs/rules.md#r16)
	}
	if herr == nil && ctx.Err() != nil {
		herr = s.Cancelled(ctx)
		_ = adm.RecordSync.Sync() // the cleanup below updates it
	}
	if herr != nil {
		// Classify: the host's cancel (or shutdown), our timeout, or the
		// agent's refusal.
		switch {
		case ctx.Err() != nil:
			herr = s.Cancelled(ctx)
		case hctx.Err() != nil:
			herr = protocol.Domain(protocol.ErrHandshakeTimeout, "the session handshake did not finish within "+timeout.String(), true)
		}
		return w.failed(conn, tree, tail, late, backendSessionID, herr)
	}
	tail.Keep(false) // admitted: nothing more is kept
	adm.State = state
	adm.Result.Restore = restored
	return Result{Adm: adm, CloseSupported: late.closeSupported}
}

// failed ends an admission whose handshake failed with herr after the
// launch: the tree is cleaned up (a late session closed beside it) and
// herr carries the proof, the agent's last stderr and every cleanup
// error.
func (w *Worker) failed(conn *acpclient.Conn, tree Tree, tail *acpclient.StderrTail, late *lateHandshake, backendSessionID string, herr *protocol.Error) Result {
	s := w.Session
	reason := launchedReason(herr)
	// A session the agent creates after we gave up is closed while the
	// tree is terminated; the connection stays open until then.
	lateDone := make(chan *cleanup.CloseResult, 1)
	go func() { lateDone <- late.watch(s, conn, tree) }()
	proof := s.Cleanup(CleanupInput{Conn: conn, Tree: tree, BackendSessionID: backendSessionID, Reason: reason,
		CloseSupported: late.closeSupported, KeepConn: late.waiter != nil})
	lateClose := <-lateDone
	herr.Data.Cleanup = proof
	if c := herr.Data.Code; c == protocol.ErrEnsureFailed || c == protocol.ErrHandshakeTimeout || c == protocol.ErrSessionLost {
		// The agent's own words on why (a bad flag, a missing key), as
		// it ended: the tree is gone, so its stderr is ending too.
		herr.Data.Stderr = w.Clean(tail.Text(acpclient.StderrSettle))
	}
	// docs/rules.md#r11, #r12: the handshake error first, then each cleanup
	// error in order: the protocol close's attempts, signal deliveries,
	// "did not exit after SIGKILL", then a late session's close attempts.
	errs := append([]protocol.ProofError{}, proof.Errors...)
	if lateClose != nil {
		errs = append(errs, lateClose.Errors...)
	}
	if len(errs) > 0 {
		herr.Data.Causes = append([]protocol.ProofError{{Code: herr.Data.Code, Message: herr.Message}}, errs...)
		herr.Message = "handshake and provider cleanup failed: " + herr.Message
	}
	return Result{Err: herr, Proof: proof, LateClose: lateClose, CloseSupported: late.closeSupported}
}
