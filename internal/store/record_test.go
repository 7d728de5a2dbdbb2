package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixturePath is the record written by npm acpx@0.19.1, kept in the
// repository's top-level testdata/ (testdata/README.md).
func fixturePath(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "acpx-0.19.1-record.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture not found: %v", err)
	}
	return p
}

func readJSON(t *testing.T, p string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func installFixture(t *testing.T, s *Store) map[string]any {
	t.Helper()
	b, err := os.ReadFile(fixturePath(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.RecordPath("peer-0"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return readJSON(t, s.RecordPath("peer-0"))
}

// TestRecord_FixtureRoundTripPreservesEveryKey: Load the acpx fixture, Save
// it; the file is semantically identical except the updated_at value.
func TestRecord_FixtureRoundTripPreservesEveryKey(t *testing.T) {
	s := openTemp(t)
	want := installFixture(t, s)
	r, err := s.Load("peer-0")
	if err != nil {
		t.Fatal(err)
	}
	if r.BackendSessionID != "fa-2b4a3b1fde46" || r.Pid == nil || *r.Pid != 8486 || r.Title != nil ||
		r.CumulativeTokenUsage.TotalTokens != 15 || r.Acpx.CurrentModelID != "fa-model" ||
		r.Acpx.AvailableModelNames["fa-large"] != "FA large" || r.Acpx.ModelControl != "legacy_set_model" {
		t.Errorf("fixture fields not decoded: %+v", r)
	}
	if len(r.Extra) != 0 || len(r.Acpx.Extra) != 0 {
		t.Errorf("fixture keys fell into Extra: %v %v", r.Extra, r.Acpx.Extra)
	}
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	got := readJSON(t, s.RecordPath("peer-0"))
	if got["updated_at"] != r.UpdatedAt {
		t.Errorf("updated_at = %v, want %v", got["updated_at"], r.UpdatedAt)
	}
	got["updated_at"] = want["updated_at"]
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("round trip changed the record (-fixture +saved):\n%s", d)
	}
}

// TestRecord_GoBuiltRecordHasFixtureShape: a record filled through the Go
// fields with the fixture's values is written with exactly the fixture's keys
// and values (snake_case, same nesting).
func TestRecord_GoBuiltRecordHasFixtureShape(t *testing.T) {
	want := readJSON(t, fixturePath(t))
	s := openTemp(t)
	r := &Record{
		SessionKey:        "peer-0",
		BackendSessionID:  "fa-2b4a3b1fde46",
		AgentCommand:      "/opt/agents/faultagent normal",
		AgentArgv:         []string{"/opt/agents/faultagent", "normal"},
		Cwd:               "/srv/work/ws-1",
		Name:              "peer-0",
		CreatedAt:         "2026-11-29T17:18:24.946Z",
		LastUsedAt:        "2026-11-29T17:18:26.017Z",
		LastRequestID:     ptr("peer-0-t1"),
		EventLog:          json.RawMessage(`{"active_path":"/home/user/.acpx/sessions/peer-0.stream.ndjson","segment_count":5,"max_segment_bytes":67108864,"max_segments":5,"last_write_error":null}`),
		Closed:            true,
		ClosedAt:          ptr("2026-11-29T17:18:26.600Z"),
		Pid:               ptr(8486),
		AgentStartedAt:    ptr("2026-11-29T17:18:24.389Z"),
		LastPromptAt:      ptr("2026-11-29T17:18:24.966Z"),
		ProtocolVersion:   1,
		AgentCapabilities: json.RawMessage(`{"loadSession":true}`),
		Messages: json.RawMessage(`[{"User":{"id":"6173ec81-cf7f-4153-bf28-d92f430e2b82","content":[{"Text":"go"}]}},
			{"Agent":{"content":[{"Text":"hello from faultagent"}],"tool_results":{}}}]`),
		CumulativeTokenUsage: &TokenUsage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
		RequestTokenUsage: map[string]TokenUsage{
			"6173ec81-cf7f-4153-bf28-d92f430e2b82": {InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
		},
		Acpx: AcpxState{
			CurrentModelID:      "fa-model",
			AvailableModels:     []string{"fa-model", "fa-large"},
			AvailableModelNames: map[string]string{"fa-model": "FA", "fa-large": "FA large"},
			ModelControl:        "legacy_set_model",
		},
	}
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	got := readJSON(t, s.RecordPath("peer-0"))
	got["updated_at"] = want["updated_at"]
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Go-built record differs from the acpx fixture (-fixture +ours):\n%s", d)
	}
}

var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// TestRecord_OurKeysAreSnakeCase: every key we define (record, acpx,
// token usage, cost) follows acpx's persisted-key policy.
func TestRecord_OurKeysAreSnakeCase(t *testing.T) {
	r := Record{
		AgentSessionID:       "x",
		CumulativeTokenUsage: &TokenUsage{CachedReadTokens: ptr(int64(1)), CachedWriteTokens: ptr(int64(1)), ThoughtTokens: ptr(int64(1))},
		CumulativeCost:       &Cost{Amount: 1, Currency: "USD"},
		Acpx: AcpxState{CurrentModeID: "m", AvailableModes: []string{"m"}, AgentProfile: "codex", AgentSessionID: "x",
			CumulativeCost: &Cost{Amount: 1, Currency: "USD"}, RequestCost: map[string]Cost{"r": {1, "USD"}},
			ContextUsage: &ContextUsage{Used: 1, Size: 2}},
		Title: ptr("t"), ClosedAt: ptr("c"), Pid: ptr(1), AgentStartedAt: ptr("a"), LastPromptAt: ptr("l"),
		LastRequestID: ptr("r"), Name: "n", ProtocolVersion: 1, AgentArgv: []string{"a"},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		o, ok := v.(map[string]any)
		if !ok || path == "acpx.request_cost" {
			return
		}
		for k, c := range o {
			if !snakeKey.MatchString(k) {
				t.Errorf("key %s.%s is not snake_case", path, k)
			}
			walk(path+"."+k, c)
		}
	}
	walk("", m)
	for _, k := range []string{"agent_session_id", "cumulative_cost", "title", "acpx"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %s missing", k)
		}
	}
	if cu, _ := m["acpx"].(map[string]any)["context_usage"].(map[string]any); cu["used"] != float64(1) || cu["size"] != float64(2) {
		t.Errorf("acpx.context_usage = %v", m["acpx"].(map[string]any)["context_usage"])
	}
	r.Acpx.ContextUsage.Used = -1
	r.Schema, r.SessionKey = Schema, "k"
	if err := r.Validate(); err == nil {
		t.Error("a negative acpx.context_usage.used validates")
	}
	u := m["cumulative_token_usage"].(map[string]any)
	for _, k := range []string{"cache_read_input_tokens", "cache_creation_input_tokens", "thought_tokens"} {
		if _, ok := u[k]; !ok {
			t.Errorf("token usage key %s missing (acpx name)", k)
		}
	}
}

// TestRecord_PreservesUnknownKeysNullsAndEmpties: keys we do not model, keys
// loaded as null, and present-but-empty values survive Load/Save exactly.
func TestRecord_PreservesUnknownKeysNullsAndEmpties(t *testing.T) {
	in := `{"schema":"acpx.session.v1","acpx_record_id":"k","acp_session_id":"s","agent_command":"c","cwd":"/",
	"name":null,"created_at":"t","last_used_at":"t","last_seq":0,"last_request_id":null,"closed":false,"closed_at":null,
	"pid":null,"protocol_version":0,"title":null,"messages":["Resume"],"updated_at":"t","cumulative_token_usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3,"cache_read_input_tokens":4},
	"request_token_usage":{},"last_agent_exit_code":null,"last_agent_exit_signal":"SIGTERM","imported_from":{"record_id":"x","cwd_original":"/a","exported_by":"acpx","exported_at":"t"},
	"acpx":{"available_model_names":{},"desired_mode_id":"auto","config_options":[{"id":"model","category":"model"}],"session_options":{"model":"m"},"current_mode_id":null}}`
	var r Record
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if string(r.Extra["last_agent_exit_signal"]) != `"SIGTERM"` || r.Acpx.Extra["desired_mode_id"] == nil {
		t.Errorf("unknown keys not in Extra: %v / %v", r.Extra, r.Acpx.Extra)
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	json.Unmarshal([]byte(in), &want)
	json.Unmarshal(out, &got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("round trip (-in +out):\n%s", d)
	}
	// A fresh record omits unset optional keys; title is null like acpx's.
	b, _ := json.Marshal(Record{SessionKey: "k"})
	var fresh map[string]any
	json.Unmarshal(b, &fresh)
	if v, ok := fresh["title"]; !ok || v != nil {
		t.Errorf("fresh title = %v (present %v), want null", v, ok)
	}
	for _, k := range []string{"pid", "closed_at", "acpx", "name", "event_log", "protocol_version"} {
		if _, ok := fresh[k]; ok {
			t.Errorf("fresh record has key %s", k)
		}
	}
}

func TestValidateMessages(t *testing.T) {
	good := []string{
		`[]`, `["Resume"]`,
		`[{"User":{"id":"u","content":[{"Text":"hi"},{"Mention":{"uri":"file:///a","content":"x"}},{"Image":{"source":"b64","size":null}},{"Audio":{"source":"s","mime_type":"audio/wav"}}]}}]`,
		`[{"Agent":{"content":[{"Text":"a"},{"Thinking":{"text":"t","signature":null}},{"RedactedThinking":"r"},{"ToolUse":{"id":"1","name":"n","raw_input":"{}","input":null,"is_input_complete":true}}],"tool_results":{"1":{"tool_use_id":"1","tool_name":"n","is_error":false,"content":{"Text":"ok"}}}}}]`,
	}
	bad := []string{
		`{}`, `[1]`, `["resume"]`, `[{"User":{"content":[]}}]`, `[{"User":{"id":"u","content":[{"Text":1}]}}]`,
		`[{"Agent":{"content":[]}}]`, `[{"Agent":{"content":[{"ToolUse":{"id":"1","name":"n","raw_input":"{}","is_input_complete":true}}],"tool_results":{}}}]`,
		`[{"Agent":{"content":[],"tool_results":{"1":{"tool_use_id":"1","tool_name":"n","is_error":false,"content":{}}}}}]`,
		`[{"User":{"id":"u","content":[{"Image":{"source":"s","size":{"width":1}}}]}}]`,
	}
	for _, g := range good {
		if err := ValidateMessages(json.RawMessage(g)); err != nil {
			t.Errorf("ValidateMessages(%s) = %v", g, err)
		}
	}
	for _, b := range bad {
		if err := ValidateMessages(json.RawMessage(b)); err == nil {
			t.Errorf("ValidateMessages(%s) accepted", b)
		}
	}
}
