package client_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
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

// TestWireNamesMatchSchema checks that the client's own types (those that
// are not aliases of package protocol's) carry the member names of their
// definitions in docs/protocol.schema.json, so the two cannot drift apart.
func TestWireNamesMatchSchema(t *testing.T) {
	schema, err := wirecheck.Default()
	if err != nil {
		t.Fatal(err)
	}
	pairs := []struct {
		public  any
		def     string
		without string // a member only the wire form has (the implied session)
	}{
		{client.OpenParams{}, "OpenParams", ""},
		{client.Command{}, "Command", ""},
		{client.Limits{}, "Limits", ""},
		{client.PromptParams{}, "PromptParams", "session"},
		{client.CloseParams{}, "CloseParams", "session"},
		{client.Update{}, "UpdateNotification", ""},
		{client.PermissionRequest{}, "RequestPermissionParams", ""},
		{client.PermissionOption{}, "PermissionOption", ""},
	}
	for _, p := range pairs {
		pub := reflect.TypeOf(p.public)
		want := slices.DeleteFunc(schema.Properties(p.def), func(n string) bool { return n == p.without })
		if got := jsonNames(pub); !slices.Equal(got, want) {
			t.Errorf("client.%s members %v, schema $defs/%s has %v", pub.Name(), got, p.def, want)
		}
	}
	// PermissionOutcome is one of the two shapes of RequestPermissionResult.
	if got := jsonNames(reflect.TypeOf(client.PermissionOutcome{})); !slices.Equal(got, []string{"optionId", "outcome"}) {
		t.Errorf("client.PermissionOutcome members %v, want [optionId outcome]", got)
	}
}
