package e2e

// Transport and framing: malformed frames, frame size, ndjson and LSP
// framing (docs/protocol.md, Transport and framing).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

// TestFraming_MalformedFrameKeepsConnection: malformed JSON (-32700), a
// batch (-32600), an object without "jsonrpc" (-32600) and a frame over
// --max-frame-bytes (-32600) are each answered with an error (id null where
// no id could be read), discarded, and the connection keeps working
// (docs/protocol.md, Transport and framing). A \r\n-terminated line is
// accepted.
func TestFraming_MalformedFrameKeepsConnection(t *testing.T) {
	s := startSidecar(t, "--state-dir", t.TempDir(), "--max-frame-bytes", "4096")
	init := s.initialize(false)
	if caps, _ := init["capabilities"].(map[string]any); caps["maxFrameBytes"] != float64(4096) {
		t.Errorf("initialize capabilities.maxFrameBytes %v, want 4096", caps["maxFrameBytes"])
	}

	f := s.sendRawAwait([]byte("{bad json\n"), "null")
	wantError(t, "malformed JSON", f, -32700, "")
	listSessions(s)

	f = s.sendRawAwait([]byte(`[{"jsonrpc":"2.0","id":"batch-1","method":"session/list","params":{}}]`+"\n"), "null", `"batch-1"`)
	if string(f.ID) != "null" {
		t.Errorf("batch answered under id %s, want null", f.ID)
	}
	wantError(t, "batch", f, -32600, "")
	listSessions(s)

	f = s.sendRawAwait([]byte(`{"id":"nojr","method":"session/list","params":{}}`+"\n"), "null", `"nojr"`)
	wantError(t, "object without jsonrpc", f, -32600, "")
	listSessions(s)

	big := `{"jsonrpc":"2.0","id":"big","method":"session/list","params":{"pad":"` + strings.Repeat("x", 10<<10) + `"}}` + "\n"
	f = s.sendRawAwait([]byte(big), "null", `"big"`)
	if string(f.ID) != "null" {
		t.Errorf("oversized frame answered under id %s, want null", f.ID)
	}
	wantError(t, "10 KiB frame over --max-frame-bytes 4096", f, -32600, "")
	listSessions(s)

	f = s.sendRawAwait([]byte(`{"jsonrpc":"2.0","id":"crlf","method":"session/list","params":{}}`+"\r\n"), `"crlf"`)
	decodeResult[map[string]any](t, "CRLF-terminated session/list", f)

	s.mu.Lock()
	for _, id := range []string{`"batch-1"`, `"big"`} {
		if r := s.replies[id]; r != nil && r.Result != nil {
			t.Errorf("a discarded frame was executed: result under id %s", id)
		}
	}
	s.mu.Unlock()
}

// lspPeer is a sidecar started with --framing=lsp and a Content-Length
// reader (the ndjson harness cannot read LSP frames).
type lspPeer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	frames chan []byte
	stderr bytes.Buffer
	done   chan struct{}
	// wire validates every frame, both ways, against the schema.
	wire *wirecheck.Conn
}

func startLSPSidecar(t *testing.T, args ...string) *lspPeer {
	t.Helper()
	p := &lspPeer{t: t, frames: make(chan []byte, 64), done: make(chan struct{})}
	schema, err := wirecheck.Default()
	if err != nil {
		t.Fatalf("protocol schema: %v", err)
	}
	p.wire = schema.NewConn()
	p.cmd = exec.Command(sidecarBin, append([]string{"--framing=lsp"}, args...)...)
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Tracked: its Wait is this peer's, not the orphan reaper's (another
	// test may run one; a taken zombie made ExitCode -1 in CI).
	if err := startTracked(p.cmd); err != nil {
		t.Fatal(err)
	}
	go func() {
		r := bufio.NewReader(out)
		for {
			body, err := readLSPFrame(r)
			if err != nil {
				if err != io.EOF {
					p.frames <- []byte("READ ERROR: " + err.Error())
				}
				break
			}
			if verr := p.wire.Check(wirecheck.FromSidecar, body); verr != nil {
				t.Error(verr)
			}
			p.frames <- body
		}
		close(p.frames)
		_, _ = io.Copy(io.Discard, r)
		_ = p.cmd.Wait() // only after stdout is drained (StdoutPipe contract)
		close(p.done)
	}()
	t.Cleanup(func() {
		go func() {
			for range p.frames { // unblock the reader so that it can reach Wait
			}
		}()
		_ = p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("lsp sidecar did not exit after stdin EOF")
		}
	})
	return p
}

// readLSPFrame reads one `Content-Length: N\r\n...\r\n\r\n<N bytes>` frame.
func readLSPFrame(r *bufio.Reader) ([]byte, error) {
	n := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && n == -1 {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("header: %v (read %q)", err, line)
		}
		if !strings.HasSuffix(line, "\r\n") {
			return nil, fmt.Errorf("header line not CRLF-terminated: %q", line)
		}
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			break
		}
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("bad header line %q", line)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			if n, err = strconv.Atoi(strings.TrimSpace(val)); err != nil || n < 0 {
				return nil, fmt.Errorf("bad Content-Length %q", val)
			}
		}
	}
	if n < 0 {
		return nil, fmt.Errorf("frame without Content-Length")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("body: %v", err)
	}
	return body, nil
}

func (p *lspPeer) write(body string, extraHeader string) {
	p.t.Helper()
	if verr := p.wire.Check(wirecheck.FromHost, []byte(body)); verr != nil {
		p.t.Error(verr)
	}
	if _, err := fmt.Fprintf(p.stdin, "Content-Length: %d\r\n%s\r\n%s", len(body), extraHeader, body); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

// next returns the next frame that is a response (notifications skipped).
func (p *lspPeer) next(d time.Duration) *frame {
	p.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case b, ok := <-p.frames:
			if !ok {
				p.t.Fatalf("lsp sidecar closed stdout; stderr:\n%s", truncate(p.stderrSafe(), 4000))
			}
			f := &frame{}
			if err := json.Unmarshal(b, f); err != nil {
				p.t.Fatalf("lsp frame is not JSON: %q", truncate(string(b), 300))
			}
			if f.Method == "" {
				return f
			}
		case <-timeout:
			p.t.Fatalf("no lsp frame within %v", d)
		}
	}
}

func (p *lspPeer) stderrSafe() string {
	select {
	case <-p.done:
		return p.stderr.String()
	default:
		return "(still running)"
	}
}

// TestFraming_LSPContentLengthRoundTrip: with --framing=lsp the sidecar
// reads and writes `Content-Length` frames (docs/protocol.md, Transport and
// framing): initialize and session/list round-trip (a Content-Type header is
// accepted as in LSP), a malformed body gets -32700 id null and the
// connection keeps working, and stdin EOF ends the process with status 0.
func TestFraming_LSPContentLengthRoundTrip(t *testing.T) {
	p := startLSPSidecar(t, "--state-dir", t.TempDir())
	p.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"e2e","version":"0"}}}`, "")
	f := p.next(20 * time.Second)
	if string(f.ID) != "1" {
		t.Fatalf("initialize reply id %s", f.ID)
	}
	init := decodeResult[map[string]any](t, "lsp initialize", f)
	if caps, _ := init["capabilities"].(map[string]any); caps["framing"] != "lsp" {
		t.Errorf("initialize capabilities.framing %v, want lsp", caps["framing"])
	}

	p.write(`{"jsonrpc":"2.0","id":"l2","method":"session/list","params":{}}`, "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n")
	f = p.next(20 * time.Second)
	if string(f.ID) != `"l2"` {
		t.Fatalf("session/list reply id %s", f.ID)
	}
	if l := decodeResult[map[string]any](t, "lsp session/list", f); l["sessions"] == nil {
		t.Errorf("session/list result %s", f.Result)
	}

	p.write(`{bad json`, "")
	f = p.next(20 * time.Second)
	if string(f.ID) != "null" {
		t.Errorf("malformed lsp body answered under id %s, want null", f.ID)
	}
	wantError(t, "malformed lsp body", f, -32700, "")

	p.write(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`, "")
	f = p.next(20 * time.Second)
	if string(f.ID) != "3" {
		t.Fatalf("session/list reply id %s", f.ID)
	}
	decodeResult[map[string]any](t, "lsp session/list after a bad frame", f)

	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("lsp sidecar did not exit after stdin EOF")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after stdin EOF with no sessions, want 0", code)
	}
}
