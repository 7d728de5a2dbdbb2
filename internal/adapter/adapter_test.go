package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

var faultAgent string

func TestMain(m *testing.M) {
	// A Supervisor re-executes this test binary (os.Executable()) as each
	// provider's guardian; such a process runs as the guardian and exits here.
	if reaper.MaybeRunGuardian() {
		return
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	dir, err := os.MkdirTemp("", "adapter-test-")
	if err != nil {
		panic(err)
	}
	faultAgent = filepath.Join(dir, "faultagent")
	build := exec.Command("go", "build", "-o", faultAgent, "./internal/faultagent")
	build.Dir = root
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build faultagent:", err)
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

// fakeHost records notifications in order.
type fakeHost struct {
	mu    sync.Mutex
	notes []string
	perms bool
}

func (h *fakeHost) Notify(method string, params json.RawMessage) error {
	b, _ := json.Marshal(params)
	h.mu.Lock()
	h.notes = append(h.notes, method+" "+string(b))
	h.mu.Unlock()
	return nil
}

func (h *fakeHost) RequestPermission(ctx context.Context, p protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	<-ctx.Done()
	return protocol.PermissionRequestResult{}, ctx.Err()
}

func (h *fakeHost) PermissionRequests() bool { return h.perms }

type result struct {
	v   any
	err error
}

func await(t *testing.T, call func(reply func(any, error))) any {
	t.Helper()
	ch := make(chan result, 1)
	call(func(v any, err error) { ch <- result{v, err} })
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("request failed: %v", r.err)
		}
		return r.v
	case <-time.After(30 * time.Second):
		t.Fatal("no reply within 30 s")
		return nil
	}
}

// TestManager_SessionActorsLeaveNoGoroutine runs a whole session in
// process — open, turn, close, shutdown — and checks with goleak that every
// goroutine the manager, its actors and the reaper started has stopped
// (goleak after each test; docs/architecture.md: "every goroutine has an
// owner").
func TestManager_SessionActorsLeaveNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	if err := reaper.BecomeSubreaper(); err != nil { // as cmd/acpx-sidecar does
		t.Fatal(err)
	}
	sup, err := reaper.NewSupervisor(reaper.Options{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultConfig()
	cfg.StateDir = t.TempDir()
	cfg.Launcher = launch.ReaperLauncher(sup)
	cfg.Bounds.TermGrace, cfg.Bounds.KillGrace = 300*time.Millisecond, 300*time.Millisecond
	host := &fakeHost{}
	m := NewManager(cfg, host)
	open := await(t, func(r func(any, error)) {
		m.Open(context.Background(), protocol.OpenParams{SessionKey: "k", Agent: "generic",
			Command: &protocol.Command{Path: faultAgent, Args: []string{"--mode", "normal"}}, Cwd: t.TempDir(),
			PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
	}).(protocol.OpenResult)
	res := await(t, func(r func(any, error)) {
		m.Prompt(context.Background(), protocol.PromptParams{Session: open.Session, RequestID: "t1", Prompt: json.RawMessage(`"hi"`)}, r)
	}).(protocol.PromptResult)
	if res.Status != "completed" {
		t.Fatalf("turn: %+v", res)
	}
	closed := await(t, func(r func(any, error)) {
		m.Close(protocol.CloseParams{Session: open.Session, Reason: "test"}, r)
	}).(protocol.CloseResult)
	if !closed.Proof.Complete {
		t.Fatalf("proof: %+v", closed.Proof)
	}
	m.Shutdown()
	m.Wait()
	sup.Seal()
	if err := sup.Close(); err != nil {
		t.Fatal(err)
	}
	host.mu.Lock()
	defer host.mu.Unlock()
	if len(host.notes) < 2 {
		t.Fatalf("expected the turn's updates as notifications, got %v", host.notes)
	}
}

// TestAdmission_UncontainablePlatformRefusedBeforeLaunch: docs/rules.md#r2 —
// with no containment in force (no Supervisor: what main runs with when no
// mechanism works), an open is refused with PLATFORM_UNSUPPORTED before
// anything is constructed or launched, and initialize says "none".
func TestAdmission_UncontainablePlatformRefusedBeforeLaunch(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := config.DefaultConfig()
	cfg.StateDir = t.TempDir()
	m := NewManager(cfg, &fakeHost{})
	if c := m.Initialize(protocol.InitializeParams{}).Capabilities.Containment; c != "none" {
		t.Fatalf("containment %q, want none", c)
	}
	marker := filepath.Join(t.TempDir(), "launched")
	ch := make(chan error, 1)
	m.Open(context.Background(), protocol.OpenParams{SessionKey: "k", Agent: "generic",
		Command: &protocol.Command{Path: "/bin/sh", Args: []string{"-c", "touch " + marker}}, Cwd: t.TempDir()},
		func(_ any, err error) { ch <- err })
	err := <-ch
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Data.Code != protocol.ErrPlatformUnsupported {
		t.Fatalf("got %v, want PLATFORM_UNSUPPORTED", err)
	}
	if _, statErr := os.Stat(marker); statErr == nil {
		t.Fatalf("the command was launched")
	}
	if len(m.List()) != 0 {
		t.Fatalf("a session was constructed: %+v", m.List())
	}
	m.Shutdown()
	m.Wait()
}
