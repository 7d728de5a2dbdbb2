package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Form is the requestedSchema of a form elicitation, compiled: what
// the host's accepted content is checked against (docs/protocol.md §22).
// The ACP ElicitationSchema is a flat object of primitive properties
// (string, number, integer, boolean, array of strings), a restricted JSON
// Schema; santhosh-tekuri/jsonschema checks the values (enum, oneOf,
// minimum, pattern, minItems, …).
type Form struct {
	sch      *jsonschema.Schema
	props    map[string]bool
	required []string
}

// noLoader refuses every schema resource: an agent's schema is compiled
// from its own bytes only, never from a file or URL its $ref names.
type noLoader struct{}

// Load implements jsonschema.URLLoader: every url is refused.
func (noLoader) Load(string) (any, error) {
	return nil, errors.New("external schema references are not followed")
}

// compileForm compiles an ACP ElicitationSchema; why is "" on success,
// else what makes it unusable (not an object schema, properties not an
// object, required not a list of names, not a JSON Schema). A $ref to
// anything outside raw is refused.
func compileForm(raw json.RawMessage) (*Form, string) {
	obj, why := strictjson.DecodeObject(raw, "type", "properties", "required")
	if why != "" {
		return nil, why
	}
	if t, present, ok := obj.Str("type"); !ok || present && t != "object" {
		return nil, `type is not "object"`
	}
	f := &Form{props: map[string]bool{}}
	if p, ok := obj["properties"]; ok && string(p) != "null" {
		props, why := strictjson.DecodeObject(p)
		if why != "" {
			return nil, "properties: " + why
		}
		for k := range props {
			f.props[k] = true
		}
	}
	if r, ok := obj["required"]; ok && string(r) != "null" {
		if json.Unmarshal(r, &f.required) != nil {
			return nil, "required is not a list of names"
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, "not JSON"
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const url = "elicitation://requestedSchema"
	if c.AddResource(url, doc) != nil {
		return nil, "not a JSON Schema"
	}
	if f.sch, err = c.Compile(url); err != nil {
		return nil, "not a JSON Schema"
	}
	return f, ""
}

// Check checks accepted content against the schema: an object whose
// members are properties of the schema, each an ACP
// ElicitationContentValue (string, number, boolean or array of strings),
// the required ones present, all valid for their property schema. field
// names the first bad member as a dot path from "content"; why is ""
// when content matches.
func (f *Form) Check(content json.RawMessage) (field, why string) {
	obj, why := strictjson.DecodeObject(content)
	if why != "" {
		return "content", why
	}
	// In the order the host wrote them, so the member reported is the
	// same every time (a map's order is not).
	members, _ := strictjson.ObjectMembers(content)
	for _, m := range members {
		if k, v := m.Key, m.Val; !f.props[k] {
			return "content." + k, protocol.QuoteShort(k) + " is not a property of the requested schema"
		} else if !contentValue(v) {
			return "content." + k, "not a string, number, boolean or array of strings"
		}
	}
	for _, k := range f.required {
		if _, ok := obj[k]; !ok {
			return "content." + k, "the required " + protocol.QuoteShort(k) + " is missing"
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(content))
	if err != nil {
		return "content", "not JSON"
	}
	err = f.sch.Validate(inst)
	if err == nil {
		return "", ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "content", "does not match the requested schema"
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	field = "content"
	if len(ve.InstanceLocation) > 0 {
		field += "." + strings.Join(ve.InstanceLocation, ".")
	}
	return field, "fails the requested schema's " + protocol.QuoteShort(strings.Join(ve.ErrorKind.KeywordPath(), "/"))
}

// contentValue reports whether v is an ACP ElicitationContentValue.
func contentValue(v json.RawMessage) bool {
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case '"', 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	case '[':
		var ss []string
		return json.Unmarshal(v, &ss) == nil
	}
	return false
}
