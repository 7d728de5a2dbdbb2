package e2e

// Queued turns (docs/protocol.md §8 session/prompt, Queued turns): prompts
// with queue: true wait behind the active turn in arrival order, each gets
// its own result, a queued one can be cancelled on its own and then never
// reaches the agent, the queue is bounded, and a close answers what is
// still queued.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// queueStatus is the part of session/status these tests read.
type queueStatus struct {
	State            string   `json:"state"`
	QueuedRequestIDs []string `json:"queuedRequestIds"`
}

// promptQueued sends a queue: true prompt and returns its request id key.
func promptQueued(s *sidecar, session, rid string) string {
	return s.start("session/prompt", map[string]any{"session": session, "requestId": rid, "prompt": "turn " + rid, "queue": true})
}

func isReply(id string) func(f *frame) bool {
	return func(f *frame) bool { return f.Method == "" && string(f.ID) == id }
}

func isUpdateOf(rid string) func(f *frame) bool {
	return func(f *frame) bool {
		var u updateNote
		return f.Method == "session/update" && json.Unmarshal(f.Params, &u) == nil && u.RequestID != nil && *u.RequestID == rid
	}
}

// lastUpdateIndex is the wire position of the last update of turn rid.
func lastUpdateIndex(s *sidecar, rid string) int {
	last, i := -1, 0
	seedFrameIndex(s, func(f *frame) bool {
		if isUpdateOf(rid)(f) {
			last = i
		}
		i++
		return false
	})
	return last
}

// agentPrompts are the session/prompt texts the fault agent received, in
// order (mode record=<file>).
func agentPrompts(t *testing.T, rec string) []string {
	var out []string
	for _, m := range seedRecv(seedReadAgent(t, rec), "session/prompt") {
		var p struct {
			Prompt []struct {
				Text string `json:"text"`
			} `json:"prompt"`
		}
		_ = json.Unmarshal(m.Msg.Params, &p)
		var b strings.Builder
		for _, c := range p.Prompt {
			b.WriteString(c.Text)
		}
		out = append(out, b.String())
	}
	return out
}

// TestQueuedTurns_RunInOrderEachWithItsResult: three prompts sent back to
// back with queue: true run one after the other in arrival order: status
// lists the two waiting ones, the agent receives each prompt only after
// the previous turn's answer, every turn's updates carry its own requestId
// and come before its own result, and each result is its own.
func TestQueuedTurns_RunInOrderEachWithItsResult(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "queue-order", rec, "stream=4:80"))
	ids := []string{promptQueued(s, o.Session, "t1"), promptQueued(s, o.Session, "t2"), promptQueued(s, o.Session, "t3")}
	var st queueStatus
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.State != "turn" || fmt.Sprint(st.QueuedRequestIDs) != "[t2 t3]" {
		t.Errorf("status while t1 runs: state %q queuedRequestIds %v, want turn [t2 t3]", st.State, st.QueuedRequestIDs)
	}
	for i, id := range ids {
		res := decodeResult[turnResult](t, "queued turn", s.await(id, 30*time.Second))
		want := fmt.Sprintf("t%d", i+1)
		if res.RequestID != want || res.Status != "completed" || res.StopReason != "end_turn" {
			t.Errorf("result %d = %+v, want %s completed end_turn", i, res, want)
		}
	}
	// Wire order: t1's updates, t1's result, t2's updates, t2's result, …
	for i, id := range ids {
		rid := fmt.Sprintf("t%d", i+1)
		first, last, reply := seedFrameIndex(s, isUpdateOf(rid)), lastUpdateIndex(s, rid), seedFrameIndex(s, isReply(id))
		if first < 0 || last > reply {
			t.Errorf("%s: updates at %d..%d, result at %d: an update after its result", rid, first, last, reply)
		}
		if i > 0 {
			if prev := seedFrameIndex(s, isReply(ids[i-1])); first < prev {
				t.Errorf("%s's first update (frame %d) came before t%d's result (frame %d)", rid, first, i, prev)
			}
		}
	}
	for _, u := range updatesOf(s, o.Session) {
		if u.RequestID == nil {
			t.Errorf("update seq %d has no requestId", u.Seq)
		}
	}
	if got := agentPrompts(t, rec); fmt.Sprint(got) != "[turn t1 turn t2 turn t3]" {
		t.Errorf("agent received prompts %q, want turn t1, turn t2, turn t3 in order", got)
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.State != "open" || st.QueuedRequestIDs == nil || len(st.QueuedRequestIDs) != 0 {
		t.Errorf("status after the queue ran: state %q queuedRequestIds %v, want open []", st.State, st.QueuedRequestIDs)
	}
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestQueuedTurns_CancelQueuedLeavesOthersUntouched: cancelling the second
// of three queued prompts before it starts answers it cancelled at once
// (it never reaches the agent, no update carries its id) while the first
// and the third complete as if it had never been sent.
func TestQueuedTurns_CancelQueuedLeavesOthersUntouched(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "queue-cancel", rec, "stream=4:80"))
	id1, id2, id3 := promptQueued(s, o.Session, "t1"), promptQueued(s, o.Session, "t2"), promptQueued(s, o.Session, "t3")
	var c struct {
		Cancelled bool `json:"cancelled"`
	}
	s.mustCall("session/cancel", map[string]any{"session": o.Session, "requestId": "t2"}, &c)
	if !c.Cancelled {
		t.Fatal("session/cancel of the queued t2 answered cancelled: false")
	}
	r2 := decodeResult[turnResult](t, "cancelled queued turn", s.await(id2, 5*time.Second))
	if r2.RequestID != "t2" || r2.Status != "cancelled" || r2.StopReason != "cancelled" {
		t.Errorf("t2 result %+v, want cancelled/cancelled", r2)
	}
	if seedFrameIndex(s, isReply(id1)) >= 0 {
		t.Errorf("t1 was answered before t2's cancel, so t2 may not have been queued; the test proves nothing")
	}
	var st queueStatus
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if fmt.Sprint(st.QueuedRequestIDs) != "[t3]" {
		t.Errorf("queuedRequestIds after cancelling t2 = %v, want [t3]", st.QueuedRequestIDs)
	}
	for _, id := range []string{id1, id3} {
		res := decodeResult[turnResult](t, "queued turn", s.await(id, 30*time.Second))
		if res.Status != "completed" || res.StopReason != "end_turn" {
			t.Errorf("result %+v, want completed end_turn", res)
		}
	}
	if seedFrameIndex(s, isUpdateOf("t2")) >= 0 {
		t.Error("an update carries the cancelled queued turn's requestId")
	}
	if got := agentPrompts(t, rec); fmt.Sprint(got) != "[turn t1 turn t3]" {
		t.Errorf("agent received prompts %q, want only turn t1 and turn t3", got)
	}
	for _, rid := range []string{"t1", "t3"} {
		if seedFrameIndex(s, isUpdateOf(rid)) < 0 {
			t.Errorf("turn %s has no updates", rid)
		}
	}
	// The cancelled id stays used (docs/protocol.md §8: unique within the session).
	f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t2", "prompt": "again"})
	wantError(t, "reused cancelled queued id", f, -32000, "DUPLICATE_REQUEST_ID")
	closeProof(s, o.Session, nil)
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestQueuedTurns_BoundAndClose: with --max-queued-turns 1 a second
// queued prompt is TURN_ACTIVE with data.queued 1, a prompt without queue
// is TURN_ACTIVE as before; closing the session answers the queued turn
// cancelled (never started) and the active one cancelled.
func TestQueuedTurns_BoundAndClose(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e, "--max-queued-turns", "1")...)
	s.initialize(false)
	rec := seedRecordFile(t)
	o := seedMustOpen(s, seedOpenParams(e, "queue-bound", rec, "slow-turn=20000"))
	id1 := promptQueued(s, o.Session, "t1")
	id2 := promptQueued(s, o.Session, "t2")
	f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t3", "prompt": "x", "queue": true})
	wantError(t, "queue full", f, -32000, "TURN_ACTIVE")
	var d struct {
		Queued *int `json:"queued"`
	}
	_ = json.Unmarshal(f.Error.Data, &d)
	if d.Queued == nil || *d.Queued != 1 {
		t.Errorf("TURN_ACTIVE data %s, want queued 1", f.Error.Data)
	}
	f = s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "t4", "prompt": "x"})
	wantError(t, "unqueued prompt behind a turn", f, -32000, "TURN_ACTIVE")
	if strings.Contains(string(f.Error.Data), "queued") {
		t.Errorf("TURN_ACTIVE of an unqueued prompt carries data.queued: %s", f.Error.Data)
	}
	closeProof(s, o.Session, nil)
	for _, id := range []string{id1, id2} {
		res := decodeResult[turnResult](t, "turn ended by close", s.await(id, 10*time.Second))
		if res.Status != "cancelled" || res.StopReason != "cancelled" {
			t.Errorf("%s after close: %+v, want cancelled/cancelled", res.RequestID, res)
		}
	}
	if got := agentPrompts(t, rec); len(got) != 1 {
		t.Errorf("agent received %d prompts, want only the active turn's", len(got))
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}
