package e2e

// Helpers of the attack tests (attack_*_test.go): one test per attack of
// issue 18, each run by the fault agent's attack modes
// (internal/faultagent/modes_attack.go), with the outcome measured
// (docs/protocol.md §20, "Threat model").

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sha256Hex is the hex SHA-256 of s (what the ledger keeps of a marker).
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// procStatusKiB reads a "Vm…" field of /proc/<pid>/status in KiB (VmRSS:
// resident now, VmHWM: the peak resident set since the process started).
func procStatusKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// rssBound is the bound on the sidecar's resident-set growth an attack may
// cause with a cap of capBytes: 1.5 × the cap + 64 MiB (issue 18), in KiB.
func rssBound(capBytes int64) int64 { return (capBytes*3/2 + 64<<20) >> 10 }

// neighbour is a session of an ordinary agent streaming a turn beside an
// attack: it must keep streaming through it.
type neighbour struct {
	s       *sidecar
	session string
	reqID   string
	call    string
	n       int
}

// startNeighbour opens a fault-agent session that streams n updates a turn
// and starts one turn; check waits for it.
func startNeighbour(t *testing.T, s *sidecar, e *faultEnv, n int) *neighbour {
	t.Helper()
	o := e.open(s, "neighbour-"+randHex(4), "flood="+strconv.Itoa(n))
	nb := &neighbour{s: s, session: o.Session, reqID: "nb-1", n: n}
	nb.call = s.start("session/prompt", map[string]any{"session": o.Session, "requestId": nb.reqID, "prompt": "go"})
	return nb
}

// check waits (up to d) for the neighbour's turn and fails the test unless
// it completed with every update it streamed, seq without a gap.
func (nb *neighbour) check(t *testing.T, d time.Duration) {
	t.Helper()
	f := nb.s.await(nb.call, d)
	var res struct {
		Status string `json:"status"`
	}
	if f.Error != nil || json.Unmarshal(f.Result, &res) != nil || res.Status != "completed" {
		t.Fatalf("the neighbour's turn did not complete: %+v %s", f.Error, f.Result)
	}
	ups := updatesOf(nb.s, nb.session)
	floods := 0
	for i, u := range ups {
		if u.Seq != uint64(i+1) {
			t.Fatalf("neighbour update %d has seq %d", i, u.Seq)
		}
		if bytes.Contains(u.Update, []byte(`"flood `)) {
			floods++
		}
	}
	if floods != nb.n {
		t.Fatalf("the neighbour streamed %d of its %d updates", floods, nb.n)
	}
}

// countNotes returns a condition for waitFor: at least n notifications of
// method whose params satisfy pred (nil: any) have arrived. It counts
// incrementally (under s.mu, as waitFor calls it), so a flood of frames
// costs one look at each.
func countNotes(s *sidecar, method string, n int, pred func(json.RawMessage) bool) func() bool {
	seen, count := 0, 0
	return func() bool {
		for ; seen < len(s.notes); seen++ {
			if f := s.notes[seen]; f.Method == method && (pred == nil || pred(f.Params)) {
				count++
			}
		}
		return count >= n
	}
}

// ofSession is a countNotes predicate: params.session is session.
func ofSession(session string) func(json.RawMessage) bool {
	needle := []byte(`"session":"` + session + `"`)
	return func(p json.RawMessage) bool { return bytes.Contains(p, needle) }
}

// writeJSON writes v as JSON to path (0600).
func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pollUntil polls cond (a file or process-table fact, which sends no
// frame) every 20 ms until it holds, failing the test after d.
func pollUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by d
	}
}

// attackerParams are e.openParams for an attacking agent with no kernel
// sandbox ("filesystem": "off", so signals "all" too): the defences of
// docs/protocol.md §20 hold whatever the sandbox mode, and without one the
// agent can write the state dir and signal the sidecar, as the attacks
// need.
func attackerParams(e *faultEnv, key, modes string) map[string]any {
	p := e.openParams(key, modes)
	p["sandbox"] = map[string]any{"filesystem": "off"}
	return p
}

// openAttacker opens an unsandboxed attacking session (attackerParams).
func openAttacker(s *sidecar, e *faultEnv, key, modes string) openResult {
	s.t.Helper()
	var o openResult
	s.mustCall("session/open", attackerParams(e, key, modes), &o)
	if o.Session == "" {
		s.t.Fatalf("session/open returned no session id")
	}
	return o
}
