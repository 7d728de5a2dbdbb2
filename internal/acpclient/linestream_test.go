package acpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
)

type lineMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// TestLineStream_DiscardsWithoutAnswer: the provider side never answers an
// agent's log lines.
func TestLineStream_DiscardsWithoutAnswer(t *testing.T) {
	var out bytes.Buffer
	st := newLineStream(strings.NewReader("starting up...\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n"), &out, nil, 1<<20, nil)
	var m lineMsg
	if err := st.ReadObject(&m); err != nil || m.Method != "x" {
		t.Fatalf("got %+v %v", m, err)
	}
	if out.Len() != 0 {
		t.Fatalf("provider stream answered: %q", out.String())
	}
}

// TestLineStream_DropsBadLines: oversized, malformed, batched and invalid
// lines are each reported to onDrop by kind, with no line content in the
// report, and the messages around them are delivered.
func TestLineStream_DropsBadLines(t *testing.T) {
	secret := "sk-" + strings.Repeat("s", 40)
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","method":"a"}`,
		"token " + secret,
		`{"jsonrpc":"2.0","method":"` + secret + strings.Repeat("x", 300) + `"}`,
		`[{"jsonrpc":"2.0","method":"b"}]`,
		`{"method":"` + secret + `"}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
	}, "\n")
	var out bytes.Buffer
	var dropped []*jsonl.FrameError
	st := newLineStream(strings.NewReader(input), &out, nil, 256, func(fe *jsonl.FrameError) { dropped = append(dropped, fe) })
	var got []string
	for {
		var m lineMsg
		if err := st.ReadObject(&m); err != nil {
			break
		}
		got = append(got, m.Method+string(m.ID))
	}
	if strings.Join(got, ",") != "a,7" {
		t.Fatalf("delivered %v, want a,7", got)
	}
	want := []jsonl.Kind{jsonl.Malformed, jsonl.Oversized, jsonl.Batch, jsonl.Invalid, jsonl.NullResponse}
	if len(dropped) != len(want) {
		t.Fatalf("dropped %v, want %v", dropped, want)
	}
	for i, fe := range dropped {
		if fe.Kind != want[i] || strings.Contains(fe.Reason, "sk-") {
			t.Errorf("drop %d: %+v, want kind %v without content", i, fe, want[i])
		}
	}
	if out.Len() != 0 {
		t.Fatalf("provider stream answered: %q", out.String())
	}
}

// TestLineStream_UpdatesTakenVerbatimInOrder: session/update lines go to
// onUpdate with the update's bytes exactly as the agent wrote them (white
// space, key order, escapes, "<"), in wire order with the other messages;
// updates the scan cannot take exactly (an escaped key, an update that is
// not an object, a request with an id) go through jsonrpc2's path.
func TestLineStream_UpdatesTakenVerbatimInOrder(t *testing.T) {
	up1 := `{ "sessionUpdate":"agent_message_chunk", "content":{"type":"text","text":"a\"<b>\u00e9"} }`
	lines := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"content":{}}}}`, // no sessionUpdate: dropped
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + up1 + `}}`,
		`{"jsonrpc":"2.0","method":"x"}`,
		`{"params":{"update":{"sessionUpdate":"plan"}},"method":"session/update","jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","upd\u0061te":{}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":null}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"update":{}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"a":1},"sessionId":"s1"} , "x":[1`,
	}
	var out bytes.Buffer
	st := newLineStream(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out, nil, 1<<20, nil)
	var got []string
	st.onUpdates = func(b *Slab) {
		for _, u := range b.ups {
			got = append(got, "update "+string(u.BackendSessionID)+" "+string(u.Update))
		}
		b.Release()
	}
	for {
		var m lineMsg
		if err := st.ReadObject(&m); err != nil {
			break
		}
		got = append(got, "rpc "+m.Method+string(m.ID))
	}
	want := []string{
		"update s1 " + up1,
		"rpc x",
		`update  {"sessionUpdate":"plan"}`,
		"rpc session/update", // escaped key: decoded by the slow path
		"rpc session/update", // update null: the slow path discards it
		"rpc session/update3",
		// the last line is malformed JSON: dropped
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLineStream_BatchBuffersAreReusedSafely: bursts of updates with
// other messages between them arrive intact whether the batches are held
// (their bytes stay as read until released) or released at once (their
// buffers serve the next batches); a message between updates is decoded
// from bytes of its own; and a burst costs far less than one allocation
// per update.
func TestLineStream_BatchBuffersAreReusedSafely(t *testing.T) {
	var in strings.Builder
	var want []string
	for i := 0; i < 2000; i++ {
		if i%300 == 299 {
			fmt.Fprintf(&in, "{\"jsonrpc\":\"2.0\",\"method\":\"between %d\"}\n", i)
			want = append(want, fmt.Sprintf("rpc between %d", i))
			continue
		}
		up := fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d"}}`, i)
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":%s}}`+"\n", up)
		want = append(want, "update "+up)
	}
	for _, hold := range []bool{true, false} {
		st := newLineStream(strings.NewReader(in.String()), io.Discard, nil, 1<<20, nil)
		var got []string
		var held []*Slab
		var pending []Update
		st.onUpdates = func(b *Slab) {
			if hold {
				held = append(held, b)
				pending = append(pending, b.ups...)
				return
			}
			for _, u := range b.ups {
				got = append(got, "update "+string(u.Update))
			}
			b.Release()
		}
		for {
			var m lineMsg
			if err := st.ReadObject(&m); err != nil {
				break
			}
			if !bytes.Contains(st.lastFrame(), []byte(m.Method)) {
				t.Fatalf("hold %v: the frame of %q is not its own: %s", hold, m.Method, st.lastFrame())
			}
			for _, u := range pending {
				got = append(got, "update "+string(u.Update))
			}
			pending = nil
			got = append(got, "rpc "+m.Method)
		}
		for _, u := range pending {
			got = append(got, "update "+string(u.Update))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("hold %v: %d messages differ from the %d sent", hold, len(got), len(want))
		}
		for _, b := range held {
			b.Release()
		}
	}
	line := `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}` + "\n"
	burst := strings.Repeat(line, 1000)
	allocs := testing.AllocsPerRun(5, func() {
		st := newLineStream(strings.NewReader(burst), io.Discard, nil, 1<<20, nil)
		st.onUpdates = func(b *Slab) { b.Release() }
		var m lineMsg
		_ = st.ReadObject(&m)
	})
	if allocs > 100 {
		t.Fatalf("%v allocations to take a burst of 1000 updates", allocs)
	}
}

// TestDecodeTracked: the members the actor keeps are read from each kind
// of update it tracks; a value that is not an object is refused.
func TestDecodeTracked(t *testing.T) {
	u, ok := DecodeTracked(json.RawMessage(`{"sessionUpdate":"usage_update","used":12,"size":200,"cost":{"amount":0.5,"currency":"USD"}}`))
	if !ok || u.Used == nil || *u.Used != 12 || u.Size == nil || *u.Size != 200 || u.Cost == nil || u.Cost.Amount != 0.5 || u.Cost.Currency != "USD" {
		t.Fatalf("usage_update: %+v %v", u, ok)
	}
	u, ok = DecodeTracked(json.RawMessage(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","kind":"edit","status":"completed"}`))
	if !ok || u.ToolCallID != "c1" || u.ToolKind != "edit" || u.Status != "completed" || u.Used != nil || u.Cost != nil {
		t.Fatalf("tool_call_update: %+v %v", u, ok)
	}
	u, ok = DecodeTracked(json.RawMessage(`{"sessionUpdate":"config_option_update","configOptions":[{"id":"mode"}],"currentModeId":"plan"}`))
	if !ok || len(u.ConfigOptions) != 1 || u.CurrentModeID != "plan" {
		t.Fatalf("config_option_update: %+v %v", u, ok)
	}
	if _, ok := DecodeTracked(json.RawMessage(`"tool_call"`)); ok {
		t.Error("a string decoded as an update")
	}
}
