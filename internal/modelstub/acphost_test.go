package modelstub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// acpHost is the test's ACP client side, on the ACP Go SDK
// (github.com/coder/acp-go-sdk): it keeps every session/update in order,
// answers session/request_permission through onPermission, refuses fs and
// terminal callbacks (none is advertised), and records a transcript of
// every line both ways ("->" client to agent). (The sidecar itself drives
// ACP over jsonrpc2 with the SDK's types, for the reasons in
// docs/architecture.md "ACP client side"; a two-turn test meets none of
// them.)
type acpHost struct {
	mu sync.Mutex
	// notes holds every session/update notification's params, in order.
	notes []json.RawMessage
	// transcript holds every line both ways.
	transcript []string
	// onPermission answers session/request_permission (raw params).
	onPermission func(params json.RawMessage) acp.RequestPermissionOutcome
}

var errNotOffered = acp.NewMethodNotFound("not offered by this client")

func (h *acpHost) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.notes = append(h.notes, b)
	h.mu.Unlock()
	return nil
}

func (h *acpHost) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return acp.RequestPermissionResponse{}, err
	}
	h.mu.Lock()
	f := h.onPermission
	h.mu.Unlock()
	if f == nil {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return acp.RequestPermissionResponse{Outcome: f(b)}, nil
}

func (h *acpHost) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNotOffered
}

func (h *acpHost) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNotOffered
}

func (h *acpHost) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNotOffered
}

func (h *acpHost) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNotOffered
}

func (h *acpHost) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNotOffered
}

func (h *acpHost) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNotOffered
}

func (h *acpHost) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNotOffered
}

// record appends the lines of b to the transcript with prefix.
func (h *acpHost) record(prefix string, b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			h.transcript = append(h.transcript, prefix+string(bytes.TrimSpace(line)))
		}
	}
}

// recorder is an io.Writer that records each write in the transcript.
type recorder struct {
	h      *acpHost
	prefix string
	w      io.Writer
}

func (r recorder) Write(b []byte) (int, error) {
	r.h.record(r.prefix, b)
	if r.w == nil {
		return len(b), nil
	}
	return r.w.Write(b)
}

// sessionUpdate is the part of a session/update notification we inspect.
type sessionUpdate struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string `json:"sessionUpdate"`
		Content       struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Used   *int   `json:"used"`
		Status string `json:"status"`
	} `json:"update"`
}

// noteCount is how many session/update notifications were seen so far.
func (h *acpHost) noteCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.notes)
}

// updatesSince decodes the session/update notifications from index i on.
func (h *acpHost) updatesSince(t *testing.T, i int) []sessionUpdate {
	h.mu.Lock()
	notes := append([]json.RawMessage(nil), h.notes[i:]...)
	h.mu.Unlock()
	var out []sessionUpdate
	for _, n := range notes {
		var u sessionUpdate
		if err := json.Unmarshal(n, &u); err != nil {
			t.Fatalf("session/update params: %v", err)
		}
		out = append(out, u)
	}
	return out
}

// asJSON re-encodes v (an SDK response) for the checks below.
func asJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
