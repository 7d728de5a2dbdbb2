package e2e

// Lifecycle: initialize, shutdown, exit and stdin EOF (docs/protocol.md,
// Lifecycle and Lifecycle methods; docs/rules.md#r21).

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

// TestProtocol_RequestBeforeInitializeIsNotInitialized: any request before
// initialize gets -32002; a notification before it is dropped
// (docs/protocol.md, Lifecycle).
func TestProtocol_RequestBeforeInitializeIsNotInitialized(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	s.send(map[string]any{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": map[string]any{"id": 1}})
	wantError(t, "session/list before initialize", s.call("session/list", map[string]any{}), -32002, "")
	wantError(t, "session/open before initialize", s.call("session/open", map[string]any{}), -32002, "")
	s.initialize(false)
	listSessions(s)
}

// TestProtocol_SecondInitializeIsInvalidRequest: a second initialize gets
// -32600 (docs/protocol.md, Lifecycle).
func TestProtocol_SecondInitializeIsInvalidRequest(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	res := s.initialize(false)
	if v, _ := res["protocolVersion"].(float64); v != 1 {
		t.Errorf("initialize protocolVersion %v, want 1", res["protocolVersion"])
	}
	f := s.call("initialize", map[string]any{"protocolVersion": 1, "clientInfo": map[string]string{"name": "e2e", "version": "0"}})
	wantError(t, "second initialize", f, -32600, "")
	listSessions(s)
}

// TestProtocol_UnsupportedProtocolVersion: initialize with a version other
// than 1 gets -32602 with data.supported [1] (docs/protocol.md, initialize);
// the connection stays uninitialized, so a correct initialize then succeeds.
func TestProtocol_UnsupportedProtocolVersion(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	f := s.call("initialize", map[string]any{"protocolVersion": 2, "clientInfo": map[string]string{"name": "e2e", "version": "0"}})
	d := wantError(t, "initialize v2", f, -32602, "")
	if len(d.Supported) != 1 || d.Supported[0] != 1 {
		t.Errorf("data.supported %v, want [1] (data %s)", d.Supported, f.Error.Data)
	}
	s.initialize(false)
	listSessions(s)
}

// TestProtocol_UnknownMethod: an unknown method gets -32601
// (docs/protocol.md, Error model).
func TestProtocol_UnknownMethod(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir())
	s.initialize(false)
	wantError(t, "session/frobnicate", s.call("session/frobnicate", map[string]any{}), -32601, "")
	listSessions(s)
}

// TestShutdown_ClosesLiveSessionsAndExitsZero: shutdown closes every live
// session and returns their complete proofs; exit then ends the process with
// status 0 (docs/protocol.md, shutdown and exit).
func TestShutdown_ClosesLiveSessionsAndExitsZero(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	a := e.open(s, "shut-a", "")
	b := e.open(s, "shut-b", "")
	proofs, status := s.shutdownAndExit()
	if status != 0 {
		t.Errorf("exit status %d, want 0", status)
	}
	seen := map[string]bool{}
	for _, p := range proofs {
		if !p.Complete || p.Origin != "shutdown" {
			t.Errorf("shutdown proof for %s: complete %v origin %q, want complete shutdown", p.Session, p.Complete, p.Origin)
		}
		seen[p.Session] = true
	}
	if len(proofs) != 2 || !seen[a.Session] || !seen[b.Session] {
		t.Errorf("shutdown returned %d proofs for %v, want one each for %s and %s", len(proofs), seen, a.Session, b.Session)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestShutdown_StdinEOFCleansUp: stdin EOF with a live session is shutdown
// then exit: the process exits (status 0, the proof being complete) and
// nothing it launched survives (docs/protocol.md, Lifecycle).
func TestShutdown_StdinEOFCleansUp(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	e.open(s, "eof", "")
	if err := s.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if status := s.exitStatus(30 * time.Second); status != 0 {
		t.Errorf("exit status %d after stdin EOF, want 0\nstderr:\n%s", status, s.stderrText())
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestShutdown_StdinEOFMidTurnAnswersTheTurn: stdin EOF is shutdown then
// exit (docs/protocol.md, Lifecycle), so a turn still running gets its
// answer (cancelled) on stdout before the sidecar exits, and the tree is
// gone.
func TestShutdown_StdinEOFMidTurnAnswersTheTurn(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	var open openResult
	s.mustCall("session/open", e.openParams("eof", "slow-turn=60000"), &open)
	turn := s.start("session/prompt", map[string]any{"session": open.Session, "requestId": "t1", "prompt": "wait"})
	// The turn must be running before stdin ends.
	s.waitFor(10*time.Second, "the turn to start", func() bool {
		for _, n := range s.notes {
			var u updateNote
			if n.Method == "session/update" && json.Unmarshal(n.Params, &u) == nil && u.RequestID != nil && *u.RequestID == "t1" {
				return true
			}
		}
		return false
	})
	if err := s.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	f := s.await(turn, 30*time.Second)
	var res struct {
		Status string `json:"status"`
	}
	if f.Error != nil || json.Unmarshal(f.Result, &res) != nil || res.Status != "cancelled" {
		t.Fatalf("turn answer after stdin EOF: %+v %s", f.Error, f.Result)
	}
	<-s.exited
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestShutdown_HostThatStopsReadingCannotPinTheSidecar: a host that stops
// reading stdout blocks every write; on SIGTERM the sidecar still exits
// (after its shutdown bound plus a margin) and, because every guardian's
// owner pipe closes with it (in process-table mode: because it kills the
// trees before it goes), nothing of the session survives.
func TestShutdown_HostThatStopsReadingCannotPinTheSidecar(t *testing.T) {
	startOrphanReaper(t)
	e := newFaultEnv(t)
	cmd := exec.Command(sidecarBin, withContainment([]string{"--state-dir", e.stateDir, "--shutdown-ms", "500"})...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe() // never read after the open's answer
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	trackChild(cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	schema, err := wirecheck.Default()
	if err != nil {
		t.Fatal(err)
	}
	wire := schema.NewConn() // this host's frames are checked like the harness's
	send := func(m map[string]any) {
		b, _ := json.Marshal(m)
		if verr := wire.Check(wirecheck.FromHost, b); verr != nil {
			t.Error(verr)
		}
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": 1}})
	send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "session/open", "params": e.openParams("stuck", "flood=2000000")})
	// Read until the open's answer, then stop reading for good.
	r := bufio.NewReader(stdout)
	var session string
	for session == "" {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the open's answer: %v", err)
		}
		if verr := wire.Check(wirecheck.FromSidecar, line); verr != nil {
			t.Error(verr)
		}
		var f struct {
			ID     int `json:"id"`
			Result struct {
				Session string `json:"session"`
			} `json:"result"`
		}
		if json.Unmarshal(line, &f) == nil && f.ID == 2 {
			session = f.Result.Session
		}
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": map[string]any{"session": session, "requestId": "t", "prompt": "go"}})
	if len(markedPids(e.mark, "")) == 0 {
		t.Fatalf("no provider alive")
	}
	// Wait until the stdout pipe is full: from now on every write of the
	// sidecar blocks (bounded wait on the pipe's fill level). The sidecar
	// writes a batch of frames at once, and a pipe holds at most 16 pages
	// however full each is, so "full" is also: well filled and a sidecar
	// thread asleep in the kernel's pipe write.
	fd := int(stdout.(*os.File).Fd())
	for deadline := time.Now().Add(20 * time.Second); ; {
		n, err := pipeBytes(fd)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 64<<10-4096 || r.Buffered() > 0 && n >= 60<<10 || n >= 32<<10 && blockedInPipeWrite(cmd.Process.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stdout pipe never filled (%d bytes)", n)
		}
		time.Sleep(10 * time.Millisecond) // polling the pipe level, bounded
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the sidecar did not exit while its host was not reading")
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// blockedInPipeWrite reports whether a thread of pid sleeps in the
// kernel's pipe write (/proc/<pid>/task/*/wchan: pipe_write, or
// anon_pipe_write on newer kernels).
func blockedInPipeWrite(pid int) bool {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "wchan"))
	for _, p := range tasks {
		if b, err := os.ReadFile(p); err == nil && strings.HasSuffix(string(b), "pipe_write") {
			return true
		}
	}
	return false
}

// TestShutdown_ExitRightBehindShutdownWaitsForIt: `exit` sent in the same
// write as `shutdown` (as a host piping frames does) does not cut the
// shutdown short: the shutdown answer with a complete proof is written and
// the exit status is 0 (docs/protocol.md, Lifecycle).
func TestShutdown_ExitRightBehindShutdownWaitsForIt(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	e.open(s, "busy", "normal")
	s.sendRaw([]byte(`{"jsonrpc":"2.0","id":"bye","method":"shutdown"}` + "\n" + `{"jsonrpc":"2.0","method":"exit"}` + "\n"))
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("sidecar did not exit")
	}
	f := s.replies[`"bye"`]
	var res struct {
		Proofs []proof `json:"proofs"`
	}
	if f == nil || f.Error != nil || json.Unmarshal(f.Result, &res) != nil || len(res.Proofs) != 1 || !res.Proofs[0].Complete {
		t.Fatalf("shutdown answer before exit: %+v", f)
	}
	if s.exitErr != nil {
		t.Fatalf("exit status after a complete shutdown: %v, want 0", s.exitErr)
	}
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestCleanup_SealedSupervisorLaunchesNothing (docs/rules.md#r21): shutdown
// seals the supervisor; an open still verifying its command (sha256 of a 128
// MiB sparse-padded copy of the agent, which takes the sidecar a while) when
// shutdown arrives reaches the spawn only after the seal, and that spawn
// fails: SHUTTING_DOWN with a complete "nothing was launched" proof, the
// agent never ran, and the sidecar exits 0.
func TestCleanup_SealedSupervisorLaunchesNothing(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	big := filepath.Join(t.TempDir(), "faultagent-padded")
	bin, err := os.ReadFile(faultBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 128<<20); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	rec := seedRecordFile(t)
	p := withHostHome(e.openParams("after-seal", ""))
	p["command"] = map[string]any{"path": big, "args": []string{"--mode", "record=" + rec}, "sha256": hex.EncodeToString(h.Sum(nil))}
	openID := s.start("session/open", p)
	shutID := s.start("shutdown", map[string]any{})
	d := seedWantError(t, "open racing shutdown", s.await(openID, 30*time.Second), -32000, "SHUTTING_DOWN")
	if d.Cleanup == nil || !d.Cleanup.Complete || d.Cleanup.Verified.Method != "nothing was launched" {
		t.Errorf("data.cleanup %+v: want complete, nothing launched", d.Cleanup)
	}
	decodeResult[map[string]any](t, "shutdown", s.await(shutID, 30*time.Second))
	s.send(map[string]any{"jsonrpc": "2.0", "method": "exit"})
	if st := s.exitStatus(30 * time.Second); st != 0 {
		t.Errorf("exit status %d, want 0", st)
	}
	if msgs := seedReadAgent(t, rec); len(msgs) != 0 {
		t.Errorf("the agent ran after the supervisor was sealed")
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
