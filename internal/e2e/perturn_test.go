package e2e

// Per-turn sessions through the built binary with the fault agent
// (docs/protocol.md §24, after the design's PROTOCOL §10.1): the tree is
// gone between turns, the next prompt revives it, the agent remembers.

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lifecycleNote is a session/lifecycle notification.
type lifecycleNote struct {
	Session string  `json:"session"`
	State   string  `json:"state"`
	Proof   *proof  `json:"proof"`
	Error   *turnEr `json:"error"`
}

type turnEr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func lifecycleNotes(s *sidecar, session string) []lifecycleNote {
	return lifecycleIn(s.notesOf("session/lifecycle"), session)
}

// lifecycleIn decodes the session/lifecycle frames of session among fs.
func lifecycleIn(fs []*frame, session string) []lifecycleNote {
	var out []lifecycleNote
	for _, f := range fs {
		var n lifecycleNote
		if f.Method == "session/lifecycle" && json.Unmarshal(f.Params, &n) == nil && n.Session == session {
			out = append(out, n)
		}
	}
	return out
}

// waitParked waits for the session's n-th parked notification and returns
// its retire proof.
func waitParked(t *testing.T, s *sidecar, session string, n int) proof {
	t.Helper()
	var got *proof
	s.waitFor(30*time.Second, fmt.Sprintf("session/lifecycle parked #%d of %s", n, session), func() bool {
		k := 0
		for _, l := range lifecycleIn(s.notes, session) { // under s.mu
			if l.State == "parked" && l.Proof != nil {
				if k++; k == n {
					got = l.Proof
					return true
				}
			}
		}
		return false
	})
	return *got
}

// turnText is the agent_message_chunk text of the session's updates of
// requestID.
func turnText(s *sidecar, session, requestID string) string {
	var b strings.Builder
	for _, f := range s.notesOf("session/update") {
		var u struct {
			Session   string `json:"session"`
			RequestID string `json:"requestId"`
			Update    struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		}
		if json.Unmarshal(f.Params, &u) == nil && u.Session == session && u.RequestID == requestID && u.Update.Kind == "agent_message_chunk" {
			b.WriteString(u.Update.Content.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// perTurnParams are fault-agent open params for a per-turn session whose
// agent persists its sessions in agentState (so a new process can load
// them) and recalls earlier prompts.
func perTurnParams(e *faultEnv, key, agentState, modes string) map[string]any {
	p := resumeParams(e, key, agentState, modes)
	p["lifecycle"] = "per-turn"
	return p
}

// TestPerTurn_TreeGoneBetweenTurnsAndTheAgentRemembers: after each turn
// the tree is ended (a complete proof, origin retire, every process
// listed; no process carrying the session's marker is left) and the
// session is parked under the same id; the next prompt revives it — a new
// provider process that loads the same ACP session — and that process
// remembers the first turn's prompt. seq continues without a gap, the host
// hears parked, reviving, live, parked, and the close of the parked
// session proves an empty tree without launching anything.
func TestPerTurn_TreeGoneBetweenTurnsAndTheAgentRemembers(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := seedMustOpen(s, perTurnParams(e, "pt", agentState, "recall"))

	runTurn(t, s, o.Session, "t1", "the first prompt")
	p1 := waitParked(t, s, o.Session, 1)
	if !p1.Complete || p1.Origin != "retire" || len(p1.Processes) == 0 {
		t.Fatalf("retire proof %+v: want complete, origin retire, its processes", p1)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	st := statusOf(s, o.Session)
	if st.State != "parked" {
		t.Fatalf("status after the retire: state %q, want parked", st.State)
	}

	runTurn(t, s, o.Session, "t2", "the second prompt")
	if txt := turnText(s, o.Session, "t2"); !strings.Contains(txt, "recall: 1 earlier prompts: the first prompt") {
		t.Fatalf("the revived agent does not remember the first turn; turn 2 said %q", txt)
	}
	p2 := waitParked(t, s, o.Session, 2)
	if !p2.Complete || p2.Processes[0].Pid == p1.Processes[0].Pid {
		t.Fatalf("second retire proof %+v: want complete, a new provider pid", p2)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
	var states []string
	for _, l := range lifecycleNotes(s, o.Session) {
		states = append(states, l.State)
	}
	if strings.Join(states, " ") != "parked reviving live parked" {
		t.Errorf("session/lifecycle states %v, want parked reviving live parked", states)
	}
	ups := updatesOf(s, o.Session)
	for i, u := range ups {
		if u.Seq != uint64(i+1) {
			t.Fatalf("update %d has seq %d: seq must continue across the revive without a gap", i, u.Seq)
		}
	}
	cp := closeProof(s, o.Session, nil)
	if !cp.Complete || len(cp.Processes) != 0 || cp.Origin != "close" {
		t.Fatalf("close of a parked session: %+v, want complete, no process", cp)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestPerTurn_ReviveResumesWhereTheAgentOffersIt: an agent that offers
// session/resume is revived by session/resume, never session/load or
// session/new (docs/protocol.md §24).
func TestPerTurn_ReviveResumesWhereTheAgentOffersIt(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	rec := seedRecordFile(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := seedMustOpen(s, perTurnParams(e, "pt-resume", agentState, "resume,recall,record="+rec))
	runTurn(t, s, o.Session, "t1", "one")
	waitParked(t, s, o.Session, 1)
	runTurn(t, s, o.Session, "t2", "two")
	if txt := turnText(s, o.Session, "t2"); !strings.Contains(txt, "recall: 1 earlier prompts: one") {
		t.Fatalf("turn 2 said %q: the resumed agent does not remember", txt)
	}
	count := map[string]int{}
	for _, m := range seedReadAgent(t, rec) {
		if m.Dir == "recv" {
			count[m.Msg.Method]++
		}
	}
	if count["session/new"] != 1 || count["session/resume"] != 1 || count["session/load"] != 0 {
		t.Fatalf("agent received new %d, resume %d, load %d: want 1, 1, 0", count["session/new"], count["session/resume"], count["session/load"])
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}

// TestPerTurn_MaxLiveTreesHoldsUnderLoad: with --max-live-trees 2, ten
// per-turn sessions prompting at once never have more than two provider
// processes alive (a scan of the marker throughout, and sidecar/stats),
// and every turn completes.
func TestPerTurn_MaxLiveTreesHoldsUnderLoad(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, "--state-dir", e.stateDir, "--max-live-trees", "2")
	s.initialize(false)
	const n = 10
	var maxSeen atomic.Int32
	stop := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		for {
			// A tree's init is no provider; a process whose argv is gone
			// by now had ended before this count.
			pids := slices.DeleteFunc(markedPids(e.mark, e.work), func(pid int) bool {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				return len(b) == 0 || isHelper(pid)
			})
			if k := int32(len(pids)); k > maxSeen.Load() {
				maxSeen.Store(k)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := fmt.Sprintf("cap-%d", i)
			f := s.call("session/open", perTurnParams(e, key, agentState, "recall"))
			if f.Error != nil {
				errs <- fmt.Errorf("open %s: %+v", key, f.Error)
				return
			}
			var o openResult
			_ = json.Unmarshal(f.Result, &o)
			for turn := 1; turn <= 2; turn++ {
				f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": fmt.Sprintf("t%d", turn), "prompt": "p"})
				var r promptUsage
				if f.Error != nil || json.Unmarshal(f.Result, &r) != nil || r.Status != "completed" {
					errs <- fmt.Errorf("%s turn %d: %+v %s", key, turn, f.Error, f.Result)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	<-scanned
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := maxSeen.Load(); m > 2 || m == 0 {
		t.Errorf("at most %d provider processes were seen alive at once, want 1..2 (--max-live-trees 2)", m)
	}
	var stats struct {
		LiveTrees struct {
			Live, Waiting, Max int
		} `json:"liveTrees"`
	}
	s.mustCall("sidecar/stats", map[string]any{}, &stats)
	if stats.LiveTrees.Max != 2 {
		t.Errorf("sidecar/stats liveTrees %+v, want max 2", stats.LiveTrees)
	}
	_, _ = s.shutdownAndExit()
	waitNoMarked(t, e.mark, e.work, 5*time.Second)
}
