package client_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkPerTurnCapacity: ACPX_BENCH_PERTURN_SESSIONS (default 1000)
// per-turn sessions of the fault agent in one sidecar with
// --max-live-trees 16 (docs/protocol.md §24): all opened at once, each
// runs two turns (the first on its open's tree, the second revives it),
// then all are closed. It fails unless every turn completes and every
// proof is complete; it reports the sidecar's RSS per admitted (parked)
// session — its VmRSS with every session parked, less its VmRSS before
// the first open — and the time of each phase.
func BenchmarkPerTurnCapacity(b *testing.B) {
	n := envInt("ACPX_BENCH_PERTURN_SESSIONS", 1000)
	for range b.N {
		raw := startRawArgs(b, "--max-live-trees", "16", "--max-sessions", strconv.Itoa(n+16))
		pid := strconv.Itoa(raw.cmd.Process.Pid)
		base := vmRSS(pid)
		cwd := b.TempDir()
		agentDir := cwd + "/.agent"
		if err := os.Mkdir(agentDir, 0o700); err != nil {
			b.Fatal(err)
		}
		// Each session's turns follow its own open: a per-turn session
		// that never ran a turn keeps its tree (and its live-tree slot)
		// until its first turn ends, so a host that opened them all before
		// prompting any would wait on itself.
		parked := 0
		raw.onNote = func(m envelope) {
			if m.Method == "session/lifecycle" && strings.Contains(string(m.Params), `"state":"parked"`) {
				parked++
			}
		}
		type step struct {
			key  int    // session index
			what string // "open", "t1", "t2"
		}
		pending := map[string]step{}
		sessions := make([]string, n)
		send := func(st step, method string, params map[string]any) {
			id, err := raw.send(method, params)
			if err != nil {
				b.Fatal(err)
			}
			pending[strconv.Itoa(id)] = st
		}
		t0 := time.Now()
		var openAll, turnsAll time.Duration
		opened := 0
		for i := range n {
			send(step{i, "open"}, "session/open", map[string]any{"sessionKey": "cap-" + strconv.Itoa(i), "agent": "generic", "cwd": cwd,
				"command":   map[string]any{"path": faultagentBin, "args": []string{"--state-dir", agentDir}},
				"lifecycle": "per-turn", "reviveWaitMs": 600000, "permissionMode": "approve-reads", "nonInteractivePermissions": "deny"})
		}
		for done := 0; done < n; {
			if !raw.sc.Scan() {
				b.Fatalf("the sidecar's stdout ended: %v", raw.sc.Err())
			}
			var m envelope
			if json.Unmarshal(raw.sc.Bytes(), &m) != nil {
				continue
			}
			if m.Method != "" {
				raw.onNote(m)
				continue
			}
			st, ok := pending[string(m.ID)]
			if !ok {
				continue
			}
			delete(pending, string(m.ID))
			if m.Error != nil {
				b.Fatalf("session %d %s: %s", st.key, st.what, m.Error)
			}
			switch st.what {
			case "open":
				var o struct {
					Session string `json:"session"`
				}
				_ = json.Unmarshal(m.Result, &o)
				sessions[st.key] = o.Session
				if opened++; opened == n {
					openAll = time.Since(t0)
				}
				send(step{st.key, "t1"}, "session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "hi"})
			case "t1", "t2":
				if !strings.Contains(string(m.Result), `"status":"completed"`) {
					b.Fatalf("session %d turn %s: %s", st.key, st.what, m.Result)
				}
				if st.what == "t1" {
					send(step{st.key, "t2"}, "session/prompt", map[string]any{"session": sessions[st.key], "requestId": "t2", "prompt": "hi"})
				} else {
					done++
				}
			}
		}
		turnsAll = time.Since(t0)
		for parked < 2*n {
			if err := raw.waitNote(func(m envelope) bool {
				return m.Method == "session/lifecycle" && strings.Contains(string(m.Params), `"state":"parked"`)
			}); err != nil {
				b.Fatal(err)
			}
			parked++
		}
		rss := vmRSS(pid)
		var ids []int
		for _, s := range sessions {
			id, _ := raw.send("session/close", map[string]any{"session": s})
			ids = append(ids, id)
		}
		t1 := time.Now()
		closed, _, err := raw.await(ids...)
		if err != nil {
			b.Fatalf("close: %v", err)
		}
		closeAll := time.Since(t1)
		incomplete := 0
		for _, r := range closed {
			if !strings.Contains(string(r), `"complete":true`) {
				incomplete++
			}
		}
		if incomplete > 0 {
			b.Fatalf("%d close proofs not complete", incomplete)
		}
		perKB := float64(rss-base) / float64(n)
		b.ReportMetric(perKB, "rss-kB/parked-session")
		b.ReportMetric(turnsAll.Seconds(), "all-turns-s")
		b.Logf("%d per-turn sessions, --max-live-trees 16 (load %s): every open answered after %v, every session's two turns (the second a revive) after %v, close all %v; "+
			"sidecar VmRSS %d kB before, %d kB with every session parked: %.1f kB per parked session; every turn completed, every proof complete",
			n, loadAvg(), openAll.Round(time.Millisecond), turnsAll.Round(time.Millisecond),
			closeAll.Round(time.Millisecond), base, rss, perKB)
	}
}

// vmRSS is /proc/<pid>/status VmRSS in kB.
func vmRSS(pid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}
