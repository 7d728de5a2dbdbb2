package e2e

// The real codex-acp end to end, against the loopback model stub.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/modelstub"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// TestE2E_CodexSessionLifecycle is the main end-to-end run: the built binary
// over stdio with the real codex-acp: open → prompt → verbatim updates with
// gap-free seq → end_turn → status → close with a complete proof → nothing
// alive in /proc → reopen resumes the same ACP session → shutdown exits 0;
// and the launch secret appears nowhere (docs/rules.md#r3).
func TestE2E_CodexSessionLifecycle(t *testing.T) {
	agent, codexHome, _ := codexEnv(t)
	stateDir, work := t.TempDir(), t.TempDir()
	secret := "sk-e2e-secret-" + randHex(12)
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	s := startSidecar(t, "--state-dir", stateDir)
	init := s.initialize(false)
	if caps, _ := init["capabilities"].(map[string]any); caps["containment"] == "" {
		t.Fatalf("initialize reports no containment: %v", init)
	}
	openParams := map[string]any{"sessionKey": "codex run 1", "agent": "codex", "command": map[string]any{"path": agent},
		"cwd": work, "env": map[string]string{"OPENAI_API_KEY": secret, "CODEX_HOME": codexHome, "HOME": codexHome, "ACPX_TEST_MARK": mark}}
	var open openResult
	s.mustCall("session/open", openParams, &open)
	if open.Agent.Name != "codex-acp" || open.Identity.BackendSessionID == "" || open.Identity.SessionKey != "codex run 1" || open.Resumed {
		t.Fatalf("unexpected open result: %+v", open)
	}
	if len(markedPids(mark, "")) == 0 {
		t.Fatalf("no live process carries the marker after open: the leak scan would be blind")
	}

	var res struct {
		RequestID  string `json:"requestId"`
		Status     string `json:"status"`
		StopReason string `json:"stopReason"`
	}
	s.mustCall("session/prompt", map[string]any{"session": open.Session, "requestId": "t1", "prompt": "say hello"}, &res)
	if res.Status != "completed" || res.StopReason != "end_turn" || res.RequestID != "t1" {
		t.Fatalf("turn result: %+v", res)
	}
	ups := updatesOf(s, open.Session)
	var text strings.Builder
	kinds := map[string]bool{}
	for i, u := range ups {
		if u.Seq != uint64(i+1) {
			t.Fatalf("seq gap: update %d has seq %d", i, u.Seq)
		}
		var head struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(u.Update, &head); err != nil {
			t.Fatal(err)
		}
		kinds[head.Kind] = true
		if head.Kind == "agent_message_chunk" {
			if u.RequestID == nil || *u.RequestID != "t1" {
				t.Errorf("turn update without requestId t1: %s", u.Update)
			}
			text.WriteString(head.Content.Text)
		}
	}
	if text.String() != modelstub.HelloText {
		t.Errorf("streamed text %q, want %q", text.String(), modelstub.HelloText)
	}
	if !kinds["usage_update"] {
		t.Errorf("no usage_update forwarded; kinds %v", kinds)
	}

	var st struct {
		State         string `json:"state"`
		LastRequestID string `json:"lastRequestId"`
		Identity      struct {
			BackendSessionID string `json:"backendSessionId"`
		} `json:"identity"`
		Process struct {
			Alive bool `json:"alive"`
		} `json:"process"`
	}
	s.mustCall("session/status", map[string]any{"session": open.Session}, &st)
	if st.State != "open" || st.LastRequestID != "t1" || st.Identity.BackendSessionID != open.Identity.BackendSessionID || !st.Process.Alive {
		t.Fatalf("status: %+v", st)
	}

	var closed struct {
		Proof proof `json:"proof"`
	}
	s.mustCall("session/close", map[string]any{"session": open.Session, "reason": "e2e done"}, &closed)
	if !closed.Proof.Complete || !closed.Proof.Verified.TreeEmpty || closed.Proof.Origin != "close" {
		t.Fatalf("close proof not complete: %+v", closed.Proof)
	}
	hasProvider := false
	for _, p := range closed.Proof.Processes {
		hasProvider = hasProvider || (p.Role == "provider" && p.Pid == open.Process.Pid)
	}
	if !hasProvider {
		t.Errorf("proof does not list the provider pid %d: %+v", open.Process.Pid, closed.Proof.Processes)
	}
	if left := markedPids(mark, work); len(left) != 0 {
		t.Fatalf("complete proof but processes alive: %v", left)
	}
	rec, err := os.ReadFile(filepath.Join(stateDir, "sessions", "codex%20run%201.json"))
	if err != nil {
		t.Fatalf("record not at the encodeURIComponent path: %v", err)
	}
	if !strings.Contains(string(rec), `"closed": true`) && !strings.Contains(string(rec), `"closed":true`) {
		t.Errorf("record not marked closed")
	}

	// Reopen the same key: resumes the same ACP session.
	var again openResult
	s.mustCall("session/open", openParams, &again)
	if !again.Resumed || again.Identity.BackendSessionID != open.Identity.BackendSessionID {
		t.Fatalf("reopen did not resume the same session: %+v (first %s)", again, open.Identity.BackendSessionID)
	}
	if n := len(updatesOf(s, again.Session)); n != 0 {
		t.Errorf("%d updates forwarded for the resumed session before any prompt (replay leaked)", n)
	}
	s.mustCall("session/close", map[string]any{"session": again.Session, "reason": "e2e done"}, &closed)
	if !closed.Proof.Complete {
		t.Fatalf("second close proof not complete: %+v", closed.Proof)
	}
	proofs, status := s.shutdownAndExit()
	if status != 0 {
		t.Errorf("exit status %d after shutdown, want 0 (proofs %+v)", status, proofs)
	}
	waitNoMarked(t, mark, work, 5*time.Second)
	grepSecret(t, secret, stateDir, s.allOutput())
}

// TestE2E_CodexToolCallApprovedByPolicy: a model reply with an exec_command
// tool call is approved by permissionMode approve-all; the command runs (the
// file exists), the permission decision is audited, and close leaves nothing
// alive.
func TestE2E_CodexToolCallApprovedByPolicy(t *testing.T) {
	agent, codexHome, _ := codexEnv(t)
	stateDir, work := t.TempDir(), t.TempDir()
	mark := testmark.New()
	killMarkedOnCleanup(t, mark)
	s := startSidecar(t, "--state-dir", stateDir)
	s.initialize(false)
	var open openResult
	s.mustCall("session/open", map[string]any{"sessionKey": "tool", "agent": "codex", "command": map[string]any{"path": agent},
		"cwd": work, "permissionMode": "approve-all",
		"env": map[string]string{"OPENAI_API_KEY": "sk-" + randHex(8), "CODEX_HOME": codexHome, "HOME": codexHome, "ACPX_TEST_MARK": mark}}, &open)
	var res struct {
		Status string `json:"status"`
	}
	s.mustCall("session/prompt", map[string]any{"session": open.Session, "requestId": "t1",
		"prompt": "make a file\nrun: echo hi > made.txt"}, &res)
	if res.Status != "completed" {
		t.Fatalf("turn: %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(work, "made.txt"))
	if err != nil || strings.TrimSpace(string(b)) != "hi" {
		t.Fatalf("approved command did not run: %v %q", err, b)
	}
	perm := s.waitNote("session/permission", 5*time.Second, nil)
	var pn struct {
		Kind     string `json:"kind"`
		Decision string `json:"decision"`
		OptionID string `json:"optionId"`
	}
	_ = json.Unmarshal(perm, &pn)
	if pn.Kind != "execute" || pn.Decision != "approved" || pn.OptionID == "" {
		t.Errorf("permission audit: %s", perm)
	}
	kinds := map[string]bool{}
	for _, u := range updatesOf(s, open.Session) {
		var h struct {
			Kind string `json:"sessionUpdate"`
		}
		_ = json.Unmarshal(u.Update, &h)
		kinds[h.Kind] = true
	}
	// codex-acp 0.16.0 always reports the tool_call; its completing
	// tool_call_update is sometimes never sent when the model's next reply
	// comes fast (seen here on the wire, no frame discarded by the sidecar).
	if !kinds["tool_call"] {
		t.Errorf("tool call update missing: %v", kinds)
	}
	var closed struct {
		Proof proof `json:"proof"`
	}
	s.mustCall("session/close", map[string]any{"session": open.Session, "reason": "done"}, &closed)
	if !closed.Proof.Complete {
		t.Fatalf("proof: %+v", closed.Proof)
	}
	if left := markedPids(mark, work); len(left) != 0 {
		t.Fatalf("complete proof but processes alive: %v", left)
	}
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}
