package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// capData is the part of an open's error data the capacity tests read.
type capData struct {
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable"`
	Limit     *int   `json:"limit"`
	Resource  string `json:"resource"`
	Cleanup   *proof `json:"cleanup"`
}

// prlimitNofile is the wrapper that starts a sidecar with RLIMIT_NOFILE n
// (soft and hard).
func prlimitNofile(t *testing.T, n int) []string {
	t.Helper()
	p, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) is needed to lower the sidecar's descriptor limit: %v", err)
	}
	return []string{p, "--nofile=" + strconv.Itoa(n) + ":" + strconv.Itoa(n), "--"}
}

// maxSessionsOf is initialize's capabilities.maxSessions.
func maxSessionsOf(t *testing.T, init map[string]any) int {
	t.Helper()
	caps, _ := init["capabilities"].(map[string]any)
	n, ok := caps["maxSessions"].(float64)
	if !ok {
		t.Fatalf("initialize.capabilities has no maxSessions: %v", caps)
	}
	return int(n)
}

// openData opens key and returns the session id, or "" and the error data.
func openData(t *testing.T, s *sidecar, e *faultEnv, key string) (string, *capData) {
	t.Helper()
	f := s.call("session/open", e.openParams(key, ""))
	if f.Error == nil {
		var o openResult
		if err := json.Unmarshal(f.Result, &o); err != nil || o.Session == "" {
			t.Fatalf("open %s: result %s", key, f.Result)
		}
		return o.Session, nil
	}
	var d capData
	if err := json.Unmarshal(f.Error.Data, &d); err != nil {
		t.Fatalf("open %s: error data %s: %v", key, f.Error.Data, err)
	}
	if f.Error.Code != -32000 || (d.Code != "SIDECAR_AT_CAPACITY" && d.Code != "RESOURCE_EXHAUSTED") {
		t.Fatalf("open %s beyond capacity: error %d %q %s, want SIDECAR_AT_CAPACITY or RESOURCE_EXHAUSTED", key, f.Error.Code, f.Error.Message, f.Error.Data)
	}
	if d.Retryable == nil || !*d.Retryable {
		t.Errorf("open %s: %s is not retryable: %s", key, d.Code, f.Error.Data)
	}
	return "", &d
}

// fillUntilRefused opens sessions until one is refused (at most max
// opens) and checks the refusal launched nothing: the processes carrying
// the test's marker are the same before and after it.
func fillUntilRefused(t *testing.T, s *sidecar, e *faultEnv, prefix string, max int) ([]string, *capData) {
	t.Helper()
	var open []string
	for i := 0; i < max; i++ {
		before := len(markedPids(e.mark, ""))
		id, d := openData(t, s, e, prefix+strconv.Itoa(i))
		if d == nil {
			open = append(open, id)
			continue
		}
		if after := len(markedPids(e.mark, "")); after != before {
			t.Errorf("refused open %d left processes: %d marked before, %d after", i, before, after)
		}
		return open, d
	}
	t.Fatalf("%d opens were all admitted; want a refusal", max)
	return nil, nil
}

// TestCapacity_MaxSessions (docs/protocol.md §21): --max-sessions 3 is
// reported by initialize, the 4th open is SIDECAR_AT_CAPACITY (retryable,
// data.limit 3) and launches nothing, the three keep working, and after
// one closes the open succeeds.
func TestCapacity_MaxSessions(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e, "--max-sessions", "3")...)
	if n := maxSessionsOf(t, s.initialize(false)); n != 3 {
		t.Fatalf("initialize maxSessions = %d, want 3", n)
	}
	open, d := fillUntilRefused(t, s, e, "cap-", 10)
	if len(open) != 3 || d.Code != "SIDECAR_AT_CAPACITY" || d.Limit == nil || *d.Limit != 3 {
		t.Fatalf("after %d opens: refused %+v, want the 4th SIDECAR_AT_CAPACITY with data.limit 3", len(open), d)
	}
	if d.Cleanup != nil {
		t.Errorf("an at-capacity refusal created no session, yet carries a proof: %+v", d.Cleanup)
	}
	for i, id := range open {
		runTurn(t, s, id, "t"+strconv.Itoa(i), "hello")
	}
	closeProof(s, open[0], nil)
	id, d := openData(t, s, e, "cap-again")
	if d != nil {
		t.Fatalf("open after a close: %+v, want admitted", d)
	}
	runTurn(t, s, id, "t-again", "hello")
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCapacity_DescriptorLimit (docs/protocol.md §21): a sidecar started
// under RLIMIT_NOFILE 128 derives its --max-sessions from it and refuses
// the open beyond it retryably, launching nothing; earlier sessions keep
// working, and after two close opens succeed again.
func TestCapacity_DescriptorLimit(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecarVia(t, prlimitNofile(t, 128), seedArgs(e)...)
	max := maxSessionsOf(t, s.initialize(false))
	if max < 1 || max > 128/4 {
		t.Fatalf("initialize maxSessions = %d under a descriptor limit of 128", max)
	}
	open, d := fillUntilRefused(t, s, e, "fd-", 64)
	t.Logf("admitted %d of maxSessions %d, then %s (resource %q)", len(open), max, d.Code, d.Resource)
	if d.Code == "SIDECAR_AT_CAPACITY" && len(open) != max {
		t.Errorf("SIDECAR_AT_CAPACITY after %d sessions, maxSessions is %d", len(open), max)
	}
	wantExhaustedProof(t, d)
	runTurn(t, s, open[0], "t-first", "hello")
	runTurn(t, s, open[len(open)-1], "t-last", "hello")
	for _, id := range open[:2] {
		closeProof(s, id, nil)
	}
	for i := 0; i < 2; i++ {
		id, d := openData(t, s, e, "fd-again-"+strconv.Itoa(i))
		if d != nil {
			t.Fatalf("open %d after two closes: %+v, want admitted", i, d)
		}
		runTurn(t, s, id, "t-again", "hello")
	}
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestCapacity_ExhaustedDescriptors (docs/protocol.md §21): with
// --max-sessions far above what RLIMIT_NOFILE 64 holds, the open that
// runs out of descriptors is RESOURCE_EXHAUSTED (retryable, data.resource
// "fds") with a complete proof, never COMMAND_NOT_EXECUTABLE; nothing of
// it is left, the earlier sessions keep working, and after closing some
// the open succeeds.
func TestCapacity_ExhaustedDescriptors(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecarVia(t, prlimitNofile(t, 64), seedArgs(e, "--max-sessions", "1000")...)
	s.initialize(false)
	open, d := fillUntilRefused(t, s, e, "ex-", 64)
	t.Logf("admitted %d, then %s (resource %q)", len(open), d.Code, d.Resource)
	if d.Code != "RESOURCE_EXHAUSTED" || d.Resource != "fds" {
		t.Fatalf("refusal %+v, want RESOURCE_EXHAUSTED with data.resource fds", d)
	}
	wantExhaustedProof(t, d)
	if len(open) == 0 {
		t.Fatalf("no session fit under a descriptor limit of 64")
	}
	runTurn(t, s, open[0], "t-first", "hello")
	for _, id := range open[:min(2, len(open))] {
		closeProof(s, id, nil)
	}
	id, d2 := openData(t, s, e, "ex-again")
	if d2 != nil {
		t.Fatalf("open after closes: %+v, want admitted", d2)
	}
	runTurn(t, s, id, "t-again", "hello")
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	if _, err := os.Stat(e.stateDir); err != nil {
		t.Fatal(err)
	}
}

// wantExhaustedProof checks a RESOURCE_EXHAUSTED refusal names its
// resource and carries a complete proof.
func wantExhaustedProof(t *testing.T, d *capData) {
	t.Helper()
	if d.Code != "RESOURCE_EXHAUSTED" {
		return
	}
	switch d.Resource {
	case "fds", "processes", "memory":
	default:
		t.Errorf("RESOURCE_EXHAUSTED data.resource = %q", d.Resource)
	}
	if d.Cleanup == nil || !d.Cleanup.Complete || !d.Cleanup.Verified.TreeEmpty {
		t.Errorf("RESOURCE_EXHAUSTED without a complete proof: %+v", d.Cleanup)
	}
}

// TestCapacity_EveryDescriptorLimitIsRetryable: whichever admission step
// the descriptors run out in — the Landlock ruleset of the default
// sandbox included, whose library reports EMFILE in words only — the
// refusal is retryable RESOURCE_EXHAUSTED with data.resource "fds", never
// PLATFORM_UNSUPPORTED (docs/protocol.md §21). Limits 44–49 put the
// exhaustion at each step (a fresh-user trial saw 47 and 48 refused as
// an unsupported sandbox).
func TestCapacity_EveryDescriptorLimitIsRetryable(t *testing.T) {
	for n := 44; n <= 49; n++ {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecarVia(t, prlimitNofile(t, n), seedArgs(e, "--max-sessions", "1000")...)
			s.initialize(false)
			open, d := fillUntilRefused(t, s, e, "lim-", 64)
			if d.Code != "RESOURCE_EXHAUSTED" || d.Resource != "fds" || d.Retryable == nil || !*d.Retryable {
				t.Fatalf("after %d sessions: refusal %+v, want retryable RESOURCE_EXHAUSTED fds", len(open), d)
			}
			wantExhaustedProof(t, d)
			if _, status := s.shutdownAndExit(); status != 0 {
				t.Errorf("exit status %d", status)
			}
			waitNoMarked(t, e.mark, e.work, 10*time.Second)
		})
	}
}
