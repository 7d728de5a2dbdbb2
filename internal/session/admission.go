package session

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// admitted is what a successful admission hands to the actor.
type admitted struct {
	result   protocol.OpenResult
	caps     acpclient.AgentCaps
	modelCtl string
	record   *store.Record
	// recordSync makes the record's write durable; admitted starts it as
	// the open is answered.
	recordSync *store.Pending
	pins       controls.Pins
	// held are the controls held against drift (seedcontrols.go).
	held map[string]string
	// state is the provider state's lease and sources (provstate.go);
	// nil without a state store, and for a revive (it keeps its own).
	state *provstate.State
}

// admissionInput is the immutable input of the admission worker, made on
// the actor before the worker starts. The worker reads only this and the
// session's immutable fields (id, key, log, red, m.Config).
type admissionInput struct {
	open    protocol.OpenParams
	prof    profiles.Profile
	st      *store.Store
	exe     *os.File // the verified executable (sha256 given), else nil; the worker closes it
	env     []string // the launch environment (secret values: the child only)
	baseEnv []string // the base environment (Manager.baseEnvFor), for the profile's auth rules
	timeout time.Duration
	limits  reaper.Limits // Manager.effectiveLimits of the open
	sandbox sandboxSetup  // the open's kernel sandbox (sandbox.go)
	revive  *reviveInput  // a revive's session and pins (admitinput.go); nil for an open
	// stateSources are the provider-state dirs, resolved in env and
	// claimed (provstate.go); nil without a state store.
	stateSources []statestore.Source
}

// envHas reports whether the launch environment gives name a non-empty
// value (the open's env over the base env).
func (in *admissionInput) envHas(name string) bool {
	if v, ok := in.open.Env[name]; ok {
		return v != ""
	}
	for _, kv := range in.baseEnv {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v != ""
		}
	}
	return false
}

// admissionResult is what the admission worker returns for the actor to
// adopt (finishAdmission). Exactly one of adm and err is set; proof is
// the failed admission's cleanup, nil when nothing was launched.
type admissionResult struct {
	adm   *admitted
	err   *protocol.Error
	proof *protocol.Proof
	// lateClose is the protocol close of a session the agent created
	// after admission gave up (docs/rules.md#r6), nil if none appeared.
	lateClose *cleanup.CloseResult
	// closeSupported: the agent advertised sessionCapabilities.close.
	closeSupported bool
	// reason overrides the proof reason of a failure that launched
	// nothing ("" = beforeLaunchReason of err).
	reason string
}

func (s *Actor) startAdmission(ctx context.Context, reply Reply) {
	p := s.open
	st, conflict, err := s.m.openStateDir(p.StateDir, s) // sandboxlive.go
	if conflict != nil {
		s.failBeforeLaunch(reply, conflict)
		return
	}
	if err != nil {
		s.failBeforeLaunch(reply, admission.OrExhausted("the state directory could not be opened", err,
			StoreUnavailable("the state directory cannot be used", err)))
		return
	}
	if !s.takeKeyHold(st, reply) { // before the record, journal or ledger is touched
		return
	}
	s.rec.st = st
	if ctx.Err() != nil { // docs/rules.md#r1
		s.failBeforeLaunch(reply, abortedError())
		return
	}
	in, e := s.prepareLaunch(nil) // admitinput.go
	if e != nil {
		s.failBeforeLaunch(reply, e)
		return
	}
	go func() {
		r := s.admit(ctx, in)
		s.post(func() { s.finishAdmission(r, reply) })
	}()
}

// finishAdmission adopts the admission worker's result on the actor and
// answers the open.
func (s *Actor) finishAdmission(r admissionResult, reply Reply) {
	s.rec.closeSupported = r.closeSupported
	switch {
	case r.adm != nil:
		s.admitted(r.adm, reply)
	case r.proof == nil:
		s.failBeforeLaunchWhy(reply, r.err, r.reason)
	default:
		s.moveTo(protocol.StateClosed)
		s.end.proof = r.proof
		s.m.Stats.countProof(r.proof)
		s.admissionFailed(r.proof, r.err, reply)
		if r.lateClose != nil {
			// The late session's own cleanup, after the open's answer
			// (docs/protocol.md §9 cleanup/proof; docs/rules.md#r6).
			// It shares the record's termination; its own close errors
			// come first, in order.
			lp := cleanup.Copy(r.proof)
			lp.CleanupID = cleanup.NewCleanupID()
			lp.Reason = "admission aborted"
			lp.ProtocolClose = r.lateClose.Close
			lp.Errors = append(append([]protocol.ProofError{}, r.lateClose.Errors...), r.proof.Errors...)
			s.notify(protocol.NotifyCleanupProof, protocol.ProofNotice{Proof: lp})
		}
	}
}

func abortedError() *protocol.Error {
	return &protocol.Error{RPCCode: protocol.CodeCancelled, Message: "the open was cancelled by the host",
		Data: protocol.ErrorData{Code: protocol.ErrAdmissionAborted}}
}

// failBeforeLaunch ends an admission that launched nothing: its proof is
// complete by construction (docs/rules.md#r1).
func (s *Actor) failBeforeLaunch(reply Reply, e *protocol.Error) {
	s.failBeforeLaunchWhy(reply, e, "")
}

// failBeforeLaunchWhy is failBeforeLaunch with the proof reason given
// ("" = beforeLaunchReason(e)).
func (s *Actor) failBeforeLaunchWhy(reply Reply, e *protocol.Error, reason string) {
	if reason == "" {
		reason = beforeLaunchReason(e)
	}
	proof := cleanup.NothingLaunched(s.target(reason, protocol.OriginAdmission), time.Now())
	s.moveTo(protocol.StateClosed)
	s.end.proof = proof
	if e.Data.Field == "" {
		e.Data.Cleanup = proof
	}
	s.admissionFailed(proof, e, reply)
}

// admissionFailed answers a failed open (and any close that shutdown sent
// meanwhile), forgets the session and stops its actor. A retained cleanup
// keeps the sessionKey held until it is proven.
func (s *Actor) admissionFailed(proof *protocol.Proof, e *protocol.Error, reply Reply) {
	s.m.Router.Forget(s, !proof.Complete)
	s.m.ProvDirs.Release(s.id)
	s.endNetwork()
	if proof.Complete {
		s.releaseSandbox()
	}
	if proof.Complete && s.end.hasTree.Load() {
		if err := s.rec.st.RemoveOwned(s.id); err != nil {
			s.log.Warn("ledger entry not removed", zap.Error(err))
		}
	}
	reply(nil, e)
	s.refillSpares()
	if ca := s.end.closeReq; ca != nil {
		s.end.closeReq = nil
		for _, w := range ca.waiters {
			s.replyProof(w, proof)
		}
	}
	if !proof.Complete {
		s.retain(proof)
	}
	s.end.finished = true
}

// launchEnv is the base environment (Manager.baseEnvFor: the
// --inherit-env policy's part of the sidecar's environment plus the open's
// inheritEnv names) plus the open's env (secret values); the actor
// computes it for the admission worker. The profile's binding
// settings (Binding.Env, and Binding.IsolateEnv when the policy needs the
// agent to ask) win over both (docs/agents.md).
func (s *Actor) launchEnv(base []string) []string {
	bind := map[string]string{}
	for k, v := range s.prof.Binding.Env {
		bind[k] = v
	}
	if controls.NeedsAsking(s.open) {
		for k, v := range s.prof.Binding.IsolateEnv {
			bind[k] = v
		}
	}
	env := make([]string, 0, len(base)+len(s.open.Env)+len(bind)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		_, bound := bind[k]
		if _, over := s.open.Env[k]; !over && !bound && k != SessionMarkerEnv {
			env = append(env, kv)
		}
	}
	for k, v := range s.open.Env {
		if _, bound := bind[k]; !bound && k != SessionMarkerEnv {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range bind {
		env = append(env, k+"="+v)
	}
	return append(env, s.marker())
}

// admit runs off the actor: launch, handshake, identity, record. It reads
// only in and the session's immutable fields; it posts the tree and the
// connection to the actor as soon as they exist (provider events need
// them), and returns its result for the actor to adopt.
func (s *Actor) admit(ctx context.Context, in admissionInput) admissionResult {
	p, timeout := in.open, in.timeout
	// With a state store, an open takes its key over and restores the
	// key's archive first: the record it restores is the one a resume
	// reads (provstate.go; docs/protocol.md §24).
	var state *provstate.State
	var restored *protocol.Restore
	if s.m.stateStore() != nil && in.revive == nil {
		lease, r, e := s.acquireState(ctx, &in)
		if e != nil {
			if in.exe != nil {
				in.exe.Close()
			}
			return admissionResult{err: e}
		}
		state, restored = provstate.New(lease, in.stateSources), r
	}
	if in.revive != nil && in.revive.state != nil {
		// A key another sidecar took over is not run on stale state: the
		// revive ends the session fenced, nothing launched; local provider
		// state a published retire removed comes back from the store
		// (provstate.go).
		e := s.verifyLease(ctx, in.revive.state)
		if e == nil {
			e = s.restoreForRevive(ctx, in.revive.state, in.st)
		}
		if e != nil {
			if in.exe != nil {
				in.exe.Close()
			}
			return admissionResult{err: e}
		}
	}
	prior := s.loadPrior(in) // admitinput.go
	// A live-tree slot before anything is written or launched
	// (--max-live-trees, docs/protocol.md §24); given back at once if
	// nothing is launched, else once the tree is proven gone.
	if ok, e := s.takeTreeSlot(ctx); !ok {
		if in.exe != nil {
			in.exe.Close()
		}
		if e == nil {
			e = abortedError()
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errShutdownAbort):
				e = protocol.Domain(protocol.ErrShuttingDown, "the sidecar shut down during admission", false)
			case errors.Is(cause, errReviveUnneeded):
				e = reviveUnneededError()
			}
		}
		return admissionResult{err: e}
	}
	launched := false
	defer func() {
		if !launched {
			s.releaseTreeSlot()
		}
	}()
	name := "acpx-" + s.id
	// The ledger entry is written before the fork, so a sidecar killed at
	// any moment after it leaves something the next one can find. If it
	// cannot be written, nothing is launched (docs/protocol.md §18.5).
	pre, err := s.writeLedgerBeforeLaunch(in.st)
	if err != nil {
		_ = in.st.RemoveOwned(s.id) // a partial entry, if any
		if in.exe != nil {
			in.exe.Close()
		}
		if e := admission.Exhausted("the ownership ledger entry could not be written, so nothing was launched", err); e != nil {
			return admissionResult{err: e}
		}
		return admissionResult{err: protocol.Domain(protocol.ErrStoreUnavailable,
			"the ownership ledger entry could not be written, so nothing was launched: "+errText(err), true),
			reason: "admission failed before launch: the ownership ledger entry could not be written (STORE_UNAVAILABLE)"}
	}
	if in.revive != nil {
		// From here a tree may change the provider state: a close now
		// publishes it (before, the store still holds it all).
		in.revive.state.TreeLaunched()
	}
	tree, err := s.m.Config.Launcher.Start(reaper.Spec{Path: p.Command.Path, Args: p.Command.Args,
		Env: in.env, Dir: p.Cwd, ExecFile: in.exe, Name: name, Limits: in.limits, Sandbox: in.sandbox.plan})
	if in.exe != nil {
		in.exe.Close()
	}
	if err != nil {
		e := s.launchError(err, p.Command.Args, in.env)
		pre.Release()
		_ = in.st.RemoveOwned(s.id)
		return admissionResult{err: e} // nothing was launched
	}
	s.end.hasTree.Store(true)
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
		err := s.writeLedger(in.st, tree)
		if err == nil {
			pre.Release()
			return
		}
		s.log.Warn("ownership ledger entry not updated with the provider's identity", zap.Error(err))
		if serr := pre.Sync(); serr != nil {
			s.log.Warn("ownership ledger entry written before the launch not synced", zap.Error(serr))
		}
		s.post(func() { s.pub.NoteLedgerFailure(err) }) // told and retried once admitted (internal/outbox)
	}()
	defer func() { <-ledgerDone }()
	tail := acpclient.NewStderrTail()
	go s.drainStderr(tree.Stdio().Stderr, tail)
	conn := acpclient.NewConn(tree.Stdio().Stdin, tree.Stdio().Stdout, s.m.Config.Caps.MaxProviderLineBytes, s.log, s.routeProviderEvent,
		func() { s.m.Stats.updatesDropped.Add(1) })
	conn.OnStdinClosed(func() { go s.post(func() { s.onStdinClosed(tree) }) })
	s.post(func() { s.end.tree, s.conn = tree, conn })
	go func() {
		select {
		case <-tree.Exited():
			s.post(func() { s.onExit(tree) })
		case <-s.act.quit:
		}
	}()

	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	late := &lateHandshake{}
	adm, backendSessionID, herr := s.handshake(hctx, &in, conn, tree, prior, late)
	if late.waiter != nil {
		backendSessionID = "" // the late watcher owns that close (docs/rules.md#r16)
	}
	if herr == nil && ctx.Err() != nil {
		herr = abortedError()
		_ = adm.recordSync.Sync() // the cleanup below updates it
	}
	if herr != nil {
		// Classify: the host's cancel, our timeout, or the agent's refusal.
		switch {
		case errors.Is(context.Cause(ctx), errShutdownAbort):
			herr = protocol.Domain(protocol.ErrShuttingDown, "the sidecar shut down during admission", false)
		case errors.Is(context.Cause(ctx), errReviveUnneeded):
			herr = reviveUnneededError()
		case ctx.Err() != nil:
			herr = abortedError()
		case hctx.Err() != nil:
			herr = protocol.Domain(protocol.ErrHandshakeTimeout, "the session handshake did not finish within "+timeout.String(), true)
		}
		reason := launchedReason(herr)
		// A session the agent creates after we gave up is closed while the
		// tree is terminated; the connection stays open until then.
		lateDone := make(chan *cleanup.CloseResult, 1)
		go func() { lateDone <- late.watch(s, conn, tree) }()
		proof := s.cleanup(cleanupInput{conn: conn, tree: tree, backendSessionID: backendSessionID, reason: reason,
			origin: protocol.OriginAdmission, closeSupported: late.closeSupported, keepConn: late.waiter != nil})
		lateClose := <-lateDone
		herr.Data.Cleanup = proof
		if c := herr.Data.Code; c == protocol.ErrEnsureFailed || c == protocol.ErrHandshakeTimeout || c == protocol.ErrSessionLost {
			// The agent's own words on why (a bad flag, a missing key), as
			// it ended: the tree is gone, so its stderr is ending too.
			herr.Data.Stderr = s.red.Clean(tail.Text(acpclient.StderrSettle))
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
		return admissionResult{err: herr, proof: proof, lateClose: lateClose, closeSupported: late.closeSupported}
	}
	tail.Keep(false) // admitted: nothing more is kept
	adm.state = state
	adm.result.Restore = restored
	return admissionResult{adm: adm, closeSupported: late.closeSupported}
}

// admitted installs a successful admission on the actor and answers the open.
func (s *Actor) admitted(a *admitted, reply Reply) {
	s.adopt(a) // admitinput.go
	// One line per open at info: an unattended operator sees sessions come
	// and go in the log, not only in the hosts' frames (fresh-user trial).
	pid := 0
	if s.end.tree != nil {
		pid = s.end.tree.Info().Pid
	}
	s.log.Info("session opened", zap.String("sessionKey", s.key), zap.String("agent", s.agent),
		zap.Int("pid", pid), zap.Bool("resumed", a.result.Resumed))
	if a.record != nil {
		s.restoreUsage(a.record)
	}
	if s.end.exitSeen {
		// Died between the handshake and now: report as idle death.
		s.moveTo(protocol.StateOpen)
		s.end.exitSeen = false
		reply(a.result, nil)
		s.refillSpares()
		s.flushExtBuffered()
		s.onExit(s.end.tree)
		return
	}
	s.moveTo(protocol.StateOpen)
	reply(a.result, nil)
	s.refillSpares() // tmpspares.go
	for _, u := range s.turns.buffered {
		s.forward(u.Update, s.trackUpdate(u.Kind, u.Update))
	}
	s.turns.buffered = nil
	s.armHeld()          // seedcontrols.go
	s.flushExtBuffered() // ext.go
	if ca := s.end.closeReq; ca != nil {
		// Shutdown asked to close while the handshake was finishing.
		s.startCleanup("sidecar shutdown", protocol.OriginShutdown, ca.discard, nil)
		return
	}
	s.afterOpen() // lifecycle.go
}
