package session

import (
	"encoding/json"
	"errors"

	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/internal/usage"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// applyConfigOptions adopts a config_option_update and keeps models/modes
// in step with the options of category model/mode.
func (s *Actor) applyConfigOptions(opts []json.RawMessage) {
	s.ctl.configOpts = jsonl.CleanRaws(opts) // reported to the host verbatim
	for _, raw := range opts {
		var o controls.ConfigOption
		if json.Unmarshal(raw, &o) != nil {
			continue
		}
		var v string
		if json.Unmarshal(o.CurrentValue, &v) != nil {
			continue
		}
		switch {
		case (o.ID == "model" || o.Category == "model") && s.ctl.models != nil:
			s.ctl.models.CurrentModelID = controls.ListedModelID(opts, v, s.ctl.models.AvailableModelIDs)
		case (o.ID == "mode" || o.Category == "mode") && s.ctl.modes != nil:
			s.ctl.modes.CurrentModeID = v
		}
	}
}

// status answers session/status from the persisted record, checked against
// the identity admitted at open (docs/rules.md#r23).
func (s *Actor) status() (any, error) {
	if s.state.Is(protocol.StateAdmitting) {
		return nil, protocol.Domain(protocol.ErrSessionNotFound, "the session is still being admitted", true)
	}
	res := s.liveStatus()
	processStatus(&res, s.end.tree)
	if s.rec.identity.BackendSessionID == "" || s.rec.discarded {
		return res, nil // nothing was admitted or the record was discarded
	}
	return mergeRecord(res, s.rec.st)
}

// liveStatus is the actor's own part of a status answer (no process, no
// record), built from copies: it may outlive this turn of the actor loop
// (a snapshot).
func (s *Actor) liveStatus() protocol.StatusResult {
	res := protocol.StatusResult{Session: s.id, SessionKey: s.key, Agent: s.agent, State: s.state.Current(), Identity: s.rec.identity,
		Closed: s.state.Is(protocol.StateClosed), LastRequestID: s.turns.lastReqID, ConfigOptions: s.ctl.configOpts,
		Usage: s.acct.Status(), Cost: s.acct.Cost(),
		PermissionBinding: s.ctl.binding, QueuedRequestIDs: s.queuedIDs(), Persistence: s.pub.Persistence()}
	if s.ctl.models != nil {
		m := *s.ctl.models
		res.Models = &m
	}
	if s.ctl.modes != nil {
		m := *s.ctl.modes
		res.Modes = &m
	}
	res.Process.Pid = s.end.pid
	res.Lifecycle = s.lifecycleStatus()
	res.Store = s.storeStatus()
	res.Network = s.networkStatus()
	res.Summary = s.summary()
	return res
}

// processStatus fills res.Process and res.Resources from tree (nil: none);
// safe off the actor.
func processStatus(res *protocol.StatusResult, tree launch.Tree) {
	if tree == nil {
		return
	}
	res.Process.Pid = tree.Info().Pid
	select {
	case <-tree.Exited():
	default:
		res.Process.Alive = true
	}
	res.Resources = launch.ResourcesOf(tree)
}

// mergeRecord checks res against the persisted record in st (its identity
// must be the one admitted) and reports the record's view of the session
// (docs/rules.md#r23); safe off the actor.
func mergeRecord(res protocol.StatusResult, st *store.Store) (any, error) {
	rec, err := st.Load(res.SessionKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocol.Domain(protocol.ErrPersistedSessionMissing, "the session record is missing from the state directory", false)
	}
	if err != nil {
		return nil, protocol.Domain(protocol.ErrStoreUnavailable, "the session record cannot be read: "+launch.ErrText(err), true)
	}
	if rec.SessionKey != res.Identity.SessionKey || rec.BackendSessionID != res.Identity.BackendSessionID {
		return nil, protocol.Domain(protocol.ErrPersistedSessionMismatch, "the session record names another ACP session", false)
	}
	res.LastRequestID = rec.LastRequestID
	res.Closed = rec.Closed
	if rec.Acpx.CurrentModelID != "" {
		res.Models = &protocol.Models{CurrentModelID: rec.Acpx.CurrentModelID, AvailableModelIDs: nonNilStrings(rec.Acpx.AvailableModels)}
	}
	if rec.Acpx.CurrentModeID != "" {
		res.Modes = &protocol.Modes{CurrentModeID: rec.Acpx.CurrentModeID, AvailableModeIDs: nonNilStrings(rec.Acpx.AvailableModes)}
	}
	usage.MergeRecord(&res, rec)
	return res, nil
}

func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
