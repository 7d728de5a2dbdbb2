package wirecheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The official ACP v1 schema (testdata/acp/schema.v1.json; its source and
// date: testdata/README.md) and the check of every frame the sidecar sends
// an agent against it (internal/e2e: the fault agent's records).

const acpSchemaURL = "acp.schema.v1.json"

// ACPPath is the absolute path of testdata/acp/schema.v1.json.
func ACPPath() string {
	return filepath.Join(filepath.Dir(Path()), "..", "testdata", "acp", "schema.v1.json")
}

// ACPSchema is the compiled ACP v1 schema, for the client side of ACP:
// the frames a client (the sidecar) sends an agent.
type ACPSchema struct {
	// client is the root schema's "Client" message (anyOf entry titled
	// Client): any request, response or notification a client sends.
	client *jsonschema.Schema
	// params maps each ACP method a client calls (x-side "agent") to its
	// params definition; results maps each method an agent calls (x-side
	// "client") to its response definition.
	params, results map[string]*jsonschema.Schema
	errObj          *jsonschema.Schema
}

var (
	acpOnce   sync.Once
	acpSchema *ACPSchema
	acpErr    error
)

// ACPDefault loads and compiles testdata/acp/schema.v1.json once.
func ACPDefault() (*ACPSchema, error) {
	acpOnce.Do(func() { acpSchema, acpErr = LoadACP(ACPPath()) })
	return acpSchema, acpErr
}

// LoadACP compiles the ACP schema at path. Errors: unreadable, not a JSON
// Schema, or without the Client message.
func LoadACP(path string) (*ACPSchema, error) {
	root, c, err := compilerFor(path, acpSchemaURL)
	if err != nil {
		return nil, err
	}
	s := &ACPSchema{params: map[string]*jsonschema.Schema{}, results: map[string]*jsonschema.Schema{}}
	entries, _ := root["anyOf"].([]any)
	for i, e := range entries {
		if m, _ := e.(map[string]any); m["title"] == "Client" {
			if s.client, err = c.Compile(fmt.Sprintf("%s#/anyOf/%d", acpSchemaURL, i)); err != nil {
				return nil, err
			}
		}
	}
	if s.client == nil {
		return nil, fmt.Errorf("%s: no Client message", path)
	}
	defs, _ := root["$defs"].(map[string]any)
	for name, v := range defs {
		d, _ := v.(map[string]any)
		method, _ := d["x-method"].(string)
		side, _ := d["x-side"].(string)
		var into map[string]*jsonschema.Schema
		switch {
		case method == "":
			continue
		case (side == "agent" || side == "protocol") && (strings.HasSuffix(name, "Request") || strings.HasSuffix(name, "Notification")):
			// "protocol": sent by either side ($/cancel_request).
			into = s.params
		case side == "client" && strings.HasSuffix(name, "Response"):
			into = s.results
		default:
			continue
		}
		sch, err := c.Compile(acpSchemaURL + "#/$defs/" + name)
		if err != nil {
			return nil, fmt.Errorf("compiling $defs/%s: %w", name, err)
		}
		into[method] = sch
	}
	if s.errObj, err = c.Compile(acpSchemaURL + "#/$defs/Error"); err != nil {
		return nil, err
	}
	return s, nil
}

// ACPUnstable are the ACP methods the sidecar may send that schema v1
// does not define (they are in schema.unstable.json): checked against
// the Client message only. session/set_model: the legacy model selection
// of agents without a model config option (docs/agents.md).
var ACPUnstable = map[string]bool{"session/set_model": true}

// CheckClientFrame validates one frame a client sent an agent: the Client
// message, then a request's or notification's params against its method
// (`_…` extension methods take any params; a method neither in v1 nor in
// ACPUnstable is a violation), and a response to the agent's request
// agentMethod ("" when unknown) against that method's response. A
// response's error must be an ACP Error.
func (s *ACPSchema) CheckClientFrame(frame []byte, agentMethod string) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(frame))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.client.Validate(inst); err != nil {
		return fmt.Errorf("ACP Client message: %w", err)
	}
	var env struct {
		Method *string          `json:"method"`
		Params json.RawMessage  `json:"params"`
		Result json.RawMessage  `json:"result"`
		Error  *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(frame, &env); err != nil {
		return err
	}
	validate := func(sch *jsonschema.Schema, raw []byte, what string) error {
		if len(raw) == 0 {
			raw = []byte("{}")
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err == nil {
			err = sch.Validate(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	switch {
	case env.Method != nil:
		m := *env.Method
		if sch := s.params[m]; sch != nil {
			return validate(sch, env.Params, m+" params")
		}
		if strings.HasPrefix(m, "_") || ACPUnstable[m] {
			return nil
		}
		return fmt.Errorf("%q is not an ACP v1 method a client sends", m)
	case env.Error != nil:
		return validate(s.errObj, *env.Error, "error")
	default:
		if sch := s.results[agentMethod]; sch != nil {
			return validate(sch, env.Result, agentMethod+" result")
		}
		if agentMethod == "" || strings.HasPrefix(agentMethod, "_") {
			return nil
		}
		return fmt.Errorf("a result for %q, which is not an ACP v1 method an agent calls", agentMethod)
	}
}
