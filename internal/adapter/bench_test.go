package adapter

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// discardHost drops notifications; it counts them.
type discardHost struct{ n int }

func (h *discardHost) Notify(string, any) error { h.n++; return nil }
func (h *discardHost) RequestPermission(ctx context.Context, _ protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	return protocol.PermissionRequestResult{Outcome: "cancelled"}, nil
}
func (h *discardHost) PermissionRequests() bool { return false }

func benchManager(b *testing.B, mode reaper.Mode) (*Manager, *reaper.Supervisor) {
	b.Helper()
	if err := reaper.BecomeSubreaper(); err != nil { // as cmd/acpx-sidecar does
		b.Skip("containment unavailable:", err)
	}
	sup, err := reaper.NewSupervisor(reaper.Options{Mode: mode, Logger: zap.NewNop()})
	if err != nil {
		b.Skip("containment unavailable:", err)
	}
	cfg := DefaultConfig()
	cfg.StateDir = b.TempDir()
	cfg.Launcher = ReaperLauncher(sup)
	return NewManager(cfg, &discardHost{}), sup
}

func call(b *testing.B, fn func(reply func(any, error))) any {
	ch := make(chan result, 1)
	fn(func(v any, err error) { ch <- result{v, err} })
	select {
	case r := <-ch:
		if r.err != nil {
			b.Fatalf("request failed: %v", r.err)
		}
		return r.v
	case <-time.After(30 * time.Second):
		b.Fatal("no reply")
		return nil
	}
}

// BenchmarkSessionLifecycle measures one whole session against the fault
// agent: launch + handshake + record, one turn, close with a proof.
// Reported per session (ns/op, B/op of the sidecar side).
func BenchmarkSessionLifecycle(b *testing.B) {
	for _, mode := range []reaper.Mode{reaper.ModeCgroup, reaper.ModeProcessGroup} {
		b.Run(string(mode), func(b *testing.B) {
			m, sup := benchManager(b, mode)
			cwd := b.TempDir()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				open := call(b, func(r func(any, error)) {
					m.Open(context.Background(), protocol.OpenParams{SessionKey: "bench-" + strconv.Itoa(i), Agent: "generic",
						Command: &protocol.Command{Path: faultAgent}, Cwd: cwd,
						PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
				}).(protocol.OpenResult)
				call(b, func(r func(any, error)) {
					m.Prompt(context.Background(), protocol.PromptParams{Session: open.Session, RequestID: "t", Prompt: json.RawMessage(`"hi"`)}, r)
				})
				call(b, func(r func(any, error)) { m.Close(protocol.CloseParams{Session: open.Session, Reason: "bench"}, r) })
			}
			b.StopTimer()
			m.Shutdown()
			m.Wait()
			sup.Seal()
			_ = sup.Close()
		})
	}
}

// BenchmarkTurnUpdates measures the update path: one turn streaming 10,000
// agent_message_chunk updates through the session actor to the host
// (ns per update, allocations per update).
func BenchmarkTurnUpdates(b *testing.B) {
	m, sup := benchManager(b, "")
	const perTurn = 10000
	open := call(b, func(r func(any, error)) {
		m.Open(context.Background(), protocol.OpenParams{SessionKey: "flood", Agent: "generic",
			Command: &protocol.Command{Path: faultAgent, Args: []string{"--mode", "flood=" + strconv.Itoa(perTurn)}}, Cwd: b.TempDir(),
			PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
	}).(protocol.OpenResult)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call(b, func(r func(any, error)) {
			m.Prompt(context.Background(), protocol.PromptParams{Session: open.Session, RequestID: "t" + strconv.Itoa(i), Prompt: json.RawMessage(`"go"`)}, r)
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perTurn), "ns/update")
	call(b, func(r func(any, error)) { m.Close(protocol.CloseParams{Session: open.Session, Reason: "bench"}, r) })
	m.Shutdown()
	m.Wait()
	sup.Seal()
	_ = sup.Close()
}
