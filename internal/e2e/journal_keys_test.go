package e2e

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

// nEvent is one session/events entry with the key-wide fields.
type nEvent struct {
	N       uint64          `json:"n"`
	Session string          `json:"session"`
	Seq     uint64          `json:"seq"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// nGap is one of session/events' gaps.
type nGap struct {
	FromN  uint64 `json:"fromN"`
	ToN    uint64 `json:"toN"`
	Reason string `json:"reason"`
}

// nPage is a session/events result read by n.
type nPage struct {
	Events   []nEvent `json:"events"`
	NextN    uint64   `json:"nextN"`
	Gaps     []nGap   `json:"gaps"`
	Complete *bool    `json:"complete"`
}

// readByN pages session/events of key by n from afterN, limit entries a
// page, and returns every entry, every gap, and whether every page was
// complete.
func readByN(t *testing.T, s *sidecar, key, stateDir string, afterN uint64, limit int) (all []nEvent, gaps []nGap, complete bool) {
	t.Helper()
	complete = true
	for pages := 0; pages < 100000; pages++ {
		var p nPage
		params := map[string]any{"sessionKey": key, "afterN": afterN, "limit": limit}
		if stateDir != "" {
			params["stateDir"] = stateDir
		}
		s.mustCall("session/events", params, &p)
		if p.Complete == nil {
			t.Fatalf("session/events has no complete")
		}
		complete = complete && *p.Complete
		gaps = append(gaps, p.Gaps...)
		if len(p.Events) == 0 {
			if p.NextN != afterN {
				t.Errorf("empty page has nextN %d, want %d", p.NextN, afterN)
			}
			return all, gaps, complete
		}
		if p.NextN != p.Events[len(p.Events)-1].N {
			t.Fatalf("nextN %d is not the last event's n %d", p.NextN, p.Events[len(p.Events)-1].N)
		}
		all = append(all, p.Events...)
		afterN = p.NextN
	}
	t.Fatal("session/events never ends")
	return nil, nil, false
}

// TestJournal_ReopenKeepsEverySession (docs/protocol.md §16): a key opened
// three times with a turn each (the second and third resume the first's
// ACP session with session/load, which replays its history) keeps all
// three sessions in its journal: read by n in small pages, n runs from 1
// with no gap, the sessions follow one another in order, each with its own
// seq from 1; the replayed history is journaled as session/history and
// none of it was sent live; a second sidecar reading the key from disk
// gets the same entries.
func TestJournal_ReopenKeepsEverySession(t *testing.T) {
	e := newFaultEnv(t)
	agentState := agentWritableDir(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	var ids []string
	for i := 0; i < 3; i++ {
		p := withHostHome(e.openParams("reopened", ""))
		p["env"].(map[string]string)["FAULTAGENT_STATE_DIR"] = agentState
		var o openResult
		s.mustCall("session/open", p, &o)
		if o.Resumed != (i > 0) {
			t.Fatalf("open %d: resumed %v", i, o.Resumed)
		}
		ids = append(ids, o.Session)
		rid := "t" + strconv.Itoa(i)
		runTurn(t, s, o.Session, rid, "turn "+rid)
		for _, u := range updatesOf(s, o.Session) {
			if u.RequestID == nil || *u.RequestID != rid {
				t.Errorf("session %d got a live update outside its turn (replayed history?): %s", i, u.Update)
			}
		}
		closeProof(s, o.Session, nil)
	}
	all, gaps, complete := readByN(t, s, "reopened", "", 0, 5)
	if !complete || len(gaps) != 0 {
		t.Fatalf("complete %v gaps %+v, want complete without gaps", complete, gaps)
	}
	order := []string{}
	seqs := map[string]uint64{}
	history := map[string]int{}
	for i, ev := range all {
		if ev.N != uint64(i+1) {
			t.Fatalf("entry %d has n %d, want %d", i, ev.N, i+1)
		}
		if len(order) == 0 || order[len(order)-1] != ev.Session {
			order = append(order, ev.Session)
		}
		switch ev.Method {
		case "session/update":
			if ev.Seq != seqs[ev.Session]+1 {
				t.Errorf("session %s: update seq %d after %d", ev.Session, ev.Seq, seqs[ev.Session])
			}
			seqs[ev.Session] = ev.Seq
		case "session/history":
			if seqs[ev.Session] != 0 {
				t.Errorf("session %s: history after its updates", ev.Session)
			}
			history[ev.Session]++
		}
	}
	if len(order) != 3 || order[0] != ids[0] || order[1] != ids[1] || order[2] != ids[2] {
		t.Fatalf("sessions in journal order %v, want %v each once", order, ids)
	}
	if history[ids[0]] != 0 || history[ids[1]] == 0 || history[ids[2]] <= history[ids[1]] {
		t.Errorf("history entries %v: want none for the first session, more for each resume", history)
	}
	for _, id := range ids {
		if seqs[id] == 0 {
			t.Errorf("session %s has no updates in the journal", id)
		}
	}
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	s2 := startSidecar(t, seedArgs(e)...)
	s2.initialize(false)
	again, _, complete2 := readByN(t, s2, "reopened", "", 0, 1000)
	if len(again) < len(all) || !complete2 {
		t.Errorf("a new sidecar reads %d entries (complete %v), the first read %d", len(again), complete2, len(all))
	}
	// By seq: the latest session's entries, and a named earlier one's.
	var bySeq struct {
		Events []nEvent `json:"events"`
	}
	s2.mustCall("session/events", map[string]any{"sessionKey": "reopened", "afterSeq": 0}, &bySeq)
	for _, ev := range bySeq.Events {
		if ev.Session != ids[2] {
			t.Fatalf("afterSeq 0 returned an entry of %s, want only the latest session %s", ev.Session, ids[2])
		}
	}
	s2.mustCall("session/events", map[string]any{"sessionKey": "reopened", "session": ids[0], "afterSeq": 1}, &bySeq)
	if len(bySeq.Events) == 0 || bySeq.Events[0].Session != ids[0] || bySeq.Events[0].Seq != 2 {
		t.Fatalf("session %s after seq 1: %+v", ids[0], bySeq.Events)
	}
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
