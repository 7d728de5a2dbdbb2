package rpc

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current behaviour")

// fakeBackend answers every call at once with an echo of its params, except
// that a session/open with sessionKey "hold" and a session/prompt with a
// requestId starting "hold" answer only when their ctx is cancelled
// ($/cancelRequest) or at Shutdown, in the order they were held.
type fakeBackend struct {
	srv        *Server
	incomplete bool // Shutdown returns an incomplete proof

	mu    sync.Mutex
	calls []string
	held  []*heldCall
}

type heldCall struct {
	release chan struct{}
	done    chan struct{}
}

func (f *fakeBackend) record(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

func (f *fakeBackend) echo(method string, p any, reply Reply) {
	f.record("%s", method)
	reply(map[string]any{"method": method, "params": p}, nil)
}

func (f *fakeBackend) hold(ctx context.Context, what string, reply Reply) {
	h := &heldCall{release: make(chan struct{}), done: make(chan struct{})}
	f.mu.Lock()
	f.held = append(f.held, h)
	f.calls = append(f.calls, "hold "+what)
	f.mu.Unlock()
	go func() {
		defer close(h.done)
		select {
		case <-ctx.Done():
			reply(nil, &protocol.Error{RPCCode: protocol.CodeCancelled, Message: what + " cancelled",
				Data: protocol.ErrorData{Code: "CANCELLED"}})
		case <-h.release:
			reply(map[string]any{"released": what}, nil)
		}
	}()
}

func (f *fakeBackend) Initialize(p protocol.InitializeParams) protocol.InitializeResult {
	f.record("Initialize perms=%v", p.Capabilities.PermissionRequests)
	return protocol.InitializeResult{ProtocolVersion: protocol.Version, ServerInfo: protocol.Implementation{Name: "fake", Version: "0"},
		Pid: -1, Capabilities: protocol.ServerCaps{Containment: "process-group", Agents: []string{"a"}}}
}

func (f *fakeBackend) Open(ctx context.Context, p protocol.OpenParams, reply Reply) {
	if p.SessionKey == "hold" {
		f.hold(ctx, "open", reply)
		return
	}
	f.echo("Open", p, reply)
}

func (f *fakeBackend) Prompt(ctx context.Context, p protocol.PromptParams, reply Reply) {
	if strings.HasPrefix(p.RequestID, "hold") {
		f.hold(ctx, "prompt "+p.RequestID, reply)
		return
	}
	f.echo("Prompt", p, reply)
}

func (f *fakeBackend) Cancel(p protocol.CancelParams, reply Reply) { f.echo("Cancel", p, reply) }

func (f *fakeBackend) Status(p protocol.SessionRef, reply Reply) {
	switch p.Session {
	case "boom":
		f.record("Status boom")
		reply(nil, errors.New("secret text that must not be sent"))
	case "domain":
		f.record("Status domain")
		reply(nil, protocol.Domain(protocol.ErrSessionNotFound, "no such session", false))
	default:
		f.echo("Status", p, reply)
	}
}

func (f *fakeBackend) Close(p protocol.CloseParams, reply Reply)       { f.echo("Close", p, reply) }
func (f *fakeBackend) SetModel(p protocol.SetModelParams, reply Reply) { f.echo("SetModel", p, reply) }
func (f *fakeBackend) SetMode(p protocol.SetModeParams, reply Reply)   { f.echo("SetMode", p, reply) }
func (f *fakeBackend) SetConfigOption(p protocol.SetConfigOptionParams, reply Reply) {
	f.echo("SetConfigOption", p, reply)
}

func (f *fakeBackend) Events(p protocol.EventsParams, reply Reply) { f.echo("Events", p, reply) }

func (f *fakeBackend) Stats() protocol.StatsResult {
	f.record("Stats")
	return protocol.StatsResult{UpdatesForwarded: 7}
}

func (f *fakeBackend) List() []protocol.ListEntry {
	f.record("List")
	return nil
}

func (f *fakeBackend) Initialized() {
	f.record("Initialized perms=%v", f.srv.PermissionRequests())
}

func (f *fakeBackend) Shutdown() []*protocol.Proof {
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.calls = append(f.calls, "Shutdown")
	f.mu.Unlock()
	for _, h := range held {
		close(h.release)
		<-h.done
	}
	if !f.incomplete {
		return nil
	}
	return []*protocol.Proof{{CleanupID: "c1", Session: "s", Origin: "shutdown", Complete: false,
		StartedAt: protocol.At(time.Unix(0, 0)), FinishedAt: protocol.At(time.Unix(0, 0))}}
}

// step is one frame sent to the server and how many lines it answers with.
type step struct {
	replies int
	frame   string
}

func req(frame string) step   { return step{1, frame} }
func notif(frame string) step { return step{0, frame} }

type scenario struct {
	name       string
	incomplete bool
	steps      []step
	// closeStdin ends the scenario by closing stdin instead of waiting for
	// an exit notification among the steps to end Serve.
	closeStdin bool
}

const initOK = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"capabilities":{"permissionRequests":true}}}`

var scenarios = []scenario{
	{name: "before-initialize", closeStdin: true, steps: []step{
		req(`{"jsonrpc":"2.0","id":1,"method":"session/list"}`),
		req(`{"jsonrpc":"2.0","id":2,"method":"nope"}`),
		req(`{"jsonrpc":"2.0","id":3,"method":"shutdown"}`),
		notif(`{"jsonrpc":"2.0","method":"exit"}`),
		notif(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`),
		notif(`{"jsonrpc":"2.0","method":"nope"}`),
		req(`{"jsonrpc":"2.0","id":4,"method":"exit"}`),
		req(`{"jsonrpc":"2.0","id":5,"method":"session/list","params":[1]}`),
		req(`{"jsonrpc":"2.0","id":6,"method":"initialize","params":[1]}`),
		req(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":"x"}`),
		req(`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"1"}}`),
		req(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}`),
		req(`{"jsonrpc":"2.0","id":10,"method":"initialize"}`),
		req(`{"jsonrpc":"2.0","id":11,"method":"initialize","params":null}`),
		req(`{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":2}}`),
		req(`{"jsonrpc":"2.0","id":13,"method":"initialize","params":{"protocolVersion":1,"capabilities":{"permissionRequests":"yes"}}}`),
		req(`{"jsonrpc":"2.0","id":14,"method":"initialize","params":{"protocolVersion":1,"capabilities":[]}}`),
		req(initOK),
		req(`{"jsonrpc":"2.0","id":15,"method":"initialize","params":{"protocolVersion":1}}`),
		req(`{"jsonrpc":"2.0","id":16,"method":"initialize","params":[1]}`),
		req(`{"jsonrpc":"2.0","id":17,"method":"initialize","params":{"protocolVersion":"x"}}`),
		req(`{"jsonrpc":"2.0","id":18,"method":"session/list"}`),
	}},
	{name: "methods", steps: []step{
		req(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`),
		req(`{"jsonrpc":"2.0","id":2,"method":"nope"}`),
		req(`{"jsonrpc":"2.0","id":3,"method":"` + strings.Repeat("m", 150) + `"}`),
		req(`{"jsonrpc":"2.0","id":4,"method":"a\"b<>&\u00e9"}`),
		req(`{"jsonrpc":"2.0","id":5,"method":"nope","params":[1]}`),
		req(`{"jsonrpc":"2.0","id":6,"method":"nope","params":"s"}`),
		req(`{"jsonrpc":"2.0","id":7,"method":"exit"}`),
		req(`{"jsonrpc":"2.0","id":8,"method":"$/cancelRequest","params":{"id":1}}`),
		req(`{"jsonrpc":"2.0","id":9,"method":"session/list"}`),
		req(`{"jsonrpc":"2.0","id":10,"method":"session/list","params":[]}`),
		req(`{"jsonrpc":"2.0","id":11,"method":"session/list","params":{"x":1}}`),
		req(`{"jsonrpc":"2.0","id":12,"method":"session/open","params":{}}`),
		req(`{"jsonrpc":"2.0","id":13,"method":"session/open","params":{"sessionKey":5}}`),
		req(`{"jsonrpc":"2.0","id":14,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"path":1}}}`),
		req(`{"jsonrpc":"2.0","id":15,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"path":"/x","args":[1]}}}`),
		req(`{"jsonrpc":"2.0","id":16,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"path":"/x"},"cwd":"/","env":{"A":1}}}`),
		req(`{"jsonrpc":"2.0","id":17,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"path":"/x"},"cwd":"/","mcpServers":{}}}`),
		req(`{"jsonrpc":"2.0","id":18,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"path":"x"},"cwd":"/"}}`),
		req(`{"jsonrpc":"2.0","id":19,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"path":"/x","args":["-v"]},"cwd":"/","env":{"SECRET":"v"}}}`),
		req(`{"jsonrpc":"2.0","id":20,"method":"session/open","params":[]}`),
		req(`{"jsonrpc":"2.0","id":21,"method":"session/open","params":null}`),
		req(`{"jsonrpc":"2.0","id":22,"method":"session/prompt"}`),
		req(`{"jsonrpc":"2.0","id":23,"method":"session/prompt","params":{"session":"s","requestId":"r","prompt":[{}]}}`),
		req(`{"jsonrpc":"2.0","id":24,"method":"session/prompt","params":{"session":"s","requestId":"r","prompt":"hi","timeoutMs":"1"}}`),
		req(`{"jsonrpc":"2.0","id":25,"method":"session/prompt","params":{"session":"s","requestId":"r","prompt":"hi","timeoutMs":1000}}`),
		req(`{"jsonrpc":"2.0","id":26,"method":"session/cancel","params":{}}`),
		req(`{"jsonrpc":"2.0","id":27,"method":"session/cancel","params":{"session":"s","requestId":5}}`),
		req(`{"jsonrpc":"2.0","id":28,"method":"session/cancel","params":{"session":"s","requestId":"r"}}`),
		req(`{"jsonrpc":"2.0","id":29,"method":"session/status","params":{}}`),
		req(`{"jsonrpc":"2.0","id":30,"method":"session/status","params":{"session":true}}`),
		req(`{"jsonrpc":"2.0","id":31,"method":"session/status","params":{"session":"s"}}`),
		req(`{"jsonrpc":"2.0","id":32,"method":"session/status","params":{"session":"boom"}}`),
		req(`{"jsonrpc":"2.0","id":33,"method":"session/status","params":{"session":"domain"}}`),
		req(`{"jsonrpc":"2.0","id":34,"method":"session/close","params":{}}`),
		req(`{"jsonrpc":"2.0","id":35,"method":"session/close","params":{"session":"s"}}`),
		req(`{"jsonrpc":"2.0","id":36,"method":"session/close","params":{"session":"s","reason":"r","discardPersistentState":1}}`),
		req(`{"jsonrpc":"2.0","id":37,"method":"session/setModel","params":{"session":"s"}}`),
		req(`{"jsonrpc":"2.0","id":38,"method":"session/setModel","params":{"session":"s","model":"m"}}`),
		req(`{"jsonrpc":"2.0","id":39,"method":"session/setMode","params":{"session":"s"}}`),
		req(`{"jsonrpc":"2.0","id":40,"method":"session/setMode","params":{"session":"s","mode":"m"}}`),
		req(`{"jsonrpc":"2.0","id":41,"method":"session/setConfigOption","params":{"session":"s","key":"k"}}`),
		req(`{"jsonrpc":"2.0","id":42,"method":"session/setConfigOption","params":{"session":"s","key":"k","value":1}}`),
		req(`{"jsonrpc":"2.0","id":43,"method":"session/setConfigOption","params":{"session":"s","key":"k","value":true}}`),
		req(`{"jsonrpc":"2.0","id":44,"method":"session/setConfigOption","params":{"session":"s","key":1}}`),
		req(`{"jsonrpc":"2.0","id":46,"method":"session/events","params":{}}`),
		req(`{"jsonrpc":"2.0","id":47,"method":"session/events","params":{"sessionKey":"k","stateDir":"rel"}}`),
		req(`{"jsonrpc":"2.0","id":48,"method":"session/events","params":{"sessionKey":"k","afterSeq":-1}}`),
		req(`{"jsonrpc":"2.0","id":49,"method":"session/events","params":{"sessionKey":"k","limit":0}}`),
		req(`{"jsonrpc":"2.0","id":50,"method":"session/events","params":{"sessionKey":"k","afterSeq":3,"limit":10}}`),
		req(`{"jsonrpc":"2.0","id":51,"method":"sidecar/stats"}`),
		req(`{"jsonrpc":"2.0","id":52,"method":"session/prompt","params":{"session":"s","requestId":"q","prompt":"hi","queue":"yes"}}`),
		req(`{"jsonrpc":"2.0","id":53,"method":"session/prompt","params":{"session":"s","requestId":"q","prompt":"hi","queue":true}}`),
		// member names are case-sensitive and each named once (strictjson)
		req(`{"jsonrpc":"2.0","id":54,"method":"session/open","params":{"SessionKey":"k","agent":"a","command":{"path":"/x"},"cwd":"/"}}`),
		req(`{"jsonrpc":"2.0","id":55,"method":"session/open","params":{"sessionKey":"k","agent":"a","command":{"PATH":"/x"},"cwd":"/"}}`),
		req(`{"jsonrpc":"2.0","id":56,"method":"session/status","params":{"session":"s","session":"boom"}}`),
		notif(`{"jsonrpc":"2.0","method":"session/list"}`),
		notif(`{"jsonrpc":"2.0","method":"session/status","params":{"session":"s"}}`),
		notif(`{"jsonrpc":"2.0","method":"nope"}`),
		notif(`{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}`),
		req(`{"jsonrpc":"2.0","id":"str","method":"session/list"}`),
		req(`{"jsonrpc":"2.0","id":45,"method":"session/status","params":{"session":"s"}}`),
		// exit without shutdown: cleanup, then exit status 1.
		notif(`{"jsonrpc":"2.0","method":"exit"}`),
	}},
	{name: "cancel-and-duplicates", steps: []step{
		req(initOK),
		notif(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"session":"s","requestId":"hold1","prompt":"hi"}}`),
		req(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"session":"s","requestId":"r","prompt":"hi"}}`),
		req(`{"jsonrpc":"2.0","id":5,"method":"session/status","params":{"session":"s"}}`),
		req(`{"jsonrpc":"2.0","id":5,"method":"nope","params":[1]}`),
		req(`{"jsonrpc":"2.0","id":"5","method":"session/status","params":{"session":"s"}}`),
		notif(`{"jsonrpc":"2.0","id":6,"method":"session/open","params":{"sessionKey":"hold","agent":"a","command":{"path":"/x"},"cwd":"/"}}`),
		notif(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"5"}}`),
		notif(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":[5]}`),
		notif(`{"jsonrpc":"2.0","method":"$/cancelRequest"}`),
		notif(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":{}}}`),
		notif(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}`),
		req(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":5}}`),
		notif(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"session":"s","requestId":"hold2","prompt":"hi"}}`),
		req(`{"jsonrpc":"2.0","id":6,"method":"session/status","params":{"session":"s"}}`),
		// Shutdown releases the two held calls in order, then answers.
		{3, `{"jsonrpc":"2.0","id":7,"method":"shutdown"}`},
		req(`{"jsonrpc":"2.0","id":8,"method":"session/status","params":{"session":"s"}}`),
		req(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":1}}`),
		req(`{"jsonrpc":"2.0","id":10,"method":"nope","params":[1]}`),
		req(`{"jsonrpc":"2.0","id":11,"method":"shutdown"}`),
		req(`{"jsonrpc":"2.0","id":12,"method":"exit"}`),
		notif(`{"jsonrpc":"2.0","method":"nope"}`),
		notif(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":5}}`),
		notif(`{"jsonrpc":"2.0","method":"exit"}`),
	}},
	{name: "shutdown-incomplete", incomplete: true, steps: []step{
		req(initOK),
		req(`{"jsonrpc":"2.0","id":1,"method":"shutdown","params":[]}`),
		req(`{"jsonrpc":"2.0","id":2,"method":"shutdown","params":{"x":1}}`),
		req(`{"jsonrpc":"2.0","id":3,"method":"session/list"}`),
		notif(`{"jsonrpc":"2.0","method":"exit"}`),
	}},
	{name: "eof-after-initialize", closeStdin: true, steps: []step{
		req(initOK),
		notif(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"session":"s","requestId":"hold","prompt":"hi"}}`),
		// stdin EOF: shutdown, the held prompt is answered, exit 0.
		{1, ""},
	}},
}

// TestServer_Transcripts drives a Server over pipes through every
// scenario and compares each answer byte for byte with
// testdata/<name>.golden (go test -run Transcripts -update rewrites them).
func TestServer_Transcripts(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			got := runScenario(t, sc)
			path := filepath.Join("testdata", sc.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("transcript differs from %s\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}

func runScenario(t *testing.T, sc scenario) string {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := NewServer(Options{In: inR, Out: outW, Framing: FramingNDJSON, MaxFrameBytes: 1 << 20})
	fb := &fakeBackend{srv: srv, incomplete: sc.incomplete}
	code := make(chan int, 1)
	go func() {
		code <- srv.Serve(fb)
		_ = outW.Close()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		br := bufio.NewReader(outR)
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				lines <- strings.TrimSuffix(l, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	pid := fmt.Sprintf(`"pid":%d`, os.Getpid())
	var b strings.Builder
	for _, st := range sc.steps {
		if st.frame == "" {
			_ = inW.Close()
		} else {
			fmt.Fprintf(&b, "> %s\n", st.frame)
			if _, err := io.WriteString(inW, st.frame+"\n"); err != nil {
				t.Fatalf("write %s: %v", st.frame, err)
			}
		}
		for i := 0; i < st.replies; i++ {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stdout closed; transcript so far:\n%s", b.String())
				}
				fmt.Fprintf(&b, "< %s\n", strings.ReplaceAll(l, pid, `"pid":PID`))
			case <-time.After(10 * time.Second):
				t.Fatalf("no answer to %s; transcript so far:\n%s", st.frame, b.String())
			}
		}
	}
	if sc.closeStdin {
		_ = inW.Close()
	}
	select {
	case c := <-code:
		fmt.Fprintf(&b, "exit status %d\n", c)
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve did not return; transcript so far:\n%s", b.String())
	}
	_ = inW.Close()
	for l := range lines {
		fmt.Fprintf(&b, "< (late) %s\n", l)
	}
	fb.mu.Lock()
	for _, c := range fb.calls {
		fmt.Fprintf(&b, "# %s\n", c)
	}
	fb.mu.Unlock()
	return b.String()
}

// TestServer_PendingTablesDrain: after every request was answered, no
// entry is left in the in-flight or cancel tables.
func TestServer_PendingTablesDrain(t *testing.T) {
	sc := scenarios[2] // cancel-and-duplicates
	inR, inW := io.Pipe()
	srv := NewServer(Options{In: inR, Out: io.Discard})
	fb := &fakeBackend{srv: srv}
	done := make(chan struct{})
	go func() { srv.Serve(fb); close(done) }()
	for _, st := range sc.steps {
		if _, err := io.WriteString(inW, st.frame+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	_ = inW.Close()
	n := pendingCounts(srv)
	if n != [2]int{} {
		t.Fatalf("in-flight/cancel entries left: %v", n)
	}
}

func pendingCounts(s *Server) [2]int {
	var n [2]int
	s.update(func(st *connState) { n = [2]int{len(st.inflight), len(st.pending)} })
	return n
}
