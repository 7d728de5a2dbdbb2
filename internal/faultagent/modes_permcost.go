package main

import (
	"encoding/json"
	"errors"
	"fmt"
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

// askTitledPermission asks for a permission whose toolCall has the
// permission-title title and no kind (options allow_once/reject_once).
func (a *agent) askTitledPermission(sessionID string) string {
	toolCall := map[string]any{"toolCallId": "fa-call-titled", "title": a.cfg.permissionTitle, "status": "pending"}
	return a.requestPermission(sessionID, toolCall, "allow_once", "reject_once")
}
