package session

import (
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// prepareLaunch makes the admission worker's input on the actor: the
// checks of cwd, additionalDirectories and the command (its digest when
// the open gave one), the launch environment and the kernel sandbox (a
// fresh private TMPDIR). An open and a revive both take this one path, so
// a revive launches exactly what the open did, checked again. rv is nil
// for an open.
func (s *Actor) prepareLaunch(rv *launch.Revive) (launch.Input, *protocol.Error) {
	p := s.plan.Params
	exe, perr := admission.CheckLaunch(p)
	if perr != nil {
		return launch.Input{}, perr
	}
	base := s.plan.BaseEnv
	sb, env, perr := s.setupSandbox(p, s.launchEnv(base))
	if perr != nil {
		if exe != nil {
			exe.Close()
		}
		return launch.Input{}, perr
	}
	s.end.tmpDir, s.end.home = sb.TmpDir, sb.Home
	if rv == nil {
		s.end.homeMade = sb.HomeMade
	}
	in := launch.Input{Open: p, Prof: s.plan.Profile, Store: s.rec.st, Exe: exe, Env: env, BaseEnv: base,
		Timeout: s.m.Config.Bounds.HandshakeTimeout, Limits: s.plan.Limits, Plan: sb.Plan, Sandbox: sb.Result, Revive: rv}
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
			return launch.Input{}, e
		}
		in.StateSources = srcs
	}
	if p.HandshakeTimeoutMs != nil {
		in.Timeout = time.Duration(*p.HandshakeTimeoutMs) * time.Millisecond
	}
	return in, nil
}

// adopt installs a successful admission's agent side on the actor (an
// open's and a revive's): identity, what the agent said of itself, its
// controls and binding; the record's fsync runs beside what follows.
func (s *Actor) adopt(a *launch.Admitted) {
	s.rec.identity = a.Result.Identity
	s.rec.agentInfo = a.Result.Agent
	s.rec.agentCaps = a.Caps
	s.ctl.models, s.ctl.modes, s.ctl.configOpts = a.Result.Models, a.Result.Modes, a.Result.ConfigOptions
	s.ctl.modelCtl = a.ModelCtl
	s.ctl.pins = a.Pins
	s.ctl.binding = a.Result.PermissionBinding
	s.ctl.held = controls.Held{Values: a.Held, Settling: map[string]int{}}
	s.ctl.final = controls.Admitted{ConfigOpts: a.Result.ConfigOptions, Modes: controls.CloneModes(a.Result.Modes)}
	if !s.state.Is(protocol.StateReviving) {
		s.rec.resumed = a.Result.Resumed
		s.rec.ps = a.State
	}
	s.turns.replaying, s.turns.replayDrop = false, false
	// The record is in place; it becomes durable beside the answer, and a
	// failed fsync is told like any failed record write (internal/outbox).
	go func(p *store.Pending) {
		if err := p.Sync(); err != nil {
			s.post(func() { s.pub.NoteRecordWrite(err) })
		}
	}(a.RecordSync)
	s.pub.FlushHistory() // internal/outbox
	s.pub.ReportLedger()
}
