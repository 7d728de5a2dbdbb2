// Package e2e drives the built acpx-sidecar binary over its stdio, the way
// a host does: TestMain builds the binaries once, each test spawns a
// sidecar with pipes, speaks docs/protocol.md, and checks real outcomes —
// frames on the wire, files on disk, the process table.
//
// The tests are grouped by feature (admission, handshake, cleanup, close,
// containment, lifecycle, framing, turns, permissions, controls, status,
// recovery, agents); shared steps live in harness_test.go and the
// *_steps_test.go files.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

var (
	binDir     string
	sidecarBin string
	faultBin   string
	repoRoot   string
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	dir, err := os.MkdirTemp("", "acpx-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	sidecarBin = filepath.Join(dir, "acpx-sidecar")
	faultBin = filepath.Join(dir, "faultagent")
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/acpx-sidecar", "./internal/faultagent")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building binaries:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopOrphanReaper()
	os.RemoveAll(dir)
	if code == 0 {
		// Every harness goroutine ends with its sidecar (checked by goleak).
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// frame is one JSON-RPC message from the sidecar.
type frame struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *rpcError) dataCode() string {
	var d struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Code
}

// sidecar is one running acpx-sidecar under test, driven through the
// public client package (spawn, framing, ids, answering sidecar requests);
// the harness keeps every frame it sees through the client's frame tap
// (Options.OnFrame), validates each against docs/protocol.schema.json, and
// serves the tests' raw-frame assertions from them.
type sidecar struct {
	t      testing.TB
	c      *client.Client
	cmd    procHandle     // cmd.Process: the sidecar process
	stdin  io.WriteCloser // Write: raw bytes to stdin; Close: stdin EOF
	stderr *bytes.Buffer
	errMu  sync.Mutex

	mu      sync.Mutex
	cond    *sync.Cond
	nextID  int // ids tests pick for raw requests (from rawIDBase up)
	replies map[string]*frame
	notes   []*frame
	raw     [][]byte
	eof     bool
	exited  chan struct{}
	exitErr error

	// onRequest answers sidecar → host requests (session/requestPermission):
	// it returns the result, or nil when the test answers later itself with
	// send({"id": f.ID, "result"|"error": …}).
	onRequest func(f *frame) any
	// later holds the sidecar requests the test answers itself, by id.
	later map[string]chan map[string]json.RawMessage

	// wire validates every frame, both directions, against
	// docs/protocol.schema.json; a violation fails the test.
	wire *wirecheck.Conn
	// hostUnchecked: the test writes host frames that break the schema on
	// purpose (bad answers); only the sidecar's frames are checked.
	hostUnchecked atomic.Bool
}

// rawIDBase is where ids that tests choose for raw requests start, far
// from the client's own (1, 2, …), so the two never collide.
const rawIDBase = 1 << 20

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
	// wake, if set, is called after each write (outside mu): waitStderr's
	// waiters look again.
	wake func()
}

func (l lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	n, err := l.b.Write(p)
	l.mu.Unlock()
	if l.wake != nil {
		l.wake()
	}
	return n, err
}

// waitStderr waits (up to d) until the sidecar's stderr holds text, and
// reports whether it did: a start-up log line is written before the first
// answer, but read from the pipe by another goroutine.
func (s *sidecar) waitStderr(d time.Duration, text string) bool {
	return s.waitUntil(d, func() bool {
		s.errMu.Lock()
		defer s.errMu.Unlock()
		return strings.Contains(s.stderr.String(), text)
	}) == waitMet
}

// waitFor waits until cond (called under s.mu) is true, or fails after d.
func (s *sidecar) waitFor(d time.Duration, what string, cond func() bool) {
	s.t.Helper()
	switch s.waitUntil(d, cond) {
	case waitTimedOut:
		s.t.Fatalf("timed out after %v waiting for %s\nstderr:\n%s", d, what, s.stderrText())
	case waitExited:
		s.t.Fatalf("sidecar exited while waiting for %s\nstderr:\n%s", what, s.stderrText())
	}
}

// waitOutcome is how waitUntil ended.
type waitOutcome int

const (
	waitMet waitOutcome = iota
	waitTimedOut
	waitExited
)

// waitUntil waits until cond (called under s.mu) is true, for at most d
// or until the sidecar's output ended; every frame and stderr write wakes
// it to look again.
func (s *sidecar) waitUntil(d time.Duration, cond func() bool) waitOutcome {
	timer := time.AfterFunc(d, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) {
			return waitTimedOut
		}
		if s.eof && !cond() {
			return waitExited
		}
		s.cond.Wait()
	}
	return waitMet
}

func (s *sidecar) stderrText() string {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return truncate(s.stderr.String(), 4000)
}

// start sends a request through the client and returns its id key.
func (s *sidecar) start(method string, params any) string {
	call, err := s.c.Send(context.Background(), method, params)
	if err != nil {
		s.t.Errorf("send %s to sidecar: %v", method, err)
		return "unsent"
	}
	return strconv.FormatUint(call.ID(), 10)
}

// await waits for the reply to id.
func (s *sidecar) await(id string, d time.Duration) *frame {
	s.t.Helper()
	var f *frame
	s.waitFor(d, "reply "+id, func() bool { f = s.replies[id]; return f != nil })
	return f
}

// call sends a request and waits up to 60 s for its reply.
func (s *sidecar) call(method string, params any) *frame {
	s.t.Helper()
	return s.await(s.start(method, params), 60*time.Second)
}

// mustCall is call that fails the test on an error reply and decodes the
// result into out (if non-nil).
func (s *sidecar) mustCall(method string, params any, out any) {
	s.t.Helper()
	f := s.call(method, params)
	if f.Error != nil {
		s.t.Fatalf("%s failed: %d %s %s", method, f.Error.Code, f.Error.Message, f.Error.Data)
	}
	if out != nil {
		if err := json.Unmarshal(f.Result, out); err != nil {
			s.t.Fatalf("%s result: %v", method, err)
		}
	}
}

// notesOf returns the notifications of method so far.
func (s *sidecar) notesOf(method string) []*frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*frame
	for _, n := range s.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// waitNote waits for a notification of method whose params satisfy pred.
func (s *sidecar) waitNote(method string, d time.Duration, pred func(json.RawMessage) bool) json.RawMessage {
	s.t.Helper()
	var got json.RawMessage
	s.waitFor(d, "notification "+method, func() bool {
		for _, n := range s.notes {
			if n.Method == method && (pred == nil || pred(n.Params)) {
				got = n.Params
				return true
			}
		}
		return false
	})
	return got
}

func (s *sidecar) initialize(hostPerms bool) map[string]any {
	var res map[string]any
	s.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientInfo": map[string]string{"name": "e2e", "version": "0"},
		"capabilities": map[string]bool{"permissionRequests": hostPerms}}, &res)
	return res
}

// shutdownAndExit sends shutdown then exit and returns the exit status.
func (s *sidecar) shutdownAndExit() (proofs []proof, status int) {
	s.t.Helper()
	var res struct {
		Proofs []proof `json:"proofs"`
	}
	s.mustCall("shutdown", map[string]any{}, &res)
	s.send(map[string]any{"jsonrpc": "2.0", "method": "exit"})
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("sidecar did not exit after exit")
	}
	status = 0
	if ee, ok := s.exitErr.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if s.exitErr != nil {
		s.t.Fatalf("sidecar wait: %v", s.exitErr)
	}
	return res.Proofs, status
}

// allOutput is every frame and all stderr the sidecar produced.
func (s *sidecar) allOutput() []byte {
	s.mu.Lock()
	out := bytes.Join(s.raw, nil)
	s.mu.Unlock()
	s.errMu.Lock()
	out = append(out, s.stderr.Bytes()...)
	s.errMu.Unlock()
	return out
}

// proof is the cleanup proof (docs/protocol.md, Cleanup proof) as tests
// read it.
type proof struct {
	CleanupID     string `json:"cleanupId"`
	Session       string `json:"session"`
	SessionKey    string `json:"sessionKey"`
	Reason        string `json:"reason"`
	Origin        string `json:"origin"`
	ProtocolClose struct {
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
	} `json:"protocolClose"`
	Signals []struct {
		Signal string `json:"signal"`
		Target string `json:"target"`
		At     string `json:"at"`
		Error  string `json:"error"`
	} `json:"signals"`
	Processes []struct {
		Pid      int    `json:"pid"`
		Role     string `json:"role"`
		ExitCode *int   `json:"exitCode"`
		Signal   string `json:"signal"`
		ReapedBy string `json:"reapedBy"`
	} `json:"processes"`
	Containment string `json:"containment"`
	Verified    struct {
		TreeEmpty bool   `json:"treeEmpty"`
		Method    string `json:"method"`
	} `json:"verified"`
	Complete bool        `json:"complete"`
	Attempts int         `json:"attempts"`
	Errors   []seedCause `json:"errors"`
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// markedPids returns live (non-zombie) processes whose environment holds
// ACPX_TEST_MARK=mark or whose cwd is under dir.
func markedPids(mark, dir string) []int {
	ents, _ := os.ReadDir("/proc")
	needle := []byte("ACPX_TEST_MARK=" + mark + "\x00")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		hit := bytes.Contains(append(env, 0), needle)
		if !hit && dir != "" {
			if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
				hit = true
			}
		}
		if hit {
			out = append(out, pid)
		}
	}
	return out
}

// waitNoMarked waits (bounded) until no process carries mark; it fails
// the test listing the survivors.
func waitNoMarked(t testing.TB, mark, dir string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := markedPids(mark, dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			desc := ""
			for _, p := range left {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				desc += fmt.Sprintf("\n  pid %d: %s", p, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
			}
			t.Fatalf("processes of the test survive:%s", desc)
		}
		time.Sleep(20 * time.Millisecond) // polling the process table, bounded by d
	}
}

// grepSecret fails if secret occurs in any file under dir or in data.
//
// The keys' private HOMEs under a state dir (<dir>/homes) are skipped:
// they are the agents' own files (codex keeps its key in
// $CODEX_HOME/auth.json), not what the sidecar writes.
func grepSecret(t testing.TB, secret string, dir string, data []byte) {
	t.Helper()
	if bytes.Contains(data, []byte(secret)) {
		t.Errorf("secret found in the sidecar's frames or stderr")
	}
	homes := filepath.Join(dir, "homes")
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() && path == homes {
			return filepath.SkipDir
		}
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("secret found in %s", path)
		}
		return nil
	})
}

// proofOf is the cleanup proof in an error's data.cleanup; a missing one
// fails the test.
func proofOf(t testing.TB, e *rpcError) proof {
	t.Helper()
	var d struct {
		Cleanup *proof `json:"cleanup"`
	}
	if e == nil || json.Unmarshal(e.Data, &d) != nil || d.Cleanup == nil {
		t.Fatalf("error without data.cleanup: %+v", e)
	}
	return *d.Cleanup
}
