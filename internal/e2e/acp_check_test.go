package e2e

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

// Every frame the sidecar sends an agent that records them (the fault
// agent's mode record=) is checked against the official ACP v1 schema
// (testdata/acp/schema.v1.json) when a test reads the record: requests
// and notifications by method, responses by the method of the agent's
// request they answer. A violation fails the test.

// acpChecked remembers, per test and record file, how many lines were
// checked already (records are read again and again while polling).
var acpChecked sync.Map // key: test name + "\x00" + path -> int

// checkACPRecord validates the recv lines of msgs (one record, in order)
// not checked yet.
func checkACPRecord(t testing.TB, path string, msgs []seedAgentMsg) {
	t.Helper()
	s, err := wirecheck.ACPDefault()
	if err != nil {
		t.Fatalf("ACP schema: %v", err)
	}
	key := t.Name() + "\x00" + path
	done := 0
	if v, ok := acpChecked.Load(key); ok {
		done = v.(int)
	}
	// The agent's own requests, by id, from the whole record (a response
	// follows its request).
	agentReqs := map[string]string{}
	for i, m := range msgs {
		if m.Dir == "sent" && m.Msg.Method != "" && len(m.Msg.ID) > 0 {
			agentReqs[string(m.Msg.ID)] = m.Msg.Method
		}
		if i < done || m.Dir != "recv" {
			continue
		}
		var line struct {
			Msg json.RawMessage `json:"msg"`
		}
		if err := json.Unmarshal([]byte(m.raw), &line); err != nil {
			t.Errorf("agent record line: %v", err)
			continue
		}
		method := ""
		if m.Msg.Method == "" {
			method = agentReqs[string(m.Msg.ID)]
		}
		if err := s.CheckClientFrame(line.Msg, method); err != nil {
			t.Errorf("a frame the sidecar sent the agent is not valid ACP v1: %v\nframe: %s", err, truncate(string(line.Msg), 600))
		}
	}
	if len(msgs) > done {
		acpChecked.Store(key, len(msgs))
	}
}

// acpCheckedParams are e.openParams(key, modes) with the fault agent
// recording what it receives (record=); when the test ends, every frame
// the sidecar sent that agent is checked against the ACP v1 schema
// (checkACPRecord, through seedReadAgent).
func acpCheckedParams(t *testing.T, e *faultEnv, key, modes string) map[string]any {
	t.Helper()
	rec := seedRecordFile(t)
	t.Cleanup(func() { seedReadAgent(t, rec) }) // before the record's directory is removed
	return seedOpenParams(e, key, rec, modes)
}

// acpTapped launches a's sessions through the fault agent's __tap-exec
// (a recording pipe in front of the real agent) and, when the test ends,
// checks every frame the sidecar sent the agent against the ACP v1 schema
// (checkACPRecord, through seedReadAgent), and that frames were recorded.
func acpTapped(t *testing.T, a *agentRun) {
	t.Helper()
	// In the session's cwd: writable under the default sandbox (the real
	// agents get private HOMEs, so seedRecordFile's directory is not).
	a.tapRecord = filepath.Join(a.work, ".acp-tap.jsonl")
	t.Cleanup(func() {
		msgs := seedReadAgent(t, a.tapRecord)
		recv := 0
		for _, m := range msgs {
			if m.Dir == "recv" {
				recv++
			}
		}
		t.Logf("the tap recorded %d lines, %d the sidecar sent the agent (checked against the ACP v1 schema)", len(msgs), recv)
		if n := len(seedRecv(msgs, "initialize")); n == 0 {
			t.Errorf("the tap recorded no initialize: the real agent's frames went unchecked")
		}
	})
}
