package adapter

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/session"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// discardHost frames every notification as the host connection does
// (jsonl.Writer, NDJSON; a BatchHost) into io.Discard; it counts them.
type discardHost struct {
	n atomic.Int64
	w *jsonl.Writer
}

func newDiscardHost() *discardHost { return &discardHost{w: jsonl.NewWriter(io.Discard, jsonl.NDJSON)} }

func (h *discardHost) Notify(method string, params json.RawMessage) error {
	h.n.Add(1)
	return h.w.WriteNotification(method, params)
}

// NotifyBatch frames ns in one write (BatchHost), as rpc.Server does.
func (h *discardHost) NotifyBatch(ns []jsonl.Notification) error {
	h.n.Add(int64(len(ns)))
	return h.w.WriteNotifications(ns)
}

func (h *discardHost) RequestPermission(ctx context.Context, _ protocol.PermissionRequestParams) (protocol.PermissionRequestResult, error) {
	return protocol.PermissionRequestResult{Outcome: "cancelled"}, nil
}
func (h *discardHost) PermissionRequests() bool { return false }

// pipeHost frames every notification as the host connection does
// (jsonl.Writer, NDJSON) into a pipe that a child process (cat, its output
// to /dev/null) drains, as a host process would: the sidecar side pays the
// write(2) to the host's pipe, the reader's CPU is the child's, outside
// this process's rusage.
type pipeHost struct {
	discardHost
	w   *os.File
	cmd *exec.Cmd
}

func newPipeHost(b *testing.B) *pipeHost {
	b.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("cat")
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		b.Skip("no cat to drain the host pipe:", err)
	}
	r.Close()
	h := &pipeHost{discardHost: discardHost{w: jsonl.NewWriter(w, jsonl.NDJSON)}, w: w, cmd: cmd}
	b.Cleanup(func() { h.w.Close(); _ = h.cmd.Wait() })
	return h
}

func benchManager(b *testing.B, mode reaper.Mode) (*Manager, *reaper.Supervisor) {
	return benchManagerHost(b, mode, newDiscardHost())
}

func benchManagerHost(b *testing.B, mode reaper.Mode, host session.Host) (*Manager, *reaper.Supervisor) {
	b.Helper()
	if err := reaper.BecomeSubreaper(); err != nil { // as cmd/acpx-sidecar does
		b.Skip("containment unavailable:", err)
	}
	sup, err := reaper.NewSupervisor(reaper.Options{Mode: mode, Logger: zap.NewNop()})
	if err != nil {
		b.Skip("containment unavailable:", err)
	}
	cfg := config.DefaultConfig()
	cfg.StateDir = b.TempDir()
	cfg.Launcher = launch.ReaperLauncher(sup)
	return NewManager(cfg, host), sup
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
// agent_message_chunk updates from the fault agent's stdout through the
// session actor to host frames (written to a pipe that a child process
// drains, as a host would: pipeHost). Reported per
// update: wall time (ns/update, the agent's time included), this
// process's CPU time (cpu-ns/update: getrusage, user + system, every
// goroutine of the sidecar side), its threads' context switches
// (ctxsw/update: each a thread put to sleep and woken, the bulk of the
// cost when lines arrive one at a time), heap allocations and bytes
// (allocs/update, B/update: runtime.MemStats over the whole run).
func BenchmarkTurnUpdates(b *testing.B) {
	m, sup := benchManagerHost(b, "", newPipeHost(b))
	const perTurn = 10000
	open := call(b, func(r func(any, error)) {
		m.Open(context.Background(), protocol.OpenParams{SessionKey: "flood", Agent: "generic",
			Command: &protocol.Command{Path: faultAgent, Args: []string{"--mode", "flood=" + strconv.Itoa(perTurn)}}, Cwd: b.TempDir(),
			PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
	}).(protocol.OpenResult)
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, sw0 := cpuTime(), ctxSwitches()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call(b, func(r func(any, error)) {
			m.Prompt(context.Background(), protocol.PromptParams{Session: open.Session, RequestID: "t" + strconv.Itoa(i), Prompt: json.RawMessage(`"go"`)}, r)
		})
	}
	b.StopTimer()
	cpu, sw := cpuTime()-cpu0, ctxSwitches()-sw0
	runtime.ReadMemStats(&ms1)
	n := float64(b.N * perTurn)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/update")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/update")
	b.ReportMetric(float64(sw)/n, "ctxsw/update")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/update")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/n, "B/update")
	call(b, func(r func(any, error)) { m.Close(protocol.CloseParams{Session: open.Session, Reason: "bench"}, r) })
	m.Shutdown()
	m.Wait()
	sup.Seal()
	_ = sup.Close()
}

// ctxSwitches is the number of context switches (voluntary and not) of
// this process's threads so far: each is a thread that slept and was
// woken, or was preempted.
func ctxSwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// cpuTime is this process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCloseToProof measures session/close → proof in cgroup mode
// with the fault agent (ACP session/close answered, stdin EOF, the agent
// exits, the tree is proven empty), one close at a time, with
// ACPX_BENCH_IDLE_SESSIONS (default 0) other sessions alive:
// ms/close-p50 is the median from Manager.Close to its reply.
func BenchmarkCloseToProof(b *testing.B) {
	m, sup := benchManager(b, reaper.ModeCgroup)
	cwd := b.TempDir()
	open := func(key string) string {
		return call(b, func(r func(any, error)) {
			m.Open(context.Background(), protocol.OpenParams{SessionKey: key, Agent: "generic",
				Command: &protocol.Command{Path: faultAgent}, Cwd: cwd,
				PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
		}).(protocol.OpenResult).Session
	}
	idle, _ := strconv.Atoi(os.Getenv("ACPX_BENCH_IDLE_SESSIONS"))
	for i := 0; i < idle; i++ {
		open("idle-" + strconv.Itoa(i))
	}
	var lat []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		id := open("close-" + strconv.Itoa(n))
		n++
		b.StartTimer()
		start := time.Now()
		res := call(b, func(r func(any, error)) { m.Close(protocol.CloseParams{Session: id, Reason: "bench"}, r) }).(protocol.CloseResult)
		lat = append(lat, time.Since(start))
		if !res.Proof.Complete || res.Proof.ProtocolClose.Outcome != protocol.CloseOK {
			b.Fatalf("proof: %+v", res.Proof)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms/close-p50")
	m.Shutdown()
	m.Wait()
	sup.Seal()
	_ = sup.Close()
}
