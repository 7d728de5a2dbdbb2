package session

import (
	"context"
	"encoding/json"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo"
	"github.com/acpx-sidecar/acpx-sidecar/internal/cleanup"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// initializeResult is ACP initialize's result, kept raw where it is
// reported verbatim.
type initializeResult struct {
	ProtocolVersion   int             `json:"protocolVersion"`
	AgentCapabilities json.RawMessage `json:"agentCapabilities"`
	AgentInfo         *struct {
		Name    string `json:"name"`
		Title   string `json:"title"`
		Version string `json:"version"`
	} `json:"agentInfo"`
	// AuthMethods are ACP AuthMethod[] verbatim (docs/protocol.md §23).
	AuthMethods []json.RawMessage `json:"authMethods"`
}

// sessionState is the common part of ACP session/new, load and resume
// results.
type sessionState struct {
	SessionID string `json:"sessionId"`
	Models    *struct {
		CurrentModelID  string `json:"currentModelId"`
		AvailableModels []struct {
			ModelID string `json:"modelId"`
			Name    string `json:"name"`
		} `json:"availableModels"`
	} `json:"models"`
	Modes *struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	} `json:"modes"`
	ConfigOptions []json.RawMessage `json:"configOptions"`
	Meta          map[string]any    `json:"_meta"`
}

// models reports the agent's model state: the unstable ACP `models`
// field, or else the config option of category "model" (codex-acp 0.16.0
// sends only the latter; internal/modelstub/testdata/codex-transcript.md).
func (st *sessionState) models() *protocol.Models {
	if st.Models == nil {
		return controls.ModelsFromConfig(st.ConfigOptions)
	}
	m := &protocol.Models{CurrentModelID: st.Models.CurrentModelID, AvailableModelIDs: []string{}}
	for _, am := range st.Models.AvailableModels {
		m.AvailableModelIDs = append(m.AvailableModelIDs, am.ModelID)
	}
	return m
}

// modes reports the agent's mode state: ACP `modes`, or else the config
// option of category "mode" (OpenCode sends only the latter).
func (st *sessionState) modes() *protocol.Modes {
	if st.Modes == nil {
		return controls.ModesFromConfig(st.ConfigOptions)
	}
	m := &protocol.Modes{CurrentModeID: st.Modes.CurrentModeID, AvailableModeIDs: []string{}}
	for _, am := range st.Modes.AvailableModes {
		m.AvailableModeIDs = append(m.AvailableModeIDs, am.ID)
	}
	return m
}

// handshake runs ACP initialize → authenticate (profile rule) → session/new
// or session/load|resume → identity check → model/mode → record save. It
// returns the backend session id as soon as one is known, so a failed
// admission can close that session (docs/rules.md#r5, #r8, #r9, #r10).
// It runs in the admission worker and reads only in and the session's
// immutable fields; what the agent advertises about close is kept in late.
func (s *Actor) handshake(ctx context.Context, in *admissionInput, conn *acpclient.Conn, tree Tree, prior *store.Record, late *lateHandshake) (*admitted, string, *protocol.Error) {
	p := in.open
	var init initializeResult
	// No fs/terminal capabilities: the agent uses its own (docs/protocol.md
	// §14); boolean config options are answered (handshake_ext.go), and
	// elicitation is offered as the host declared it (elicitation.go).
	initParams, err := acpclient.InitializeParams(s.clientCapabilities(), buildinfo.Version())
	if err == nil {
		err = conn.Call(ctx, acp.AgentMethodInitialize, initParams, &init)
	}
	if err != nil {
		return nil, "", s.acpError("initialize", err)
	}
	var caps acpclient.AgentCaps
	if len(init.AgentCapabilities) > 0 {
		_ = json.Unmarshal(init.AgentCapabilities, &caps)
	} else {
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
		if e := s.hostAuthenticate(ctx, conn, *p.AuthMethod, acpclient.AuthMethodsOf(authMethods)); e != nil {
			return nil, "", e
		}
	} else if m := authMethod(in, acpclient.AuthMethodsOf(authMethods)); m != "" {
		if err := conn.Call(ctx, acp.AgentMethodAuthenticate, acp.AuthenticateRequest{MethodId: m}, nil); err != nil {
			return nil, "", s.acpError("authenticate", err)
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
	case in.revive != nil && !canResume:
		return nil, "", protocol.Domain(protocol.ErrSessionLost, "the agent offers neither session/resume nor session/load, so its session cannot be revived", false)
	case in.revive == nil && p.Lifecycle.PerTurn() && !canResume:
		return nil, "", acpclient.CapabilityError("loadSession", "lifecycle per-turn")
	}
	var st sessionState
	resumed := false
	resumeID := ""
	switch {
	case in.revive != nil:
		resumeID = in.revive.backendSessionID // never a new session
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
		params.Meta = controls.IsolateMeta(in.prof, p, acpclient.HostMeta(p.Meta))
		if caps.SessionCapabilities.Resume == nil {
			method = acp.AgentMethodSessionLoad
			// Replayed history is not live output (docs/protocol.md,
			// resume): the flag is posted before the request, so it
			// precedes every replayed update. A revive's replay is what
			// was journaled live already: dropped.
			drop := in.revive != nil
			s.post(func() { s.turns.replaying, s.turns.replayDrop = true, drop })
		}
		err = late.call(ctx, conn, method, params, &st)
		if err != nil && in.revive != nil && ctx.Err() == nil {
			return nil, resumeID, protocol.Domain(protocol.ErrSessionLost, "the agent could not resume its session: "+
				s.sessionError(method, err, p, authMethods).Message, false)
		}
		if err != nil {
			// docs/rules.md#r10: close the recovered session, save nothing.
			e := s.sessionError(method, err, p, authMethods)
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
		params.Meta = controls.IsolateMeta(in.prof, p, acpclient.WithMeta(acpclient.HostMeta(p.Meta), own))
		if err := late.call(ctx, conn, acp.AgentMethodSessionNew, params, &st); err != nil {
			return nil, "", s.sessionError("session/new", err, p, authMethods)
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
	res := protocol.OpenResult{Session: s.id, SessionKey: s.key, Identity: ident, Resumed: resumed, Agent: info,
		Models: st.models(), Modes: st.modes(), ConfigOptions: jsonl.CleanRaws(st.ConfigOptions),
		Process: protocol.ProcessInfo{Pid: ti.Pid, Pgid: ti.Pgid, StartedAt: protocol.At(ti.StartedAt), Containment: string(ti.Containment)},
		Sandbox: in.sandbox.result, AuthMethods: authMethods, Lifecycle: protocol.LifecycleWarm}
	if p.Lifecycle != nil {
		res.Lifecycle = p.Lifecycle.Mode
	}
	if res.ConfigOptions == nil {
		res.ConfigOptions = []json.RawMessage{}
	}
	ctl := &controls.Setter{Conn: conn, BackendSessionID: st.SessionID, Models: res.Models, Modes: res.Modes,
		ConfigOpts: res.ConfigOptions, Clean: s.red.Clean}
	// The model and mode to run with: the open's, else, on resume, the ones
	// the host pinned earlier (an agent that forgot them must not silently
	// run another model: docs/rules.md#p3). What the record merely remembers
	// of the agent's last report is never re-applied (a load answer
	// without modes must not fail a resume the host asked no mode of).
	wantModel, wantMode := p.Model, p.Mode
	pinnedMode := false
	if in.revive != nil {
		// What the host chose since the open, not the open's own.
		wantModel, wantMode = in.revive.pins.Model, in.revive.pins.Mode
		pinnedMode = wantMode != ""
	} else if resumed && prior != nil {
		if wantModel == "" {
			wantModel = prior.Acpx.PinnedModelID
		}
		if wantMode == "" {
			wantMode, pinnedMode = prior.Acpx.PinnedModeID, prior.Acpx.PinnedModeID != ""
		}
	}
	if e := controls.CheckHostMode(in.prof, p, wantMode); e != nil {
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
	binding, e := ctl.Bind(ctx, in.prof, p, wantMode, pinnedMode)
	if e != nil {
		return nil, st.SessionID, e
	}
	res.PermissionBinding = binding
	pins := controls.Pins{Model: wantModel, Mode: wantMode}
	skip := map[string]bool{}
	if in.revive != nil {
		for _, o := range in.revive.pins.Options {
			skip[o.ID] = true // the host's later choice is re-applied below
		}
	}
	// The open's effort and thinking, the binding's asking options: set,
	// verified and held (controls.Setter.ApplySeedControls; docs/protocol.md §24).
	held, e := ctl.ApplySeedControls(ctx, in.prof, p, binding, skip)
	if e != nil {
		return nil, st.SessionID, e
	}
	if in.revive != nil {
		// The host's config choices, re-applied and verified
		// (docs/protocol.md §24).
		for _, o := range in.revive.pins.Options {
			if e := ctl.Set(ctx, controls.KindOption, o.ID, o.Value); e != nil {
				return nil, st.SessionID, e
			}
			var v string
			if _, isHeld := held[o.ID]; isHeld && json.Unmarshal(o.Value, &v) == nil {
				held[o.ID] = v
			}
		}
		pins.Options = in.revive.pins.Options
	}
	res.Models, res.Modes, res.ConfigOptions = ctl.Models, ctl.Modes, ctl.ConfigOpts
	rec, recSync, err := saveAdmitted(in, prior, &res, init, tree, ctl.UsedStyle, pins)
	if err != nil {
		// docs/rules.md#r9: close the created session, fail with the store error.
		return nil, st.SessionID, admission.OrExhausted("the session record could not be saved", err,
			protocol.Domain(protocol.ErrStoreUnavailable, "the session record could not be saved: "+errText(err), true))
	}
	return &admitted{result: res, caps: caps, modelCtl: ctl.UsedStyle, record: rec, recordSync: recSync, pins: pins, held: held}, st.SessionID, nil
}

// authMethod picks the profile's authenticate method: the first rule whose
// env var the launch env holds and whose method the agent advertises.
func authMethod(in *admissionInput, methods []acpclient.AuthInfo) string {
	offered := map[string]bool{}
	for _, m := range methods {
		offered[m.ID] = m.Type != "terminal"
	}
	for _, r := range in.prof.Auth {
		if offered[r.MethodID] && in.envHas(r.EnvVar) {
			return r.MethodID
		}
	}
	return ""
}

func nowStamp() string { return store.FormatTime(time.Now()) }

// saveAdmitted writes the record of an admitted session (no env, ever:
// docs/rules.md#r3), in place but not yet fsynced: the returned Pending is
// synced while the open's answer goes out (session.admitted). Its errors
// fail the open (docs/rules.md#r9).
func saveAdmitted(in *admissionInput, prior *store.Record, res *protocol.OpenResult, init initializeResult, tree Tree, style string, pin controls.Pins) (*store.Record, *store.Pending, error) {
	p := in.open
	rec := prior
	now := nowStamp()
	if rec == nil {
		rec = &store.Record{Schema: store.Schema, SessionKey: p.SessionKey, Name: p.SessionKey, CreatedAt: now,
			Messages: json.RawMessage("[]"), RequestTokenUsage: map[string]store.TokenUsage{}}
	}
	rec.BackendSessionID = res.Identity.BackendSessionID
	rec.AgentCommand = joinCommand(p.Command)
	rec.AgentArgv = append([]string{p.Command.Path}, p.Command.Args...)
	rec.Cwd = p.Cwd
	rec.LastUsedAt = now
	rec.Closed = false
	rec.ClosedAt = nil
	pid := tree.Info().Pid
	rec.Pid = &pid
	started := store.FormatTime(tree.Info().StartedAt)
	rec.AgentStartedAt = &started
	rec.ProtocolVersion = init.ProtocolVersion
	rec.AgentCapabilities = init.AgentCapabilities
	rec.Acpx.AgentProfile = p.Agent
	rec.AgentSessionID = res.Identity.AgentSessionID
	rec.Acpx.ModelControl = style
	rec.Acpx.PinnedModelID, rec.Acpx.PinnedModeID = pin.Model, pin.Mode
	applyControlsToRecord(rec, res.Models, res.Modes)
	sync, err := in.st.SaveDeferred(rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, sync, nil
}

func joinCommand(c *protocol.Command) string {
	out := c.Path
	for _, a := range c.Args {
		out += " " + a
	}
	return out
}

// applyControlsToRecord writes the model and mode state into the record's
// acpx object (persisted so a resumed session reports and re-applies them).
func applyControlsToRecord(rec *store.Record, models *protocol.Models, modes *protocol.Modes) {
	if models != nil {
		rec.Acpx.CurrentModelID = models.CurrentModelID
		rec.Acpx.AvailableModels = models.AvailableModelIDs
	}
	if modes != nil {
		rec.Acpx.CurrentModeID = modes.CurrentModeID
		rec.Acpx.AvailableModes = modes.AvailableModeIDs
	}
}

// lateHandshake remembers the session-creating request (session/new, load
// or resume) that admission gave up on, so that a session the agent
// creates after a cancel or timeout is still closed (docs/rules.md#r6, #r7).
// It is local to the admission worker (watch runs in a goroutine the
// worker starts and waits for).
type lateHandshake struct {
	waiter  *jsonrpc2.Waiter
	resumed string // the session id a load/resume names
	// closeSupported: initialize advertised sessionCapabilities.close
	// (set by handshake; the late close and the admission's cleanup need it).
	closeSupported bool
}

// call sends method and waits for its answer or ctx; when ctx ends first,
// the request is kept as the pending late handshake.
func (l *lateHandshake) call(ctx context.Context, conn *acpclient.Conn, method string, params, out any) error {
	w, id, err := conn.Dispatch(method, params)
	if err != nil {
		return err
	}
	if err = w.Wait(ctx, out); err != nil && ctx.Err() != nil {
		conn.CancelRequest(id) // still watched: a session it creates anyway is closed
		l.waiter = &w
		if p, ok := params.(acpclient.SessionParams); ok {
			l.resumed = p.SessionID
		}
	}
	return err
}

// watch waits for the late answer (until the connection closes) and, if
// it created a session, closes it under the retained close policy
// (Manager.retainedClose: failures retried with backoff for no count,
// bounded by RetainedCloseWindow and by tree's exit; docs/rules.md#r16,
// #r20). It returns nil when no late session appeared.
func (l *lateHandshake) watch(s *Actor, conn *acpclient.Conn, tree Tree) *cleanup.CloseResult {
	if l.waiter == nil {
		return nil
	}
	var st sessionState
	if err := l.waiter.Wait(context.Background(), &st); err != nil {
		return nil
	}
	id := st.SessionID
	if id == "" {
		id = l.resumed
	}
	if id == "" {
		return nil
	}
	if !l.closeSupported {
		return &cleanup.CloseResult{Close: protocol.ProtocolClose{Outcome: protocol.CloseUnsupported}}
	}
	r := cleanup.CloseACP(s.closePolicy(s.m.retainedClose(), tree), closeSender(conn, id))
	return &r
}
