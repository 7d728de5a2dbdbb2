package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
)

// BenchmarkOpenToResult: the time from session/open sent to its result,
// for a fault agent that answers at once, over ACPX_BENCH_OPENS (default
// 200) opens of each kind, interleaved: the agent's own handshake (this
// process spawns it and runs ACP initialize and session/new on its
// stdio, as the sidecar does), the sidecar's open driven by hand (the
// bare reader), and Client.Open. Each session is closed before the next
// open (not timed). Reported: p50 and p99 of each, and the sidecar's
// admission overhead, its open's p50 minus the handshake's.
func BenchmarkOpenToResult(b *testing.B) {
	n := envInt("ACPX_BENCH_OPENS", 200)
	for range b.N {
		raw := startRaw(b)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		c, err := client.Start(ctx, client.Options{Binary: sidecarBin, StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		cwd := b.TempDir()
		var agent, bare, viaClient []time.Duration
		for i := range n {
			d, err := agentHandshake(cwd)
			if err != nil {
				b.Fatalf("agent handshake: %v", err)
			}
			agent = append(agent, d)

			t0 := time.Now()
			id, err := raw.open(fmt.Sprintf("raw-%d", i), cwd, "normal")
			if err != nil {
				b.Fatalf("session/open: %v", err)
			}
			bare = append(bare, time.Since(t0))
			if _, err := raw.call("session/close", map[string]any{"session": id}); err != nil {
				b.Fatalf("session/close: %v", err)
			}

			t0 = time.Now()
			s, err := c.Open(ctx, client.OpenParams{SessionKey: fmt.Sprintf("client-%d", i), Agent: "generic", Cwd: cwd,
				Command: client.Command{Path: faultagentBin}, PermissionMode: "approve-reads", NonInteractivePermissions: "deny"})
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			viaClient = append(viaClient, time.Since(t0))
			if _, err := s.Close(ctx, client.CloseParams{}); err != nil {
				b.Fatalf("Close: %v", err)
			}
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		a50, a99 := percentile(agent, 50), percentile(agent, 99)
		o50, o99 := percentile(bare, 50), percentile(bare, 99)
		c50, c99 := percentile(viaClient, 50), percentile(viaClient, 99)
		b.ReportMetric(ms(a50), "handshake-p50-ms")
		b.ReportMetric(ms(o50), "open-p50-ms")
		b.ReportMetric(ms(o99), "open-p99-ms")
		b.ReportMetric(ms(o50-a50), "overhead-p50-ms")
		b.ReportMetric(ms(c50), "client-open-p50-ms")
		b.Logf("session/open -> result, %d opens each, interleaved (load %s): agent handshake alone p50 %.2f ms p99 %.2f ms; sidecar open (bare) p50 %.2f ms p99 %.2f ms; through Client.Open p50 %.2f ms p99 %.2f ms; admission overhead p50 %.2f ms",
			n, loadAvg(), ms(a50), ms(a99), ms(o50), ms(o99), ms(c50), ms(c99), ms(o50-a50))
		if _, err := c.Shutdown(ctx); err != nil {
			b.Errorf("Shutdown: %v", err)
		}
		cancel()
	}
}

// agentHandshake spawns the fault agent and runs ACP initialize, then
// session/new, each after the previous answer; it returns the time from
// before the spawn to session/new's result, then ends the agent.
func agentHandshake(cwd string) (time.Duration, error) {
	cmd := exec.Command(faultagentBin)
	cmd.Dir = cwd
	w, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = w.Close()
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(r)
	ask := func(id int, method string, params any) error {
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		for sc.Scan() {
			var m envelope
			if json.Unmarshal(sc.Bytes(), &m) == nil && string(m.ID) == fmt.Sprint(id) {
				if m.Error != nil {
					return fmt.Errorf("%s: %s", method, m.Error)
				}
				return nil
			}
		}
		return fmt.Errorf("%s: the agent's stdout ended", method)
	}
	if err := ask(1, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}); err != nil {
		return 0, err
	}
	if err := ask(2, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}
