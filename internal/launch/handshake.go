package launch

import (
	"context"
	"encoding/json"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// modelsOf reports the agent's model state: the unstable ACP `models`
// field, or else the config option of category "model" (codex-acp 0.16.0
// sends only the latter; internal/modelstub/testdata/codex-transcript.md).
func modelsOf(st *acpclient.SessionState) *protocol.Models {
	if st.Models == nil {
		return controls.ModelsFromConfig(st.ConfigOptions)
	}
	return &protocol.Models{CurrentModelID: st.Models.CurrentModelID,
		AvailableModelIDs: ids(st.Models.AvailableModels, func(m acpclient.ModelEntry) string { return m.ModelID })}
}

// modesOf reports the agent's mode state: ACP `modes`, or else the config
// option of category "mode" (OpenCode sends only the latter).
func modesOf(st *acpclient.SessionState) *protocol.Modes {
	if st.Modes == nil {
		return controls.ModesFromConfig(st.ConfigOptions)
	}
	return &protocol.Modes{CurrentModeID: st.Modes.CurrentModeID,
		AvailableModeIDs: ids(st.Modes.AvailableModes, func(m acpclient.ModeEntry) string { return m.ID })}
}

// ids is id of each entry of list, in order, never nil (the wire's []
// when the agent lists none): models and modes share it.
func ids[E any](list []E, id func(E) string) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, id(e))
	}
	return out
}

// handshake runs ACP initialize → authenticate (profile rule) → session/new
// or session/load|resume → identity check → model/mode → record save. It
// returns the backend session id as soon as one is known, so a failed
// admission can close that session (docs/rules.md#r5, #r8, #r9, #r10).
// It runs in the admission worker and reads only in and w; what the
// agent advertises about close is kept in late.
func (w *Worker) handshake(ctx context.Context, in *Input, conn *acpclient.Conn, tree Tree, prior *store.Record, late *lateHandshake) (*Admitted, string, *protocol.Error) {
	p := in.Open
	var init acpclient.InitializeResult
	// No fs/terminal capabilities: the agent uses its own (docs/protocol.md
	// §14); boolean config options are answered, and elicitation is
	// offered as the host declared it (Worker.ClientCaps, made by the
	// session: internal/session's elicitation.go).
	initParams, err := acpclient.InitializeParams(w.ClientCaps, buildinfo.Version())
	if err == nil {
		err = conn.Call(ctx, acp.AgentMethodInitialize, initParams, &init)
	}
	if err != nil {
		return nil, "", ACPError(w.Clean, "initialize", err)
	}
	caps := init.Caps()
	if len(init.AgentCapabilities) == 0 {
		init.AgentCapabilities = json.RawMessage("{}")
	}
	late.closeSupported = caps.SessionCapabilities.Close != nil
	init.AgentCapabilities = jsonl.CleanRaw(init.AgentCapabilities) // reported to the host verbatim
	info := protocol.AgentInfo{ProtocolVersion: init.ProtocolVersion, Capabilities: init.AgentCapabilities}
	if init.AgentInfo != nil {
		info.Name, info.Title, info.Version = init.AgentInfo.Name, init.AgentInfo.Title, init.AgentInfo.Version
	}
	authMethods := jsonl.CleanRaws(init.AuthMethods)
	if authMethods == nil {
		authMethods = []json.RawMessage{}
	}
	if p.AuthMethod != nil {
		// The host's choice (docs/protocol.md §23) replaces the profile's rule.
		if e := w.hostAuthenticate(ctx, conn, *p.AuthMethod, acpclient.AuthMethodsOf(authMethods)); e != nil {
			return nil, "", e
		}
	} else if m := authMethod(in, acpclient.AuthMethodsOf(authMethods)); m != "" {
		if err := conn.Call(ctx, acp.AgentMethodAuthenticate, acp.AuthenticateRequest{MethodId: m}, nil); err != nil {
			return nil, "", ACPError(w.Clean, "authenticate", err)
		}
	}
	// Nothing the agent cannot take is sent (docs/protocol.md §23).
	if e := acpclient.CheckSessionCaps(p, caps); e != nil {
		return nil, "", e
	}
	// A per-turn session lives on only through resume or load
	// (docs/protocol.md §24).
	canResume := caps.LoadSession || caps.SessionCapabilities.Resume != nil
	switch {
	case in.Revive != nil && !canResume:
		return nil, "", protocol.Domain(protocol.ErrSessionLost, "the agent offers neither session/resume nor session/load, so its session cannot be revived", false)
	case in.Revive == nil && p.Lifecycle.PerTurn() && !canResume:
		return nil, "", acpclient.CapabilityError("loadSession", "lifecycle per-turn")
	}
	var st acpclient.SessionState
	resumed := false
	resumeID := ""
	switch {
	case in.Revive != nil:
		resumeID = in.Revive.BackendSessionID // never a new session
	case p.AgentSessionID != nil:
		// The host names one of the agent's own sessions (session/agentSessions).
		if !caps.LoadSession && caps.SessionCapabilities.Resume == nil {
			return nil, "", acpclient.CapabilityError("loadSession", "agentSessionId")
		}
		resumeID = *p.AgentSessionID
	case prior != nil && ranATurn(prior) && (caps.LoadSession || caps.SessionCapabilities.Resume != nil):
		// A record whose session never ran a turn is not resumed: there is
		// no history, and some agents cannot resume such a session
		// (codex-acp 2.x).
		resumeID = prior.BackendSessionID
	}
	if resumeID != "" {
		// ACP session/resume where the agent offers it (it restores the
		// session without replaying history), else session/load (acpx#332).
		method := acp.AgentMethodSessionResume
		params := acpclient.NewSessionParams(p, resumeID)
		params.Meta = controls.IsolateMeta(in.Prof, p, acpclient.HostMeta(p.Meta))
		if caps.SessionCapabilities.Resume == nil {
			method = acp.AgentMethodSessionLoad
			// Replayed history is not live output (docs/protocol.md,
			// resume): the flag is posted before the request, so it
			// precedes every replayed update. A revive's replay is what
			// was journaled live already: dropped.
			drop := in.Revive != nil
			w.Session.Replaying(drop)
		}
		err = late.call(ctx, conn, method, params, &st)
		if err != nil && in.Revive != nil && ctx.Err() == nil {
			return nil, resumeID, protocol.Domain(protocol.ErrSessionLost, "the agent could not resume its session: "+
				w.sessionError(method, err, p, authMethods).Message, false)
		}
		if err != nil {
			// docs/rules.md#r10: close the recovered session, save nothing.
			e := w.sessionError(method, err, p, authMethods)
			if e.Data.Code == protocol.ErrEnsureFailed && p.AgentSessionID == nil {
				e.Message += " (the record's session could not be resumed; open with resume:false for a new session)"
			}
			return nil, resumeID, e
		}
		st.SessionID = resumeID
		resumed = true
	} else {
		params := acpclient.NewSessionParams(p, "")
		var own map[string]any
		if p.SystemPrompt != "" {
			own = map[string]any{"systemPrompt": map[string]string{"append": p.SystemPrompt}}
		}
		// Settings that keep the workspace from granting permissions
		// (docs/agents.md), when the policy needs the agent to ask.
		params.Meta = controls.IsolateMeta(in.Prof, p, acpclient.WithMeta(acpclient.HostMeta(p.Meta), own))
		if err := late.call(ctx, conn, acp.AgentMethodSessionNew, params, &st); err != nil {
			return nil, "", w.sessionError("session/new", err, p, authMethods)
		}
	}
	// docs/rules.md#r8: identity before admission.
	if st.SessionID == "" {
		return nil, "", protocol.Domain(protocol.ErrIdentityInvalid, "the agent returned no session id", false)
	}
	ident := protocol.Identity{SessionKey: p.SessionKey, BackendSessionID: st.SessionID, AgentSessionID: st.SessionID}
	if v, ok := st.Meta["agentSessionId"].(string); ok && v != "" {
		ident.AgentSessionID = v
	} else if prior != nil && prior.AgentSessionID != "" && prior.BackendSessionID == st.SessionID {
		ident.AgentSessionID = prior.AgentSessionID
	}
	ti := tree.Info()
	res := protocol.OpenResult{Session: w.ID, SessionKey: w.Key, Identity: ident, Resumed: resumed, Agent: info,
		Models: modelsOf(&st), Modes: modesOf(&st), ConfigOptions: jsonl.CleanRaws(st.ConfigOptions),
		Process: protocol.ProcessInfo{Pid: ti.Pid, Pgid: ti.Pgid, StartedAt: protocol.At(ti.StartedAt), Containment: string(ti.Containment)},
		Sandbox: in.Sandbox, AuthMethods: authMethods, Lifecycle: protocol.LifecycleWarm}
	if p.Lifecycle != nil {
		res.Lifecycle = p.Lifecycle.Mode
	}
	if res.ConfigOptions == nil {
		res.ConfigOptions = []json.RawMessage{}
	}
	ctl := &controls.Setter{Conn: conn, BackendSessionID: st.SessionID, Models: res.Models, Modes: res.Modes,
		ConfigOpts: res.ConfigOptions, Clean: w.Clean}
	// The model and mode to run with: the open's, else, on resume, the ones
	// the host pinned earlier (an agent that forgot them must not silently
	// run another model: docs/rules.md#p3). What the record merely remembers
	// of the agent's last report is never re-applied (a load answer
	// without modes must not fail a resume the host asked no mode of).
	wantModel, wantMode := p.Model, p.Mode
	pinnedMode := false
	if in.Revive != nil {
		// What the host chose since the open, not the open's own.
		wantModel, wantMode = in.Revive.Pins.Model, in.Revive.Pins.Mode
		pinnedMode = wantMode != ""
	} else if resumed && prior != nil {
		if wantModel == "" {
			wantModel = prior.Acpx.PinnedModelID
		}
		if wantMode == "" {
			wantMode, pinnedMode = prior.Acpx.PinnedModeID, prior.Acpx.PinnedModeID != ""
		}
	}
	if e := controls.CheckHostMode(in.Prof, p, wantMode); e != nil {
		return nil, st.SessionID, e
	}
	if wantModel != "" && (ctl.Models == nil || ctl.Models.CurrentModelID != wantModel) {
		if e := ctl.Set(ctx, controls.KindModel, wantModel, nil); e != nil {
			return nil, st.SessionID, e
		}
	}
	if wantMode != "" && (ctl.Modes == nil || ctl.Modes.CurrentModeID != wantMode) {
		if e := ctl.Set(ctx, controls.KindMode, wantMode, nil); e != nil {
			return nil, st.SessionID, e
		}
	}
	binding, e := ctl.Bind(ctx, in.Prof, p, wantMode, pinnedMode)
	if e != nil {
		return nil, st.SessionID, e
	}
	res.PermissionBinding = binding
	pins := controls.Pins{Model: wantModel, Mode: wantMode}
	skip := map[string]bool{}
	if in.Revive != nil {
		for _, o := range in.Revive.Pins.Options {
			skip[o.ID] = true // the host's later choice is re-applied below
		}
	}
	// The open's effort and thinking, the binding's asking options: set,
	// verified and held (controls.Setter.ApplySeedControls; docs/protocol.md §24).
	held, e := ctl.ApplySeedControls(ctx, in.Prof, p, binding, skip)
	if e != nil {
		return nil, st.SessionID, e
	}
	if in.Revive != nil {
		// The host's config choices, re-applied and verified
		// (docs/protocol.md §24).
		for _, o := range in.Revive.Pins.Options {
			if e := ctl.Set(ctx, controls.KindOption, o.ID, o.Value); e != nil {
				return nil, st.SessionID, e
			}
			var v string
			if _, isHeld := held[o.ID]; isHeld && json.Unmarshal(o.Value, &v) == nil {
				held[o.ID] = v
			}
		}
		pins.Options = in.Revive.Pins.Options
	}
	res.Models, res.Modes, res.ConfigOptions = ctl.Models, ctl.Modes, ctl.ConfigOpts
	rec, recSync, err := saveAdmitted(in, prior, &res, init, tree, ctl.UsedStyle, pins)
	if err != nil {
		// docs/rules.md#r9: close the created session, fail with the store error.
		return nil, st.SessionID, admission.OrExhausted("the session record could not be saved", err,
			protocol.Domain(protocol.ErrStoreUnavailable, "the session record could not be saved: "+ErrText(err), true))
	}
	return &Admitted{Result: res, Caps: caps, ModelCtl: ctl.UsedStyle, Record: rec, RecordSync: recSync, Pins: pins, Held: held}, st.SessionID, nil
}

// authMethod picks the profile's authenticate method: the first rule whose
// env var the launch env holds and whose method the agent advertises.
func authMethod(in *Input, methods []acpclient.AuthInfo) string {
	offered := map[string]bool{}
	for _, m := range methods {
		offered[m.ID] = m.Type != "terminal"
	}
	for _, r := range in.Prof.Auth {
		if offered[r.MethodID] && in.envHas(r.EnvVar) {
			return r.MethodID
		}
	}
	return ""
}
