package adapter

// Scale: many sessions of the fault agent in one sidecar (this process, as
// cmd/acpx-sidecar runs the Manager), in cgroup containment. The same run
// is a small test (TestScale_FiftySessionsEveryProofCompleteFirstTime, in
// `make test`) and, with ACPX_SCALE_SESSIONS=1000, the scale run of `make
// scale` / `make bench` (BenchmarkScale). docs/operations.md, "Sizing",
// quotes its numbers.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/config"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// scaleReport is what one scale run measured.
type scaleReport struct {
	Sessions int
	// Per idle session, outside the agents: growth of this process's
	// private memory (RssAnon) and threads, plus every helper process
	// (watchdog, guardians: children of this process running the binary
	// as __guardian) — kB and threads.
	KBPerSession, ThreadsPerSession float64
	Helpers                         int
	OpenAll, PromptAll, BurstClose  time.Duration
	// CloseP50 is the median close → proof time of sessions closed one at
	// a time (cooperative: the agent exits on stdin EOF); ProtocolP50 the
	// median of its ACP session/close part (proof startedAt to the first
	// signal, or to finishedAt when none was needed).
	CloseP50, ProtocolP50 time.Duration
	// Incomplete counts close answers whose proof was not complete.
	Incomplete int
}

func (r scaleReport) String() string {
	return fmt.Sprintf("%d sessions: %.0f kB and %.2f threads per idle session outside the agents (%d helper processes); "+
		"open all %v, prompt all %v, burst close of all %v; close→proof p50 %v (ACP session/close part %v); %d incomplete proofs",
		r.Sessions, r.KBPerSession, r.ThreadsPerSession, r.Helpers, r.OpenAll.Round(time.Millisecond),
		r.PromptAll.Round(time.Millisecond), r.BurstClose.Round(time.Millisecond), r.CloseP50.Round(10*time.Microsecond),
		r.ProtocolP50.Round(10*time.Microsecond), r.Incomplete)
}

// procStatus reads "Key: value kB" / "Key: n" fields of /proc/<pid>/status.
func procStatus(pid string, key string) int {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// helperUsage sums RssAnon (kB) and threads of this process's helper
// children (argv[1] "__guardian": the watchdog, or guardians).
func helperUsage() (kb, threads, n int) {
	tids, _ := os.ReadDir("/proc/self/task")
	for _, tid := range tids {
		b, _ := os.ReadFile(filepath.Join("/proc/self/task", tid.Name(), "children"))
		for _, pid := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			if args := bytes.Split(cmd, []byte{0}); len(args) > 1 && string(args[1]) == reaper.GuardianArg {
				kb += procStatus(pid, "RssAnon")
				threads += procStatus(pid, "Threads")
				n++
			}
		}
	}
	return kb, threads, n
}

// runScale opens n sessions of the fault agent concurrently, prompts each
// once, measures the idle cost, closes closeOneByOne of them one at a time
// (latency), then all the others at once (burst).
func runScale(tb testing.TB, n, closeOneByOne int) scaleReport {
	tb.Helper()
	if err := reaper.BecomeSubreaper(); err != nil {
		tb.Skip("containment unavailable:", err)
	}
	sup, err := reaper.NewSupervisor(reaper.Options{Mode: reaper.ModeCgroup, Logger: zap.NewNop()})
	if err != nil {
		tb.Skip("cgroup containment unavailable:", err)
	}
	cfg := config.DefaultConfig()
	cfg.StateDir = tb.TempDir()
	cfg.Launcher = launch.ReaperLauncher(sup)
	m := NewManager(cfg, newDiscardHost())
	defer func() {
		m.Shutdown()
		m.Wait()
		sup.Seal()
		_ = sup.Close()
	}()
	cwd := tb.TempDir()
	wait := func(fn func(reply func(any, error))) (any, error) {
		ch := make(chan result, 1)
		fn(func(v any, err error) { ch <- result{v, err} })
		select {
		case r := <-ch:
			return r.v, r.err
		case <-time.After(120 * time.Second):
			return nil, fmt.Errorf("no reply within 120 s")
		}
	}
	all := func(what string, from int, f func(i int) error) time.Duration {
		start := time.Now()
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := from; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(i); err != nil {
					errs <- fmt.Errorf("%s %d: %w", what, i, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			tb.Fatal(err)
		}
		return time.Since(start)
	}
	var rep scaleReport
	rep.Sessions = n
	runtimeGC()
	anon0, thr0 := procStatus("self", "RssAnon"), procStatus("self", "Threads")
	sessions := make([]string, n)
	rep.OpenAll = all("open", 0, func(i int) error {
		v, err := wait(func(r func(any, error)) {
			m.Open(context.Background(), protocol.OpenParams{SessionKey: "scale-" + strconv.Itoa(i), Agent: "generic",
				Command: &protocol.Command{Path: faultAgent}, Cwd: cwd,
				PermissionMode: "approve-reads", NonInteractivePermissions: "deny"}, r)
		})
		if err == nil {
			sessions[i] = v.(protocol.OpenResult).Session
		}
		return err
	})
	rep.PromptAll = all("prompt", 0, func(i int) error {
		_, err := wait(func(r func(any, error)) {
			m.Prompt(context.Background(), protocol.PromptParams{Session: sessions[i], RequestID: "t", Prompt: json.RawMessage(`"hi"`)}, r)
		})
		return err
	})
	runtimeGC()
	hkb, hthr, hn := helperUsage()
	rep.Helpers = hn
	rep.KBPerSession = float64(procStatus("self", "RssAnon")-anon0+hkb) / float64(n)
	rep.ThreadsPerSession = float64(procStatus("self", "Threads")-thr0+hthr) / float64(n)

	var incompleteMu sync.Mutex
	var protoLat []time.Duration
	closeOne := func(i int) error {
		v, err := wait(func(r func(any, error)) { m.Close(protocol.CloseParams{Session: sessions[i], Reason: "scale"}, r) })
		if err != nil {
			return err
		}
		if p := v.(protocol.CloseResult).Proof; p != nil && i < closeOneByOne {
			end := p.FinishedAt.Time
			if len(p.Signals) > 0 {
				end = p.Signals[0].At.Time
			}
			protoLat = append(protoLat, end.Sub(p.StartedAt.Time))
		}
		if p := v.(protocol.CloseResult).Proof; p == nil || !p.Complete {
			incompleteMu.Lock()
			rep.Incomplete++
			incompleteMu.Unlock()
			if p != nil {
				tb.Errorf("session %d: incomplete proof: %+v %+v", i, p.Verified, p.Errors)
			}
		}
		return nil
	}
	closeOneByOne = min(closeOneByOne, n)
	lat := make([]time.Duration, 0, closeOneByOne)
	for i := 0; i < closeOneByOne; i++ {
		start := time.Now()
		if err := closeOne(i); err != nil {
			tb.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
		rep.CloseP50 = lat[len(lat)/2]
		sort.Slice(protoLat, func(a, b int) bool { return protoLat[a] < protoLat[b] })
		rep.ProtocolP50 = protoLat[len(protoLat)/2]
	}
	rep.BurstClose = all("close", closeOneByOne, closeOne)
	return rep
}

// runtimeGC collects garbage and returns freed memory to the kernel, so
// RssAnon shows what is live.
func runtimeGC() { debug.FreeOSMemory() }

// TestScale_FiftySessionsEveryProofCompleteFirstTime: 50 concurrent
// sessions in cgroup mode, opened, prompted and closed at once: every
// close answer carries a complete proof.
func TestScale_FiftySessionsEveryProofCompleteFirstTime(t *testing.T) {
	rep := runScale(t, 50, 5)
	if rep.Incomplete != 0 {
		t.Fatalf("%d of %d proofs incomplete in their first response", rep.Incomplete, rep.Sessions)
	}
	if rep.Helpers != 1 {
		t.Fatalf("%d helper processes for %d cgroup sessions, want the one watchdog", rep.Helpers, rep.Sessions)
	}
	t.Log(rep)
}

// BenchmarkScale is the scale run: ACPX_SCALE_SESSIONS (default 1000)
// sessions; reports per-session memory (kB/session) and threads, burst
// close time and close→proof p50. One iteration is one whole run.
func BenchmarkScale(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("ACPX_SCALE_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	var rep scaleReport
	for i := 0; i < b.N; i++ {
		rep = runScale(b, n, 50)
	}
	b.ReportMetric(rep.KBPerSession, "kB/session")
	b.ReportMetric(rep.ThreadsPerSession, "threads/session")
	b.ReportMetric(float64(rep.Helpers), "helpers")
	b.ReportMetric(rep.BurstClose.Seconds(), "s/burst-close")
	b.ReportMetric(float64(rep.CloseP50.Microseconds())/1000, "ms/close-p50")
	b.ReportMetric(float64(rep.ProtocolP50.Microseconds())/1000, "ms/acp-close-p50")
	b.ReportMetric(float64(rep.Incomplete), "incomplete")
	b.Log(rep)
}
