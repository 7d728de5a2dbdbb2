package main

// The test harness: TestMain builds the agent, proc runs one instance and
// speaks JSON-RPC with it, and the /proc helpers find its processes.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// faBin is the faultagent binary built once by TestMain.
var faBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "faultagent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	faBin = filepath.Join(dir, "faultagent")
	out, err := exec.Command("go", "build", "-o", faBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// Orphans of our agents (the grandchild) re-parent to us, not to PID 1,
	// which never reaps (notes/common.md).
	if err := reaper.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// step bounds a wait for one message; a deadline for an event, not a timed
// assertion.
const step = 30 * time.Second

type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan message
	marker string
	done   chan struct{} // reader finished
	waited chan error

	mu      sync.Mutex
	garbage []string
	stderr  bytes.Buffer
	nextID  int
	notes   []message
	exited  bool
	exitErr error
}

func (p *proc) Write(b []byte) (int, error) { // stderr sink
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// start launches faultagent with args and a fresh env marker, and registers
// a cleanup that kills it and proves by marker scan that nothing survives.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, marker: testmark.Env + "=" + testmark.New(),
		msgs: make(chan message, 1<<16), done: make(chan struct{}), waited: make(chan error, 1)}
	p.cmd = exec.Command(faBin, args...)
	p.cmd.Env = append(os.Environ(), p.marker)
	p.cmd.Stderr = p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		defer close(p.msgs)
		br := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				var m message
				if json.Unmarshal(line, &m) != nil {
					p.mu.Lock()
					p.garbage = append(p.garbage, string(line))
					p.mu.Unlock()
				} else {
					p.msgs <- m
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-p.done // Wait closes stdout: let the reader drain first
		p.waited <- p.cmd.Wait()
	}()
	t.Cleanup(p.kill)
	return p
}

// kill ends the agent's process group, waits for it, then kills by pid
// anything still carrying the marker (a setsid grandchild) and reaps it.
func (p *proc) kill() {
	p.stdin.Close()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.wait()
	var left []int
	for i := 0; i < 500; i++ { // bounded poll for the scan to come back empty
		reapZombieChildren()
		left = markedPIDs(p.marker)
		if len(left) == 0 {
			break
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	reapZombieChildren()
	if len(left) > 0 {
		p.t.Errorf("processes with marker %s survived: %v", p.marker, left)
	}
	if p.t.Failed() {
		p.t.Logf("agent stderr:\n%s", p.stderrText())
	}
}

// wait returns the agent's exit error once it has exited.
func (p *proc) wait() error {
	p.mu.Lock()
	if p.exited {
		defer p.mu.Unlock()
		return p.exitErr
	}
	p.mu.Unlock()
	select {
	case err := <-p.waited:
		p.mu.Lock()
		p.exited, p.exitErr = true, err
		p.mu.Unlock()
		return err
	case <-time.After(step):
		p.t.Fatalf("agent did not exit within %v", step)
		return nil
	}
}

func (p *proc) send(m message) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

// next returns the next JSON message from the agent.
func (p *proc) next() message {
	p.t.Helper()
	select {
	case m, ok := <-p.msgs:
		if !ok {
			p.t.Fatalf("agent stdout closed")
		}
		return m
	case <-time.After(step):
		p.t.Fatalf("no message within %v", step)
	}
	return message{}
}

// request sends a request and returns its id.
func (p *proc) request(method string, params any) json.RawMessage {
	p.nextID++
	id := json.RawMessage(strconv.Itoa(p.nextID))
	b, _ := json.Marshal(params)
	p.send(message{ID: id, Method: method, Params: b})
	return id
}

// call sends a request and returns its response, keeping notifications in
// p.notes and answering agent requests with onReq (nil: method not found).
func (p *proc) call(method string, params any, onReq func(message) any) message {
	p.t.Helper()
	id := p.request(method, params)
	return p.await(id, onReq)
}

func (p *proc) await(id json.RawMessage, onReq func(message) any) message {
	p.t.Helper()
	for {
		m := p.next()
		switch {
		case m.Method != "" && len(m.ID) > 0:
			if onReq == nil {
				p.send(message{ID: m.ID, Error: &rpcError{Code: codeMethodNotFound, Message: "no"}})
				continue
			}
			b, _ := json.Marshal(onReq(m))
			p.send(message{ID: m.ID, Result: b})
		case m.Method != "":
			p.notes = append(p.notes, m)
		case bytes.Equal(m.ID, id):
			return m
		default:
			p.t.Fatalf("unexpected response %s while waiting for %s", m.ID, id)
		}
	}
}

type update struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string `json:"sessionUpdate"`
		Content       struct {
			Text string `json:"text"`
		} `json:"content"`
		Used int `json:"used"`
	} `json:"update"`
}

func (p *proc) updates(from int) []update {
	var out []update
	for _, n := range p.notes[from:] {
		var u update
		if n.Method != "session/update" || json.Unmarshal(n.Params, &u) != nil {
			p.t.Fatalf("bad notification %s %s", n.Method, n.Params)
		}
		out = append(out, u)
	}
	return out
}

func decode[T any](t *testing.T, m message) T {
	t.Helper()
	var v T
	if m.Error != nil {
		t.Fatalf("error response: %+v", *m.Error)
	}
	if err := json.Unmarshal(m.Result, &v); err != nil {
		t.Fatalf("result %s: %v", m.Result, err)
	}
	return v
}

type promptResult struct {
	StopReason string `json:"stopReason"`
	Usage      struct {
		InputTokens, OutputTokens, TotalTokens int
	} `json:"usage"`
}

func handshake(t *testing.T, p *proc) string {
	t.Helper()
	p.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil)
	res := decode[struct {
		SessionID string `json:"sessionId"`
	}](t, p.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}, nil))
	if !strings.HasPrefix(res.SessionID, "fa-") {
		t.Fatalf("sessionId %q", res.SessionID)
	}
	return res.SessionID
}

func promptText(sid, text string) map[string]any {
	return map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// markedPIDs lists live (non-zombie) processes whose environment holds the
// exact entry marker (leaks are found by marker, never by name).
func markedPIDs(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if procState(pid) == "Z" {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == marker {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// procState returns the state letter and fills ppid of /proc/pid/stat.
func procStat(pid int) (state string, ppid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return "", 0
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid
}

func procState(pid int) string { s, _ := procStat(pid); return s }

// reapZombieChildren reaps zombies re-parented to this subreaper. Agents
// started by exec.Cmd are reaped by their own Wait before this runs.
func reapZombieChildren() {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ppid := procStat(pid); st == "Z" && ppid == os.Getpid() {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}
