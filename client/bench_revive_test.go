package client_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"testing"
	"time"
)

// BenchmarkReviveOverhead: a per-turn session of the fault agent (its
// sessions persisted in a directory, published to a file:// store at
// every retire) revived by ACPX_BENCH_REVIVES (default 200) prompts, each
// sent once the previous retire parked the session: the time from the
// prompt sent to its result, against the agent's own floor — this process
// spawns the fault agent and runs ACP initialize, session/load and
// session/prompt on its stdio, as a revive does. Reported: p50 and p99 of
// both, and the revive's own overhead, the difference of the p50s
// (docs/protocol.md §24; issue goal ≤ 5 ms).
func BenchmarkReviveOverhead(b *testing.B) {
	n := envInt("ACPX_BENCH_REVIVES", 200)
	for range b.N {
		key := filepath.Join(b.TempDir(), "k")
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		if err := os.WriteFile(key, k, 0o600); err != nil {
			b.Fatal(err)
		}
		raw := startRawArgs(b, "--state-store", "file://"+b.TempDir(), "--state-key-file", key)
		// The agent's dir inside its cwd: writable under the default
		// sandbox (workspace), which the benchmark keeps.
		cwd := b.TempDir()
		agentDir := filepath.Join(cwd, ".agent")
		if err := os.Mkdir(agentDir, 0o700); err != nil {
			b.Fatal(err)
		}
		params := map[string]any{"sessionKey": "revive", "agent": "generic", "cwd": cwd, "lifecycle": "per-turn",
			"command":        map[string]any{"path": faultagentBin, "args": []string{"--state-dir", agentDir}},
			"permissionMode": "approve-reads", "nonInteractivePermissions": "deny", "stateDirs": map[string]string{"agent": agentDir}}
		res, err := raw.call("session/open", params)
		if err != nil {
			b.Fatal(err)
		}
		var o struct {
			Session  string `json:"session"`
			Identity struct {
				BackendSessionID string `json:"backendSessionId"`
			} `json:"identity"`
		}
		_ = json.Unmarshal(res, &o)
		parked := func(m envelope) bool {
			return m.Method == "session/lifecycle" && bytes.Contains(m.Params, []byte(`"state":"parked"`))
		}
		if _, err := raw.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t0", "prompt": "hi"}); err != nil {
			b.Fatal(err)
		}
		var revive, floor []time.Duration
		for i := range n {
			if err := raw.waitNote(parked); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if _, err := raw.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t" + strconv.Itoa(i+1), "prompt": "hi"}); err != nil {
				b.Fatalf("revive %d: %v", i, err)
			}
			revive = append(revive, time.Since(t0))
			d, err := agentReviveFloor(cwd, agentDir, o.Identity.BackendSessionID)
			if err != nil {
				b.Fatalf("agent floor: %v", err)
			}
			floor = append(floor, d)
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		r50, r99 := percentile(revive, 50), percentile(revive, 99)
		f50, f99 := percentile(floor, 50), percentile(floor, 99)
		b.ReportMetric(ms(r50), "revive-p50-ms")
		b.ReportMetric(ms(r99), "revive-p99-ms")
		b.ReportMetric(ms(f50), "agent-floor-p50-ms")
		b.ReportMetric(ms(r50-f50), "overhead-p50-ms")
		b.Logf("prompt on a parked session -> result, %d revives (load %s): revive p50 %.2f ms p99 %.2f ms; the agent's own spawn+initialize+load+prompt p50 %.2f ms p99 %.2f ms; the revive's overhead p50 %.2f ms",
			n, loadAvg(), ms(r50), ms(r99), ms(f50), ms(f99), ms(r50-f50))
	}
}

// agentReviveFloor spawns the fault agent (its sessions in agentDir) and
// runs initialize, session/load of id and one session/prompt, each after
// the previous answer: what a revive asks of the agent. It returns the
// time from before the spawn to the prompt's result, then ends the agent.
// The agent persists the turn, as the sidecar's turns do.
func agentReviveFloor(cwd, agentDir, id string) (time.Duration, error) {
	cmd := exec.Command(faultagentBin, "--state-dir", agentDir)
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
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	ask := func(n int, method string, params any) error {
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params})
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		for sc.Scan() {
			var m envelope
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Method == "" && string(m.ID) == fmt.Sprint(n) {
				if m.Error != nil {
					return fmt.Errorf("%s: %s", method, m.Error)
				}
				return nil
			}
		}
		return fmt.Errorf("%s: the agent's stdout ended", method)
	}
	steps := []struct {
		method string
		params any
	}{
		{"initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}},
		{"session/load", map[string]any{"sessionId": id, "cwd": cwd, "mcpServers": []any{}}},
		{"session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "hi"}}}},
	}
	for i, st := range steps {
		if err := ask(i+1, st.method, st.params); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}
