package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// writeLog records every Write call separately; failAt > 0 fails that call.
type writeLog struct {
	writes [][]byte
	failAt int
}

func (w *writeLog) Write(b []byte) (int, error) {
	w.writes = append(w.writes, append([]byte(nil), b...))
	if len(w.writes) == w.failAt {
		return 0, errors.New("broken pipe")
	}
	return len(b), nil
}

func batchOf(ps ...string) []Notification {
	ns := make([]Notification, len(ps))
	for i, p := range ps {
		ns[i] = Notification{Method: "session/update", Params: []byte(p)}
	}
	return ns
}

// TestWriteNotifications_OneWriteSameFrames: a batch is one write holding
// exactly the frames WriteNotification writes one by one, in order, under
// both framings.
func TestWriteNotifications_OneWriteSameFrames(t *testing.T) {
	ns := batchOf(`{"seq":1}`, `{"seq":2,"u":"é\u2028"}`, `[3]`)
	ns[1].Method = `m"x`
	for _, fr := range []Framing{NDJSON, LSP} {
		var one bytes.Buffer
		w1 := NewWriter(&one, fr)
		for _, n := range ns {
			if err := w1.WriteNotification(n.Method, n.Params); err != nil {
				t.Fatal(err)
			}
		}
		var log writeLog
		if err := NewWriter(&log, fr).WriteNotifications(ns); err != nil {
			t.Fatal(err)
		}
		if len(log.writes) != 1 {
			t.Fatalf("%s: %d writes for one batch, want 1", fr, len(log.writes))
		}
		if !bytes.Equal(log.writes[0], one.Bytes()) {
			t.Fatalf("%s: batch wrote\n%q\nframe by frame\n%q", fr, log.writes[0], one.Bytes())
		}
	}
}

// TestWriteNotifications_SplitsAtFrameBoundaries: past 1 MiB of frames the
// batch is written in more than one write, each ending at a frame's end,
// together the whole batch in order; an empty batch writes nothing.
func TestWriteNotifications_SplitsAtFrameBoundaries(t *testing.T) {
	big := `"` + strings.Repeat("x", 2<<20) + `"`
	ns := batchOf(`{"a":1}`, big, `{"b":2}`, `{"c":3}`)
	var log writeLog
	w := NewWriter(&log, NDJSON)
	if err := w.WriteNotifications(ns); err != nil {
		t.Fatal(err)
	}
	if len(log.writes) != 2 {
		t.Fatalf("%d writes, want 2 (the first up to the big frame, then the rest)", len(log.writes))
	}
	var all []byte
	for _, b := range log.writes {
		if !bytes.HasSuffix(b, []byte("}\n")) {
			t.Fatalf("a write ends inside a frame: ...%q", b[max(0, len(b)-20):])
		}
		all = append(all, b...)
	}
	lines := strings.Split(strings.TrimSuffix(string(all), "\n"), "\n")
	want := []string{`{"a":1}`, big, `{"b":2}`, `{"c":3}`}
	if len(lines) != len(want) {
		t.Fatalf("%d frames, want %d", len(lines), len(want))
	}
	for i, l := range lines {
		if l != `{"jsonrpc":"2.0","method":"session/update","params":`+want[i]+`}` {
			t.Fatalf("frame %d out of order or altered", i)
		}
	}
	if cap(w.buf) > maxKeptBuf {
		t.Fatalf("kept a %d-byte buffer", cap(w.buf))
	}
	log.writes = nil
	if err := w.WriteNotifications(nil); err != nil || len(log.writes) != 0 {
		t.Fatalf("empty batch: %v, %d writes", err, len(log.writes))
	}
}

// TestWriteNotifications_StopsAtFirstError: the error is returned, nothing
// after the failed write is written, and the writer goes on working.
func TestWriteNotifications_StopsAtFirstError(t *testing.T) {
	big := `"` + strings.Repeat("x", 1<<20) + `"`
	log := writeLog{failAt: 1}
	w := NewWriter(&log, NDJSON)
	if err := w.WriteNotifications(batchOf(big, `{}`, `{}`)); err == nil {
		t.Fatal("no error from a failed write")
	}
	if len(log.writes) != 1 {
		t.Fatalf("%d writes after the failure, want it to stop at 1", len(log.writes))
	}
	if err := w.WriteNotifications(batchOf(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(log.writes[1]); got != `{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`+"\n" {
		t.Fatalf("after the failure: %q", got)
	}
}

// TestAppendJSONString: a method name goes on the wire as a JSON string
// that decodes to it, whether it needs escapes or not (the plain case is
// copied whole), and jsonStringLen is its exact length.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "session/update", `a"b`, `a\b`, "a\nb\x00c\x1f", "é✓", "<&>"} {
		got := appendJSONString([]byte("x"), s)
		if got[0] != 'x' {
			t.Fatalf("%q: the prefix was overwritten", s)
		}
		got = got[1:]
		var back string
		if err := json.Unmarshal(got, &back); err != nil || back != s {
			t.Errorf("appendJSONString(%q) = %s, which decodes to %q (%v)", s, got, back, err)
		}
		if len(got) != jsonStringLen(s) {
			t.Errorf("jsonStringLen(%q) = %d, want %d", s, jsonStringLen(s), len(got))
		}
	}
}
