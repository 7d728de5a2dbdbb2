// Package wirecheck validates host-protocol frames against the protocol's
// JSON Schema, docs/protocol.schema.json: the envelope of every JSON-RPC
// message, the params of every request and notification (by method, per
// the schema's x-methods), and every response against the result of the
// request it answers (paired by id and direction). Tests use it on every
// frame they see (internal/e2e, package client's tests).
//
// Frames from the sidecar must validate. Frames from the host may not (tests
// send bad input on purpose); a host request the schema rejects must then be
// refused by the sidecar with an error response, so a request the schema
// calls invalid but the sidecar accepts is reported too.
package wirecheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaURL is the resource name the schema is compiled under.
const schemaURL = "protocol.schema.json"

// Method is one entry of the schema's x-methods: Kind is "request" or
// "notification"; Direction is "host" (host → sidecar), "sidecar"
// (sidecar → host) or "both" (the same method either way); Params and Result name $defs entries ("" when none);
// Pending is true for methods specified but not yet implemented.
type Method struct {
	// Name is the JSON-RPC method name (the x-methods key).
	Name string
	// Kind is "request" or "notification".
	Kind string
	// Direction is "host", "sidecar" or "both": who sends it.
	Direction string
	// Params is the $defs entry the params validate against; "": none.
	Params string
	// Result is the $defs entry a response's result validates against;
	// "": none.
	Result string
	// Pending: the method carries x-pending (specified, not implemented).
	Pending bool
}

// Schema is a compiled docs/protocol.schema.json.
type Schema struct {
	doc     map[string]any
	methods map[string]Method
	message *jsonschema.Schema
	errObj  *jsonschema.Schema
	anyErr  *jsonschema.Schema
	defs    map[string]*jsonschema.Schema
}

var (
	defaultOnce   sync.Once
	defaultSchema *Schema
	defaultErr    error
)

// Path is the absolute path of the repository's docs/protocol.schema.json.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs", "protocol.schema.json")
}

// Default loads and compiles the repository's schema once (Path).
func Default() (*Schema, error) {
	defaultOnce.Do(func() { defaultSchema, defaultErr = Load(Path()) })
	return defaultSchema, defaultErr
}

// Load reads and compiles the schema at path. Errors: the file cannot be
// read, is not a draft 2020-12 schema, or x-methods names a missing $defs
// entry.
func Load(path string) (*Schema, error) {
	root, c, err := compilerFor(path, schemaURL)
	if err != nil {
		return nil, err
	}
	s := &Schema{doc: root, methods: map[string]Method{}, defs: map[string]*jsonschema.Schema{}}
	defs, _ := root["$defs"].(map[string]any)
	for name := range defs {
		sch, err := c.Compile(schemaURL + "#/$defs/" + name)
		if err != nil {
			return nil, fmt.Errorf("compiling $defs/%s: %w", name, err)
		}
		s.defs[name] = sch
	}
	if s.message, err = c.Compile(schemaURL); err != nil {
		return nil, err
	}
	s.errObj, s.anyErr = s.defs["ErrorObject"], s.defs["JSONRPCError"]
	if s.errObj == nil || s.anyErr == nil {
		return nil, errors.New("schema lacks $defs ErrorObject or JSONRPCError")
	}
	ms, _ := root["x-methods"].(map[string]any)
	if len(ms) == 0 {
		return nil, errors.New("schema lacks x-methods")
	}
	for name, v := range ms {
		e, _ := v.(map[string]any)
		m := Method{Name: name}
		m.Kind, _ = e["kind"].(string)
		m.Direction, _ = e["direction"].(string)
		_, m.Pending = e["x-pending"]
		for key, dst := range map[string]*string{"params": &m.Params, "result": &m.Result} {
			r, ok := e[key].(map[string]any)
			if !ok {
				continue
			}
			ref, _ := r["$ref"].(string)
			name := strings.TrimPrefix(ref, "#/$defs/")
			if s.defs[name] == nil {
				return nil, fmt.Errorf("x-methods %q %s: no $defs entry for %q", m.Name, key, ref)
			}
			*dst = name
		}
		if (m.Kind != "request" && m.Kind != "notification") || (m.Direction != "host" && m.Direction != "sidecar" && m.Direction != "both") {
			return nil, fmt.Errorf("x-methods %q: bad kind %q or direction %q", name, m.Kind, m.Direction)
		}
		s.methods[name] = m
	}
	return s, nil
}

// Methods returns the x-methods entries sorted by name.
func (s *Schema) Methods() []Method {
	out := make([]Method, 0, len(s.methods))
	for _, m := range s.methods {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Enum returns the enum values of $defs/name as strings (numbers in their
// JSON text), or nil when it has none.
func (s *Schema) Enum(name string) []string {
	defs, _ := s.doc["$defs"].(map[string]any)
	d, _ := defs[name].(map[string]any)
	vals, _ := d["enum"].([]any)
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// Validate validates the JSON value raw against $defs/name.
func (s *Schema) Validate(name string, raw []byte) error {
	sch := s.defs[name]
	if sch == nil {
		return fmt.Errorf("no $defs entry %q", name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// From says which side wrote a frame.
type From int

// Frame directions.
const (
	// FromHost: the host wrote it to the sidecar's stdin.
	FromHost From = iota
	// FromSidecar: the sidecar wrote it to its stdout.
	FromSidecar
)

// String is "host" or "sidecar".
func (f From) String() string {
	if f == FromHost {
		return "host"
	}
	return "sidecar"
}

// Conn checks the frames of one host connection in wire order. It is safe
// for concurrent use; each direction's frames must be passed in the order
// they were written.
type Conn struct {
	s  *Schema
	mu sync.Mutex
	// pending maps a request id (its JSON text) to the method, per the
	// direction of the request.
	pending [2]map[string]string
	// rejected holds ids of host requests the schema rejects, with why.
	rejected map[string]string
	// partial holds the bytes after the last line end Feed saw, per
	// direction.
	feedMu  sync.Mutex
	partial [2][]byte
}

// Feed checks the complete ndjson lines of b, a chunk of what from wrote
// (bytes after the last line end wait for the next chunk). It returns the
// violations in order. Use it where writes are not whole frames.
func (c *Conn) Feed(from From, b []byte) []error {
	c.feedMu.Lock()
	defer c.feedMu.Unlock()
	var errs []error
	buf := append(c.partial[from], b...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(buf[:i]); len(line) > 0 {
			if err := c.Check(from, line); err != nil {
				errs = append(errs, err)
			}
		}
		buf = buf[i+1:]
	}
	c.partial[from] = append([]byte(nil), buf...)
	return errs
}

// Tap returns an observer of one host connection's frames for tests, in
// the shape of package client's Options.OnFrame (client.Frame's Sent, Raw
// and Data): every frame is checked by a Conn of the repository's schema
// (Default) and each violation fails t. sent: the host wrote the frame;
// raw: data is bytes as written (WriteRaw), else one ndjson frame without
// its newline. A schema that does not load fails t at once.
func Tap(t testing.TB) func(sent, raw bool, data []byte) {
	t.Helper()
	schema, err := Default()
	if err != nil {
		t.Fatalf("protocol schema: %v", err)
	}
	conn := schema.NewConn()
	return func(sent, raw bool, data []byte) {
		from := FromSidecar
		if sent {
			from = FromHost
		}
		if !raw {
			data = append(data, '\n')
		}
		for _, err := range conn.Feed(from, data) {
			t.Error(err)
		}
	}
}

// NewConn starts checking one connection.
func (s *Schema) NewConn() *Conn {
	return &Conn{s: s, pending: [2]map[string]string{{}, {}}, rejected: map[string]string{}}
}

type envelope struct {
	JSONRPC *string          `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id"`
	Method  *string          `json:"method"`
	Params  json.RawMessage  `json:"params"`
	Result  json.RawMessage  `json:"result"`
	Error   json.RawMessage  `json:"error"`
}

// Check validates one frame (one JSON-RPC message, without framing) that
// from wrote. It returns a *Violation for a sidecar frame outside the
// schema, a sidecar response to no pending request, or a success response
// to a host request the schema rejects; nil otherwise.
func (c *Conn) Check(from From, frame []byte) error {
	frame = bytes.TrimSpace(frame)
	var env envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		return c.hostBad(from, nil, frame, "not a JSON object: "+err.Error())
	}
	id := ""
	if env.ID != nil {
		id = canonical(*env.ID)
	}
	if err := c.validateRaw(c.s.message, frame); err != nil {
		return c.hostBad(from, &id, frame, "envelope: "+err.Error())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case env.Method != nil:
		m, known := c.s.methods[*env.Method]
		isReq := env.ID != nil
		if isReq {
			c.pending[from][id] = *env.Method
		}
		want := "notification"
		if isReq {
			want = "request"
		}
		if !known || (m.Direction != from.String() && m.Direction != "both") || m.Kind != want {
			return c.hostBadLocked(from, &id, frame, fmt.Sprintf("%q is not a %s→ %s in the schema", *env.Method, from, want))
		}
		if m.Params == "" {
			return nil
		}
		params := []byte(env.Params)
		if len(params) == 0 {
			params = []byte("{}")
		}
		if err := c.validateRaw(c.s.defs[m.Params], params); err != nil {
			return c.hostBadLocked(from, &id, frame, m.Params+": "+err.Error())
		}
		return nil
	default: // a response
		other := FromSidecar
		if from == FromSidecar {
			other = FromHost
		}
		if env.ID == nil || id == "null" {
			if from == FromSidecar && len(env.Error) > 0 {
				return c.violation(from, frame, c.validateRaw(c.s.errObj, env.Error), "ErrorObject")
			}
			return c.hostBadLocked(from, nil, frame, "a response with id null")
		}
		method, ok := c.pending[other][id]
		if !ok {
			if from == FromHost {
				return nil // the sidecar treats it as a stray answer
			}
			return &Violation{From: from, Frame: truncate(frame), Why: "a response to no pending host request (id " + id + ")"}
		}
		delete(c.pending[other], id)
		if from == FromSidecar {
			why, wasRejected := c.rejected[id]
			delete(c.rejected, id)
			if len(env.Error) > 0 {
				return c.violation(from, frame, c.validateRaw(c.s.errObj, env.Error), "ErrorObject")
			}
			if wasRejected {
				return &Violation{From: from, Frame: truncate(frame),
					Why: "the sidecar accepted a " + method + " request that the schema rejects (" + why + ")"}
			}
			m := c.s.methods[method]
			if m.Result == "" {
				return nil
			}
			return c.violation(from, frame, c.validateRaw(c.s.defs[m.Result], env.Result), m.Result)
		}
		// A host's answer to a sidecar request.
		if len(env.Error) > 0 {
			return c.violation(from, frame, c.validateRaw(c.s.anyErr, env.Error), "JSONRPCError")
		}
		m := c.s.methods[method]
		if m.Result == "" {
			return nil
		}
		return c.violation(from, frame, c.validateRaw(c.s.defs[m.Result], env.Result), m.Result)
	}
}

func (c *Conn) hostBad(from From, id *string, frame []byte, why string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hostBadLocked(from, id, frame, why)
}

// hostBadLocked handles a frame outside the schema: a violation for the
// sidecar; for the host, a request whose answer must be an error.
func (c *Conn) hostBadLocked(from From, id *string, frame []byte, why string) error {
	if from == FromSidecar {
		return &Violation{From: from, Frame: truncate(frame), Why: why}
	}
	if id != nil && *id != "" && *id != "null" {
		c.rejected[*id] = why
	}
	return nil
}

func (c *Conn) violation(from From, frame []byte, err error, def string) error {
	if err == nil {
		return nil
	}
	return &Violation{From: from, Frame: truncate(frame), Why: def + ": " + err.Error()}
}

func (c *Conn) validateRaw(sch *jsonschema.Schema, raw []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// Violation is a frame that does not match the schema.
type Violation struct {
	// From is the side that wrote the frame.
	From From
	// Frame is the frame's text, cut to its first 4000 bytes ("…" marks
	// a cut).
	Frame string
	// Why says what does not match: the $defs entry and the validator's
	// error, or the pairing problem.
	Why string
}

// Error names the side, the reason and the frame.
func (v *Violation) Error() string {
	return fmt.Sprintf("schema violation in a frame from the %s: %s\nframe: %s", v.From, v.Why, v.Frame)
}

// canonical is the JSON text of an id with insignificant differences
// removed (whitespace), so that 7 and "7" stay distinct.
func canonical(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func truncate(b []byte) string {
	const max = 4000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// Properties returns the member names $defs/name declares (following a
// top-level $ref), sorted; nil when it declares none.
func (s *Schema) Properties(name string) []string {
	defs, _ := s.doc["$defs"].(map[string]any)
	d, _ := defs[name].(map[string]any)
	props, _ := d["properties"].(map[string]any)
	if ref, ok := d["$ref"].(string); ok && len(props) == 0 {
		return s.Properties(strings.TrimPrefix(ref, "#/$defs/"))
	}
	var out []string
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// compilerFor reads the JSON Schema document at path and returns its root
// object and a compiler holding it as url. Errors: unreadable, not JSON,
// not an object.
func compilerFor(path, url string) (map[string]any, *jsonschema.Compiler, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a JSON object", path)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, nil, err
	}
	return root, c, nil
}
