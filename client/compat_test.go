package client_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// jsonNames lists the JSON member names of struct type t, with their
// omitempty flag, following embedded structs.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			names = append(names, jsonNames(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestWireNamesMatchProtocol checks that the public types carry the member
// names of the sidecar's own wire types (protocol), so the two
// cannot drift apart.
func TestWireNamesMatchProtocol(t *testing.T) {
	pairs := []struct {
		public, wire any
		without      string // a member only the wire type has
	}{
		{client.OpenParams{}, protocol.OpenParams{}, ""},
		{client.Command{}, protocol.Command{}, ""},
		{client.PermissionPolicy{}, protocol.PermissionPolicy{}, ""},
		{client.OpenResult{}, protocol.OpenResult{}, ""},
		{client.Identity{}, protocol.Identity{}, ""},
		{client.AgentInfo{}, protocol.AgentInfo{}, ""},
		{client.Models{}, protocol.Models{}, ""},
		{client.Modes{}, protocol.Modes{}, ""},
		{client.ProcessInfo{}, protocol.ProcessInfo{}, ""},
		{client.PermissionBinding{}, protocol.PermissionBinding{}, ""},
		{client.PromptParams{}, protocol.PromptParams{}, "session"},
		{client.PromptResult{}, protocol.PromptResult{}, ""},
		{client.Usage{}, protocol.Usage{}, ""},
		{client.Cost{}, protocol.Cost{}, ""},
		{client.TurnError{}, protocol.TurnError{}, ""},
		{client.CloseParams{}, protocol.CloseParams{}, "session"},
		{client.StatusResult{}, protocol.StatusResult{}, ""},
		{client.UsageStatus{}, protocol.UsageStatus{}, ""},
		{client.ProcessStatus{}, protocol.ProcessStatus{}, ""},
		{client.ListEntry{}, protocol.ListEntry{}, ""},
		{client.Update{}, protocol.SessionUpdateNotice{}, ""},
		{client.Exited{}, protocol.ExitedNotice{}, ""},
		{client.PermissionDecision{}, protocol.PermissionNotice{}, ""},
		{client.PermissionRequest{}, protocol.PermissionRequestParams{}, ""},
		{client.PermissionOutcome{}, protocol.PermissionRequestResult{}, ""},
		{client.Proof{}, protocol.Proof{}, ""},
		{client.ProtocolClose{}, protocol.ProtocolClose{}, ""},
		{client.ProofSignal{}, protocol.ProofSignal{}, ""},
		{client.ProofProcess{}, protocol.ProofProcess{}, ""},
		{client.ProofVerified{}, protocol.ProofVerified{}, ""},
		{client.ProofError{}, protocol.ProofError{}, ""},
		{client.InitializeResult{}, protocol.InitializeResult{}, ""},
		{client.Implementation{}, protocol.Implementation{}, ""},
		{client.ServerCaps{}, protocol.ServerCaps{}, ""},
		{client.Bounds{}, protocol.Bounds{}, ""},
		{client.Limits{}, protocol.Limits{}, ""},
		{client.Resources{}, protocol.Resources{}, ""},
	}
	for _, p := range pairs {
		pub, wire := reflect.TypeOf(p.public), reflect.TypeOf(p.wire)
		want := slices.DeleteFunc(jsonNames(wire), func(n string) bool { return n == p.without })
		if got := jsonNames(pub); !slices.Equal(got, want) {
			t.Errorf("client.%s members %v, protocol.%s has %v", pub.Name(), got, wire.Name(), want)
		}
	}
}
