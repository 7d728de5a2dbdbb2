package session

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/provstate"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// reviveInput is what a revive adds to an admission (docs/protocol.md
// §24): the ACP session to resume — never a new one — and the host's
// pins (model, mode, config options) to re-apply and verify.
type reviveInput struct {
	backendSessionID string
	pins             controls.Pins
	// state is the session's provider state (nil without a store): its
	// lease is checked before the launch (provstate.go verifyLease).
	state *provstate.State
}

// prepareLaunch makes the admission worker's input on the actor: the
// checks of cwd, additionalDirectories and the command (its digest when
// the open gave one), the launch environment and the kernel sandbox (a
// fresh private TMPDIR). An open and a revive both take this one path, so
// a revive launches exactly what the open did, checked again. rv is nil
// for an open.
func (s *Actor) prepareLaunch(rv *reviveInput) (admissionInput, *protocol.Error) {
	p := s.open
	exe, perr := admission.CheckLaunch(p)
	if perr != nil {
		return admissionInput{}, perr
	}
	base := s.plan.BaseEnv
	sb, env, perr := s.setupSandbox(p, s.launchEnv(base))
	if perr != nil {
		if exe != nil {
			exe.Close()
		}
		return admissionInput{}, perr
	}
	s.end.tmpDir, s.end.home = sb.tmpDir, sb.home
	in := admissionInput{open: p, prof: s.prof, st: s.rec.st, exe: exe, env: env, baseEnv: base,
		timeout: s.m.Config.Bounds.HandshakeTimeout, limits: s.plan.Limits, sandbox: sb, revive: rv}
	if s.m.stateStore() != nil && rv == nil {
		// The provider-state dirs are this key's alone (provstate.go).
		srcs, e := s.stateSources(env)
		if e == nil {
			e = s.m.ProvDirs.Claim(s.id, srcs)
		}
		if e != nil {
			if exe != nil {
				exe.Close()
			}
			s.releaseSandbox()
			s.end.tmpDir = ""
			return admissionInput{}, e
		}
		in.stateSources = srcs
	}
	if p.HandshakeTimeoutMs != nil {
		in.timeout = time.Duration(*p.HandshakeTimeoutMs) * time.Millisecond
	}
	return in, nil
}

// loadPrior loads the key's record before the launch, so a resume knows
// what to load: for an open that may resume (resume not false), the
// record of the same agent and cwd; for a revive, the session's own
// record (or, if it cannot be read, one made from what the actor knows,
// so the resume still names the session).
func (s *Actor) loadPrior(in admissionInput) *store.Record {
	p := in.open
	if in.revive == nil && p.Resume != nil && !*p.Resume {
		return nil
	}
	rec, err := in.st.Load(p.SessionKey)
	switch {
	case err == nil && in.revive != nil && rec.BackendSessionID == in.revive.backendSessionID:
		return rec
	case err == nil && in.revive == nil && rec.Acpx.AgentProfile == p.Agent && rec.Cwd == p.Cwd && rec.BackendSessionID != "":
		return rec
	case err != nil && !errors.Is(err, store.ErrNotFound):
		s.log.Warn("session record unreadable", zap.Error(err))
	}
	if in.revive == nil {
		return nil
	}
	s.log.Warn("the revived session's record is missing or names another session; resuming from memory")
	now := nowStamp()
	r := &store.Record{Schema: store.Schema, SessionKey: p.SessionKey, Name: p.SessionKey, CreatedAt: now,
		BackendSessionID: in.revive.backendSessionID, Messages: []byte("[]"), RequestTokenUsage: map[string]store.TokenUsage{}}
	r.Acpx.AgentProfile = p.Agent
	r.Cwd = p.Cwd
	return r
}

// adopt installs a successful admission's agent side on the actor (an
// open's and a revive's): identity, what the agent said of itself, its
// controls and binding; the record's fsync runs beside what follows.
func (s *Actor) adopt(a *admitted) {
	s.rec.identity = a.result.Identity
	s.rec.agentInfo = a.result.Agent
	s.rec.agentCaps = a.caps
	s.ctl.models, s.ctl.modes, s.ctl.configOpts = a.result.Models, a.result.Modes, a.result.ConfigOptions
	s.ctl.modelCtl = a.modelCtl
	s.ctl.pins = a.pins
	s.ctl.binding = a.result.PermissionBinding
	s.ctl.held = controls.Held{Values: a.held, Settling: map[string]int{}}
	s.ctl.final = controls.Admitted{ConfigOpts: a.result.ConfigOptions, Modes: controls.CloneModes(a.result.Modes)}
	if !s.state.is(protocol.StateReviving) {
		s.rec.resumed = a.result.Resumed
		s.rec.ps = a.state
	}
	s.turns.replaying, s.turns.replayDrop = false, false
	// The record is in place; it becomes durable beside the answer, and a
	// failed fsync is told like any failed record write (internal/outbox).
	go func(p *store.Pending) {
		if err := p.Sync(); err != nil {
			s.post(func() { s.pub.NoteRecordWrite(err) })
		}
	}(a.recordSync)
	s.pub.FlushHistory() // internal/outbox
	s.pub.ReportLedger()
}
