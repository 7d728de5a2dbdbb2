package launch

import (
	"encoding/json"

	"github.com/acpx-sidecar/acpx-sidecar/internal/acpclient"
	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// saveAdmitted writes the record of an admitted session (no env, ever:
// docs/rules.md#r3), in place but not yet fsynced: the returned Pending is
// synced while the open's answer goes out (the actor's adopt). Its errors
// fail the open (docs/rules.md#r9).
func saveAdmitted(in *Input, prior *store.Record, res *protocol.OpenResult, init acpclient.InitializeResult, tree Tree, style string, pin controls.Pins) (*store.Record, *store.Pending, error) {
	p := in.Open
	rec := prior
	now := store.NowStamp()
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
	RecordControls(rec, res.Models, res.Modes)
	sync, err := in.Store.SaveDeferred(rec)
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

// RecordControls writes the model and mode state into the record's acpx
// object (persisted so a resumed session reports and re-applies them);
// nil models or modes leave theirs as they are.
func RecordControls(rec *store.Record, models *protocol.Models, modes *protocol.Modes) {
	if models != nil {
		rec.Acpx.CurrentModelID = models.CurrentModelID
		rec.Acpx.AvailableModels = models.AvailableModelIDs
	}
	if modes != nil {
		rec.Acpx.CurrentModeID = modes.CurrentModeID
		rec.Acpx.AvailableModes = modes.AvailableModeIDs
	}
}

// RequestIDsKey is the record's acpx key listing every request id used in
// the session (a JSON array of strings).
const RequestIDsKey = "request_ids"

// ranATurn reports whether the record's session ever started a turn: a
// session that never did has nothing to resume (and codex-acp 2.x cannot
// resume one: it keeps no rollout for it; docs/agents.md).
func ranATurn(r *store.Record) bool {
	if r.LastRequestID != nil || len(r.RequestTokenUsage) > 0 {
		return true
	}
	var ids []string
	raw, ok := r.Acpx.Extra[RequestIDsKey]
	return ok && json.Unmarshal(raw, &ids) == nil && len(ids) > 0
}
