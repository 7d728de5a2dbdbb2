package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Fakes of the launch.Launcher/launch.Tree seam and of the ACP peer, so the
// session actor runs in tests without any process: a fakeTree's stdio is a
// pair of in-memory pipes, and at their other end a fakeAgent speaks ACP over
// NDJSON JSON-RPC (the framing of acpclient's line stream, fakeStream).

// fakeMode is the containment the fakes report.
const fakeMode reaper.Mode = "fake"

// agentHandler answers one ACP request (or notification) of the fake
// agent; conn is the agent's side, for requests back to the sidecar.
type agentHandler func(ctx context.Context, conn *jsonrpc2.Conn, params json.RawMessage) (any, error)

// fakeAgent is the ACP peer of every tree a fakeLauncher starts. Requests
// are handled concurrently (a prompt may wait for a permission answer).
type fakeAgent struct {
	mu       sync.Mutex
	handlers map[string]agentHandler
	calls    []string // methods received, in order
}

// newFakeAgent answers initialize (advertising session/close), session/new,
// session/prompt (end_turn) and session/close; set replaces one.
func newFakeAgent() *fakeAgent {
	ok := func(v string) agentHandler {
		return func(context.Context, *jsonrpc2.Conn, json.RawMessage) (any, error) { return json.RawMessage(v), nil }
	}
	return &fakeAgent{handlers: map[string]agentHandler{
		"initialize": ok(`{"protocolVersion":1,"agentCapabilities":{"sessionCapabilities":{"close":{}}},` +
			`"agentInfo":{"name":"fake-agent","version":"0"}}`),
		"session/new":    ok(`{"sessionId":"fake-session"}`),
		"session/prompt": ok(`{"stopReason":"end_turn"}`),
		"session/close":  ok(`{}`),
		"session/cancel": ok(`null`),
	}}
}

// set replaces the handler of method.
func (a *fakeAgent) set(method string, h agentHandler) {
	a.mu.Lock()
	a.handlers[method] = h
	a.mu.Unlock()
}

// count reports how many times method was received.
func (a *fakeAgent) count(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		if c == method {
			n++
		}
	}
	return n
}

func (a *fakeAgent) handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	a.mu.Lock()
	a.calls = append(a.calls, req.Method)
	h := a.handlers[req.Method]
	a.mu.Unlock()
	if h == nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "fake agent: no " + req.Method}
	}
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	return h(ctx, conn, params)
}

// fakeTree is a provider "tree" without a process: Terminate ends the fake
// agent's connection and, once provable, reports the tree empty.
type fakeTree struct {
	pid     int
	started time.Time
	stdinW  *io.PipeWriter // the sidecar writes the agent's input here
	stdoutR *io.PipeReader // the sidecar reads the agent's output here
	agent   *jsonrpc2.Conn
	exited  chan struct{}
	exit    sync.Once

	mu           sync.Mutex
	provable     bool // Terminate can prove the tree empty
	terminations int
	cgroup       string           // CgroupPath ("" = no cgroup)
	res          reaper.Resources // what Resources reports while cgroup is set
}

func (t *fakeTree) Stdio() reaper.Stdio {
	return reaper.Stdio{Stdin: t.stdinW, Stdout: t.stdoutR, Stderr: io.NopCloser(strings.NewReader(""))}
}
func (t *fakeTree) Info() reaper.TreeInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return reaper.TreeInfo{Pid: t.pid, Pgid: t.pid, StartTicks: 1, StartedAt: t.started, Containment: fakeMode, CgroupPath: t.cgroup}
}
func (t *fakeTree) Resources() (reaper.Resources, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cgroup == "" {
		return reaper.Resources{}, errors.New("fake: no cgroup")
	}
	return t.res, nil
}

// setResources gives the tree a cgroup whose counters are r.
func (t *fakeTree) setResources(r reaper.Resources) {
	t.mu.Lock()
	t.cgroup, t.res = "/fake/cgroup", r
	t.mu.Unlock()
}
func (t *fakeTree) Exited() <-chan struct{}       { return t.exited }
func (t *fakeTree) ExitStatus() reaper.ExitStatus { return reaper.ExitStatus{Signal: "SIGTERM"} }

// die ends the fake provider: its connection closes and its exit is seen.
func (t *fakeTree) die() {
	t.exit.Do(func() {
		_ = t.agent.Close()
		close(t.exited)
	})
}

// setProvable makes the next Terminate prove the tree empty (or not).
func (t *fakeTree) setProvable(v bool) {
	t.mu.Lock()
	t.provable = v
	t.mu.Unlock()
}

// terminated reports how many times Terminate was called.
func (t *fakeTree) terminated() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.terminations
}

// Terminate ends the agent, then reports the tree empty only while
// provable; an unprovable tree stays "populated" as a stuck cgroup would.
func (t *fakeTree) Terminate(context.Context, time.Duration, time.Duration) reaper.Termination {
	t.die()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.terminations++
	res := reaper.Termination{Containment: fakeMode,
		Signals: []reaper.SignalRecord{{Signal: "SIGTERM", Target: "tree", At: time.Now()}}}
	if !t.provable {
		res.Verified = reaper.Verification{Method: "fake: tree still populated"}
		return res
	}
	code := 0
	res.Processes = []reaper.ProcessRecord{{Pid: t.pid, Role: reaper.RoleProvider, ExitCode: &code, ExitedAt: time.Now()}}
	res.Verified = reaper.Verification{TreeEmpty: true, Method: "fake: every process gone"}
	res.Complete = true
	return res
}

// fakeLauncher starts fakeTrees connected to agent.
type fakeLauncher struct {
	agent *fakeAgent
	// unprovable: trees started from now on cannot be proven empty until
	// their setProvable(true).
	unprovable bool

	mu     sync.Mutex
	trees  []*fakeTree
	sealed bool
}

func (l *fakeLauncher) Mode() reaper.Mode    { return fakeMode }
func (l *fakeLauncher) CgroupParent() string { return "" }

func (l *fakeLauncher) Seal() {
	l.mu.Lock()
	l.sealed = true
	l.mu.Unlock()
}

// Start connects a new fakeTree to the fake agent over two pipes.
func (l *fakeLauncher) Start(reaper.Spec) (launch.Tree, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return nil, reaper.ErrSealed
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t := &fakeTree{pid: 4000 + len(l.trees), started: time.Now(), stdinW: inW, stdoutR: outR,
		exited: make(chan struct{}), provable: !l.unprovable}
	st := &fakeStream{in: jsonl.NewReader(inR, jsonl.NDJSON, 0), out: jsonl.NewWriter(outW, jsonl.NDJSON), w: outW, r: inR}
	t.agent = jsonrpc2.NewConn(context.Background(), st,
		jsonrpc2.AsyncHandler(jsonrpc2.HandlerWithError(l.agent.handle).SuppressErrClosed()),
		jsonrpc2.SetLogger(log.New(io.Discard, "", 0)))
	l.trees = append(l.trees, t)
	return t, nil
}

// fakeStream is the fake agent's jsonrpc2.ObjectStream: NDJSON frames
// read and written by internal/jsonl, a line that is no JSON-RPC 2.0
// message dropped (acpclient's line stream without its session/update
// fast path).
type fakeStream struct {
	in  *jsonl.Reader
	out *jsonl.Writer
	w   io.Closer
	r   io.Closer
}

func (s *fakeStream) ReadObject(v interface{}) error {
	for {
		frame, err := s.in.ReadFrame()
		if err == nil {
			err = jsonl.DecodeMessage(frame, v)
		}
		var fe *jsonl.FrameError
		if err == nil || !errors.As(err, &fe) {
			return err
		}
	}
}

func (s *fakeStream) WriteObject(v interface{}) error { return s.out.WriteObject(v) }

func (s *fakeStream) Close() error {
	err := s.w.Close()
	if e := s.r.Close(); err == nil {
		err = e
	}
	return err
}

// tree returns the i-th tree started.
func (l *fakeLauncher) tree(i int) *fakeTree {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trees[i]
}

// started reports how many trees were started.
func (l *fakeLauncher) started() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.trees)
}

// recHost is a session.Host that records notifications and hands each permission
// request to the test (asks), answering whatever the test sends back,
// however late: a host that ignores the turn's context.
type recHost struct {
	perms bool
	asks  chan hostAsk

	mu    sync.Mutex
	notes []hostNote
	added chan struct{} // signalled on every notification
}

type hostNote struct {
	method string
	params json.RawMessage
}

// hostAsk is one permission request the host received.
type hostAsk struct {
	params protocol.PermissionRequestParams
	answer chan protocol.PermissionRequestResult
}

func newRecHost() *recHost {
	return &recHost{asks: make(chan hostAsk, 8), added: make(chan struct{}, 1)}
}

func (h *recHost) Notify(method string, params json.RawMessage) error {
	b, _ := json.Marshal(params)
	h.mu.Lock()
	h.notes = append(h.notes, hostNote{method, b})
	h.mu.Unlock()
	select {
	case h.added <- struct{}{}:
	default:
	}
	return nil
}

func (h *recHost) RequestPermission(_ context.Context, p protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	a := hostAsk{params: p, answer: make(chan protocol.PermissionRequestResult, 1)}
	h.asks <- a
	return <-a.answer, nil
}

func (h *recHost) PermissionRequests() bool { return h.perms }

// find returns the notifications of method, decoded into fresh values of
// type T.
func notesOf[T any](h *recHost, method string) []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []T
	for _, n := range h.notes {
		if n.method == method {
			var v T
			if json.Unmarshal(n.params, &v) == nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// waitNote waits up to 10 s for a notification of method that ok accepts.
func waitNote[T any](t *testing.T, h *recHost, method string, ok func(T) bool) T {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, v := range notesOf[T](h, method) {
			if ok(v) {
				return v
			}
		}
		select {
		case <-h.added:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			var zero T
			t.Fatalf("no %s notification as expected", method)
			return zero
		}
	}
}

// fakeManager is a Manager over l and h with short bounds.
func fakeManager(t *testing.T, l *fakeLauncher, h session.Host) *Manager {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.StateDir = t.TempDir()
	cfg.Launcher = l
	cfg.Bounds.CloseTimeout = 2 * time.Second
	cfg.Bounds.HandshakeTimeout = 5 * time.Second
	m := NewManager(cfg, h)
	// A test that stops early (t.Fatal) still ends its sessions, so its
	// actors do not outlive it into the next test's goroutine check.
	t.Cleanup(func() {
		m.Shutdown()
		m.Wait()
	})
	return m
}

// fakeOpen is an open of agent "generic" whose command is never run: the
// fake launcher only checks nothing (verifyCommand needs an executable
// file, so it names this test binary).
func fakeOpen(t *testing.T, key string) protocol.OpenParams {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return protocol.OpenParams{SessionKey: key, Agent: "generic", Command: &protocol.Command{Path: exe},
		Cwd: t.TempDir(), PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}
}

// outcome is one reply of the manager.
type outcome struct {
	v   any
	err error
}

// start sends one request and returns the channel its reply arrives on.
func start(call func(reply session.Reply)) <-chan outcome {
	ch := make(chan outcome, 1)
	call(func(v any, err error) { ch <- outcome{v, err} })
	return ch
}

// wait waits up to 10 s for a reply.
func wait(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no reply within 10 s")
		return outcome{}
	}
}
