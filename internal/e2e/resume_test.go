package e2e

import (
	"testing"
	"time"
)

// resumeParams are fault-agent open params whose agent persists sessions
// in agentState (so a fresh agent process can resume them) with modes.
func resumeParams(e *faultEnv, key, agentState, modes string) map[string]any {
	p := withHostHome(e.openParams(key, modes))
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", modes, "--state-dir", agentState}}
	return p
}

// TestResume_LoadAnswerWithoutModesStillResumes (docs/rules.md#p3): an agent whose
// session/load answer carries no modes still resumes when the host never
// pinned a mode: what the record merely remembers of the agent's last mode
// is not re-applied. A mode the host did pin is verified, so the same
// answer then fails UNSUPPORTED_CONTROL, with the reopened tree cleaned up.
func TestResume_LoadAnswerWithoutModesStillResumes(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)

	p := resumeParams(e, "no-modes", agentState, "load-without-modes")
	var open struct {
		Session  string `json:"session"`
		Identity struct {
			BackendSessionID string `json:"backendSessionId"`
		} `json:"identity"`
		Modes *struct {
			Current string `json:"currentModeId"`
		} `json:"modes"`
	}
	s.mustCall("session/open", p, &open)
	if open.Modes == nil || open.Modes.Current == "" {
		t.Fatalf("session/new reported no mode: the record would remember none and the test prove nothing")
	}
	// A session that never ran a turn is not resumed (nothing to resume).
	s.mustCall("session/prompt", map[string]any{"session": open.Session, "requestId": "t1", "prompt": "hi"}, nil)
	s.mustCall("session/close", map[string]any{"session": open.Session, "reason": "pause"}, nil)
	var again struct {
		Session  string `json:"session"`
		Resumed  bool   `json:"resumed"`
		Identity struct {
			BackendSessionID string `json:"backendSessionId"`
		} `json:"identity"`
	}
	s.mustCall("session/open", p, &again)
	if !again.Resumed || again.Identity.BackendSessionID != open.Identity.BackendSessionID {
		t.Fatalf("reopen: resumed=%v backend %q, want the same session %q", again.Resumed, again.Identity.BackendSessionID, open.Identity.BackendSessionID)
	}

	// A session whose host pinned its mode: the resume must verify it.
	pinned := resumeParams(e, "pinned-mode", agentState, "load-without-modes")
	var po struct {
		Session string `json:"session"`
	}
	s.mustCall("session/open", pinned, &po)
	s.mustCall("session/setMode", map[string]any{"session": po.Session, "mode": "plan"}, nil)
	s.mustCall("session/prompt", map[string]any{"session": po.Session, "requestId": "t1", "prompt": "hi"}, nil)
	s.mustCall("session/close", map[string]any{"session": po.Session, "reason": "pause"}, nil)
	f := s.call("session/open", pinned)
	if f.Error == nil || f.Error.dataCode() != "UNSUPPORTED_CONTROL" {
		t.Fatalf("resume with a pinned mode the agent no longer reports: %+v %s, want UNSUPPORTED_CONTROL", f.Error, f.Result)
	}
	if pr := proofOf(t, f.Error); !pr.Complete {
		t.Errorf("the failed resume's proof is not complete: %+v", pr)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestResume_SessionWithoutATurnOpensANewSession: a record whose session
// never ran a turn is not resumed: the reopen creates a new ACP session
// (resumed false), since there is no history and some agents cannot resume
// such a session (codex-acp 2.x; docs/agents.md).
func TestResume_SessionWithoutATurnOpensANewSession(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	rec := seedRecordFile(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := resumeParams(e, "empty", agentState, "record="+rec)
	first := seedMustOpen(s, p)
	s.mustCall("session/close", map[string]any{"session": first.Session, "reason": "pause"}, nil)
	second := seedMustOpen(s, p)
	if second.Resumed || second.Identity.BackendSessionID == first.Identity.BackendSessionID {
		t.Fatalf("reopen of a turn-less session: %+v, want a new session", second)
	}
	for _, m := range seedReadAgent(t, rec) {
		if m.Dir == "recv" && (m.Msg.Method == "session/load" || m.Msg.Method == "session/resume") {
			t.Fatalf("the agent was asked to %s a session that never ran a turn", m.Msg.Method)
		}
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestResume_PrefersSessionResumeOverLoad (docs/protocol.md §11; acpx#332): where the
// agent advertises sessionCapabilities.resume, a reopen sends ACP
// session/resume, never session/load, and resumes the same session.
func TestResume_PrefersSessionResumeOverLoad(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	rec := seedRecordFile(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := resumeParams(e, "resume", agentState, "resume,record="+rec)
	first := seedMustOpen(s, p)
	s.mustCall("session/prompt", map[string]any{"session": first.Session, "requestId": "t1", "prompt": "hi"}, nil)
	s.mustCall("session/close", map[string]any{"session": first.Session, "reason": "pause"}, nil)
	second := seedMustOpen(s, p)
	if !second.Resumed || second.Identity.BackendSessionID != first.Identity.BackendSessionID {
		t.Fatalf("reopen: %+v, want resumed %q", second, first.Identity.BackendSessionID)
	}
	var resumes, loads int
	for _, m := range seedReadAgent(t, rec) {
		if m.Dir != "recv" {
			continue
		}
		switch m.Msg.Method {
		case "session/resume":
			resumes++
		case "session/load":
			loads++
		}
	}
	if resumes != 1 || loads != 0 {
		t.Fatalf("the agent received %d session/resume and %d session/load, want 1 and 0", resumes, loads)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
