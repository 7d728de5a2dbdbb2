package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// permCostModes holds the mode permission-title=<title> (see package doc).
type permCostModes struct {
	// permissionTitle: each turn asks session/request_permission with a
	// toolCall that has this title and NO kind (the client must infer it).
	permissionTitle string
}

// parse sets the mode name (permission-title) from val.
func (m *permCostModes) parse(name, val string, hasVal bool) error {
	switch name {
	case "permission-title":
		if !hasVal || val == "" {
			return errors.New("mode permission-title needs =<title>")
		}
		m.permissionTitle = val
	default:
		return fmt.Errorf("unknown mode %q", name)
	}
	return nil
}

// usageUpdate is the turn's usage_update object: used 15 of contextSize
// (mode cost adds the cumulative cost, modes_seed.go).
func (a *agent) usageUpdate() json.RawMessage {
	u := map[string]any{"sessionUpdate": "usage_update", "used": 15, "size": contextSize}
	b, _ := json.Marshal(u)
	return b
}

// askTitledPermission sends session/request_permission whose toolCall has
// the permission-title title and no kind, and returns the chunk text
// "permission: <outcome> <optionId>" like askPermission.
func (a *agent) askTitledPermission(sessionID string) string {
	params := map[string]any{
		"sessionId": sessionID,
		"toolCall": map[string]any{
			"toolCallId": "fa-call-titled",
			"title":      a.cfg.permissionTitle,
			"status":     "pending",
		},
		"options": []any{
			map[string]any{"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
			map[string]any{"optionId": "reject-once", "name": "Reject once", "kind": "reject_once"},
		},
	}
	resp := a.call("session/request_permission", params)
	if resp.Error != nil {
		return fmt.Sprintf("permission: error %d", resp.Error.Code)
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(resp.Result, &r)
	return strings.TrimSpace(fmt.Sprintf("permission: %s %s", r.Outcome.Outcome, r.Outcome.OptionID))
}
