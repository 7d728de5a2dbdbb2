package session

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

func (s *Actor) startAdmission(ctx context.Context, reply Reply) {
	p := s.plan.Params
	st, conflict, err := s.m.openStateDir(p.StateDir, s) // registries.go
	if conflict != nil {
		s.failBeforeLaunch(reply, conflict)
		return
	}
	if err != nil {
		s.failBeforeLaunch(reply, admission.OrExhausted("the state directory could not be opened", err,
			launch.StoreUnavailable("the state directory cannot be used", err)))
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
func (s *Actor) finishAdmission(r launch.Result, reply Reply) {
	s.rec.closeSupported = r.CloseSupported
	switch {
	case r.Adm != nil:
		s.admitted(r.Adm, reply)
	case r.Proof == nil:
		s.failBeforeLaunchWhy(reply, r.Err, r.Reason)
	default:
		s.moveTo(protocol.StateClosed)
		s.end.proof = r.Proof
		s.m.Stats.CountProof(r.Proof)
		s.admissionFailed(r.Proof, r.Err, reply)
		if r.LateClose != nil {
			// The late session's own cleanup, after the open's answer
			// (docs/protocol.md §9 cleanup/proof; docs/rules.md#r6).
			// It shares the record's termination; its own close errors
			// come first, in order.
			s.pub.Notify(protocol.NotifyCleanupProof, protocol.ProofNotice{Proof: cleanup.LateSession(r.Proof, *r.LateClose)})
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
// ("" = launch.BeforeLaunchReason(e)).
func (s *Actor) failBeforeLaunchWhy(reply Reply, e *protocol.Error, reason string) {
	if reason == "" {
		reason = launch.BeforeLaunchReason(e)
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
	// The operator's line of an open that failed: its code only (the
	// message is the host's, in the answer).
	s.log.Info("session open failed", zap.String("sessionKey", s.key), zap.String("agent", s.agent),
		zap.String("code", string(e.Data.Code)), zap.String("cleanupId", proof.CleanupID), zap.Bool("complete", proof.Complete))
	s.m.Router.Forget(s, !proof.Complete)
	s.m.ProvDirs.Release(s.id)
	s.endNetwork()
	if proof.Complete {
		s.releaseSandbox()
		if s.end.homeMade {
			// The key's private HOME this open made, still empty (a
			// refused restore placed nothing): nothing of the failed
			// open is left (a user trial found an empty one after a
			// STATE_CORRUPT open).
			if _, err := s.rec.st.RemoveEmptyHome(s.key); err != nil {
				s.log.Warn("the failed open's empty private HOME not removed", zap.Error(err))
			}
		}
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

// launchEnv is the base environment (the plan's BaseEnv,
// admission.ProviderEnv.For: the
// --inherit-env policy's part of the sidecar's environment plus the open's
// inheritEnv names) plus the open's env (secret values); the actor
// computes it for the admission worker. The profile's binding
// settings (Binding.Env, and Binding.IsolateEnv when the policy needs the
// agent to ask) win over both (docs/agents.md).
func (s *Actor) launchEnv(base []string) []string {
	bind := map[string]string{}
	for k, v := range s.plan.Profile.Binding.Env {
		bind[k] = v
	}
	if controls.NeedsAsking(s.plan.Params) {
		for k, v := range s.plan.Profile.Binding.IsolateEnv {
			bind[k] = v
		}
	}
	env := make([]string, 0, len(base)+len(s.plan.Params.Env)+len(bind)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		_, bound := bind[k]
		if _, over := s.plan.Params.Env[k]; !over && !bound && k != SessionMarkerEnv {
			env = append(env, kv)
		}
	}
	for k, v := range s.plan.Params.Env {
		if _, bound := bind[k]; !bound && k != SessionMarkerEnv {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range bind {
		env = append(env, k+"="+v)
	}
	return append(env, s.marker())
}

// admit runs off the actor: launch, handshake, identity, record
// (launch.Worker.Admit). It reads only in and the session's immutable
// fields; the tree and the connection are posted to the actor as soon as
// they exist (provider events need them), and its result is for the
// actor to adopt.
func (s *Actor) admit(ctx context.Context, in launch.Input) launch.Result {
	w := launch.Worker{ID: s.id, Key: s.key, Log: s.log, Clean: s.red.Clean, Launcher: s.m.Config.Launcher,
		ClientCaps: s.clientCapabilities(), Session: admitSide{s}}
	return w.Admit(ctx, in)
}

// admitted installs a successful admission on the actor and answers the open.
func (s *Actor) admitted(a *launch.Admitted, reply Reply) {
	s.adopt(a) // admitinput.go
	// One line per open at info: an unattended operator sees sessions come
	// and go in the log, not only in the hosts' frames (fresh-user trial).
	pid := 0
	if s.end.tree != nil {
		pid = s.end.tree.Info().Pid
	}
	s.log.Info("session opened", zap.String("sessionKey", s.key), zap.String("agent", s.agent),
		zap.Int("pid", pid), zap.Bool("resumed", a.Result.Resumed))
	if a.Record != nil {
		s.restoreUsage(a.Record)
	}
	if s.end.exitSeen {
		// Died between the handshake and now: report as idle death.
		s.moveTo(protocol.StateOpen)
		s.end.exitSeen = false
		reply(a.Result, nil)
		s.refillSpares()
		s.flushExtBuffered()
		s.onExit(s.end.tree)
		return
	}
	s.moveTo(protocol.StateOpen)
	reply(a.Result, nil)
	s.refillSpares() // tmpspares.go
	for _, u := range s.turns.buffered {
		s.forward(u.Update, s.trackUpdate(u.Kind, u.Update))
	}
	s.turns.buffered = nil
	s.armHeld()          // seedcontrols.go
	s.flushExtBuffered() // ext.go
	if ca := s.end.closeReq; ca != nil {
		// A close (the host's, or shutdown's) arrived while the handshake
		// was finishing: the session closes with that close's reason.
		s.startCleanup(ca.reason, ca.origin, ca.discard, nil)
		return
	}
	s.afterOpen() // lifecycle.go
}
