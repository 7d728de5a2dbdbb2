package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
)

// TestAttack_OverCapStdoutHoldsAtMostTheCap: three agents each write
// 256 MiB of stdout without a newline under a 64 MiB
// --max-provider-line-bytes (issue 18: "1 GiB of stdout without a newline
// under the default 256 MiB line cap grows the sidecar by 828 MiB"). Each
// line is dropped as it is read: the sidecar's peak resident set (VmHWM)
// grows by less than 1.5 × the cap per agent + 64 MiB; each connection
// keeps working (its turn completes), and so does a neighbour's.
func TestAttack_OverCapStdoutHoldsAtMostTheCap(t *testing.T) {
	e := newFaultEnv(t)
	const lineCap = 64 << 20
	s := startSidecar(t, "--state-dir", e.stateDir, "--max-provider-line-bytes", strconv.Itoa(lineCap))
	s.initialize(false)
	var sessions []string
	for i := 0; i < 3; i++ {
		sessions = append(sessions, openAttacker(s, e, "flood-"+strconv.Itoa(i), "stdout-flood=268435456").Session)
	}
	nb := startNeighbour(t, s, e, 300)
	pid := s.cmd.Process.Pid
	before := procStatusKiB(t, pid, "VmRSS")
	var calls []string
	for _, id := range sessions {
		calls = append(calls, s.start("session/prompt", map[string]any{"session": id, "requestId": "f1", "prompt": "go"}))
	}
	for i, c := range calls {
		f := s.await(c, 120*time.Second)
		if f.Error != nil {
			t.Fatalf("turn of %s: %+v", sessions[i], f.Error)
		}
		if chunks := agentChunks(s, sessions[i], "f1"); !contains(chunks, "stdout-flood: done") {
			t.Errorf("%s: the connection did not survive the over-cap line: %q", sessions[i], chunks)
		}
	}
	nb.check(t, 60*time.Second)
	peak := procStatusKiB(t, pid, "VmHWM")
	if bound := 3*rssBound(lineCap) - 2*(64<<10); peak-before > bound {
		t.Errorf("three 256 MiB lines under a %d MiB cap grew the sidecar's RSS by %d MiB (bound %d MiB)",
			lineCap>>20, (peak-before)>>10, bound>>10)
	} else {
		t.Logf("RSS %d MiB before, peak %d MiB (bound +%d MiB)", before>>10, peak>>10, bound>>10)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestAttack_PendingAsksAreBoundedPerTurn: an agent sends thousands of
// permission asks at once while the host, which declared
// permissionRequests, answers none (issue 18: 10,000 asks of 20 KB held
// +754 MiB). Only as many as --max-pending-asks (64) and
// --max-pending-ask-bytes allow reach the host; the rest are decided as
// nonInteractivePermissions says (deny) and audited "overflow" with the
// reject option; the sidecar's peak RSS grows by less than 1.5 × the
// bytes bound + 64 MiB; cancelling the turn answers the waiting asks, so
// the agent saw every ask answered. The count bound is met first by
// 1,000 asks of 1 KB, the bytes bound (4 MiB) by 50 asks of 200 KB.
func TestAttack_PendingAsksAreBoundedPerTurn(t *testing.T) {
	for _, c := range []struct {
		name       string
		asks, pad  int
		args       []string
		bytesBound int64
	}{
		{"count", 1000, 1000, nil, 16 << 20},
		{"bytes", 50, 200000, []string{"--max-pending-ask-bytes", "4194304"}, 4 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, append([]string{"--state-dir", e.stateDir}, c.args...)...)
			var mu sync.Mutex
			asked := 0
			s.onRequest = func(f *frame) any {
				mu.Lock()
				asked++
				mu.Unlock()
				return nil // a silent host: never answers
			}
			s.initialize(true)
			o := openAttacker(s, e, "asks", "ask-flood="+strconv.Itoa(c.asks)+":"+strconv.Itoa(c.pad))
			nb := startNeighbour(t, s, e, 300)
			pid := s.cmd.Process.Pid
			before := procStatusKiB(t, pid, "VmRSS")
			call := s.start("session/prompt", map[string]any{"session": o.Session, "requestId": "a1", "prompt": "go"})
			// Every ask is either escalated (waiting for the host) or decided.
			decided := countNotes(s, "session/permission", c.asks, ofSession(o.Session))
			s.waitFor(120*time.Second, "every ask escalated or decided", decided)
			peak := procStatusKiB(t, pid, "VmHWM")
			s.mustCall("session/cancel", map[string]any{"session": o.Session}, nil)
			if f := s.await(call, 60*time.Second); f.Error != nil {
				t.Fatalf("turn: %+v", f.Error)
			}
			escalated, overflow := 0, 0
			for _, n := range permissionNotes(s, o.Session) {
				switch n.Decision {
				case "escalated":
					escalated++
				case "overflow":
					overflow++
					if n.OptionID != "reject-once" || n.OptionKind != "reject_once" {
						t.Fatalf("overflow decided %+v, want the reject option", n)
					}
				}
			}
			mu.Lock()
			reached := asked
			mu.Unlock()
			if escalated == 0 || escalated > 64 || escalated+overflow != c.asks || reached > escalated {
				t.Errorf("%d asks: %d escalated (%d reached the host), %d overflow; want at most 64 escalated, the rest overflow",
					c.asks, escalated, reached, overflow)
			}
			chunks := agentChunks(s, o.Session, "a1")
			want := fmt.Sprintf("ask-flood: %d answered, %d selected, %d cancelled", c.asks, overflow, escalated)
			if !contains(chunks, want) {
				t.Errorf("agent reports %q, want %q", chunks, want)
			}
			if bound := rssBound(c.bytesBound); peak-before > bound {
				t.Errorf("%d pending asks of %d bytes grew the sidecar's RSS by %d MiB (bound %d MiB)", c.asks, c.pad, (peak-before)>>10, bound>>10)
			} else {
				t.Logf("%d escalated, %d overflow; RSS %d MiB before, peak %d MiB (bound +%d MiB)", escalated, overflow, before>>10, peak>>10, bound>>10)
			}
			nb.check(t, 60*time.Second)
			_, _ = s.shutdownAndExit()
			waitNoMarked(t, e.mark, e.work, 10*time.Second)
		})
	}
}

// TestAttack_JournalHoleCostsNoMemory: an agent grows its session's
// journal by a 256 MiB hole without a newline (issue 18: session/events
// then peaked at +1,141 MiB). session/events skips the over-cap line
// unread: the entries around it are served and the sidecar's peak RSS
// grows by less than 1.5 × the line cap + 64 MiB.
func TestAttack_JournalHoleCostsNoMemory(t *testing.T) {
	e := newFaultEnv(t)
	const lineCap = 16 << 20
	s := startSidecar(t, "--state-dir", e.stateDir, "--max-provider-line-bytes", strconv.Itoa(lineCap))
	s.initialize(false)
	seg := journal.SegmentPath(filepath.Join(e.stateDir, "sessions"), journal.Stem("holey"), 0)
	o := openAttacker(s, e, "holey", "grow-file="+seg+":268435456")
	nb := startNeighbour(t, s, e, 100)
	runTurn(t, s, o.Session, "t0", "go") // the journal exists (and holds t0) before the agent grows it
	runTurn(t, s, o.Session, "t1", "go") // grows the journal in the turn
	if chunks := agentChunks(s, o.Session, "t1"); !contains(chunks, "grow-file: ok") {
		t.Fatalf("the agent did not grow its journal: %q", chunks)
	}
	runTurn(t, s, o.Session, "t2", "go") // entries after the hole
	pid := s.cmd.Process.Pid
	before := procStatusKiB(t, pid, "VmRSS")
	var ev struct {
		Events []json.RawMessage `json:"events"`
	}
	s.mustCall("session/events", map[string]any{"sessionKey": "holey", "stateDir": e.stateDir, "limit": 10000}, &ev)
	peak := procStatusKiB(t, pid, "VmHWM")
	var before1, after1 bool
	for _, raw := range ev.Events {
		var en struct {
			Params struct {
				RequestID *string `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &en) == nil && en.Params.RequestID != nil {
			before1 = before1 || *en.Params.RequestID == "t0"
			after1 = after1 || *en.Params.RequestID == "t2"
		}
	}
	if !before1 || !after1 {
		t.Errorf("session/events did not serve the entries around the hole (t0 %v, t2 %v; %d events)", before1, after1, len(ev.Events))
	}
	if bound := rssBound(lineCap); peak-before > bound {
		t.Errorf("session/events over a 256 MiB hole grew the sidecar's RSS by %d MiB (bound %d MiB)", (peak-before)>>10, bound>>10)
	} else {
		t.Logf("RSS %d MiB before, peak %d MiB (bound +%d MiB)", before>>10, peak>>10, bound>>10)
	}
	nb.check(t, 60*time.Second)
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
