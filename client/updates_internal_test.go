package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// updateParams are session/update params the fast path must read as
// encoding/json does (or leave to it): the sidecar's own shape first.
var updateParams = []string{
	`{"session":"s-0123456789abcdef","requestId":"t1","seq":7,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`,
	`{"session":"s-1","requestId":null,"seq":1,"update":{"sessionUpdate":"usage_update"}}`,
	`{"session":"s-1","seq":2,"update":{}}`,
	`{"session":"s-1","requestId":"t\"1","seq":3,"update":1}`,
	`{"session":"s-\u0031","requestId":"t1","seq":3,"update":[1,2]}`,
	`{"session":"s-1","requestId":"ü-t1","seq":18446744073709551615,"update":null}`,
	`{"session":"s-1","requestId":"t1","seq":18446744073709551616,"update":{}}`,
	`{"session":"s-1","requestId":"t1","seq":1.5,"update":{}}`,
	`{"session":"s-1","requestId":"t1","seq":-1,"update":{}}`,
	`{"session":"s-1","requestId":"t1","seq":null,"update":{}}`,
	`{"session":5,"requestId":"t1","seq":1,"update":{}}`,
	`{"session":"s-1","requestId":7,"seq":1,"update":{}}`,
	`{"session":"s-1","session":"s-2","requestId":"t1","seq":1,"update":{},"update":{"a":1}}`,
	`{"session":"s-1","requestId":"t1","seq":1,"update":{"x":"\ud800"},"extra":{"nested":[{"a":"b"}]}}`,
	`{"requestId":"t1","seq":1,"update":{}}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"session":"s-1","requestId":"t1","seq":1,"update":{}}`,
	"{\"session\":\"s-\xff\",\"requestId\":\"t1\",\"seq\":1,\"update\":{}}",
	`{ "session" : "s-1" , "requestId" : "t1" , "seq" : 9 , "update" : { "k" : [ ] } }`,
}

// caseVariantKeys reports whether params has a member whose name matches
// an Update field only case-insensitively. encoding/json folds case; the
// protocol's names are exact (docs/protocol.md §9) and the fast path
// reads them exactly, so such frames are outside what it must match.
func caseVariantKeys(params []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return false
	}
	for k := range m {
		for _, name := range []string{"session", "requestId", "seq", "update"} {
			if k != name && strings.EqualFold(k, name) {
				return true
			}
		}
	}
	return false
}

// checkFastDecode fails t if router.take reads params otherwise than
// encoding/json: a different Update, or one where json.Unmarshal fails
// (such a line must be dropped).
func checkFastDecode(t *testing.T, params string) {
	t.Helper()
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":` + params + "}")
	var want Update
	wantErr := json.Unmarshal([]byte(params), &want)
	var got []Update
	c := &Client{subs: subscribers{turns: map[turnKey]*turnSink{}}, cb: callbacks{events: newQueue()}}
	c.opts.OnUpdate = func(u Update) { got = append(got, u) }
	c.wire.router.c = c
	drained := false
	drain := func() {
		if !drained {
			drained = true
			c.cb.events.close()
			<-c.cb.events.done
		}
	}
	defer drain()
	if p := strings.TrimLeft(params, " \t\r\n"); !json.Valid(line) || !strings.HasPrefix(p, "{") {
		// Not JSON, or params not an object: jsonrpc2's way (where the
		// handler drops what does not decode as an Update).
		if c.wire.router.take(line) {
			t.Fatalf("took %q", line)
		}
		return
	}
	if caseVariantKeys([]byte(params)) {
		t.Skip("case-variant member names: outside the protocol")
	}
	if !c.wire.router.take(line) {
		t.Fatalf("did not take %s", line)
	}
	drain()
	switch {
	case wantErr != nil && len(got) != 0:
		t.Fatalf("%s: delivered %+v; encoding/json: %v", params, got[0], wantErr)
	case wantErr == nil && len(got) != 1:
		t.Fatalf("%s: delivered %d updates, want 1", params, len(got))
	case wantErr == nil && !reflect.DeepEqual(got[0], want):
		t.Fatalf("%s:\n fast %#v\n json %#v", params, got[0], want)
	}
}

func TestFastPathDecodesAsEncodingJSON(t *testing.T) {
	for _, p := range updateParams {
		t.Run("", func(t *testing.T) { checkFastDecode(t, p) })
	}
}

func FuzzFastPathUpdate(f *testing.F) {
	for _, p := range updateParams {
		f.Add(p)
	}
	f.Fuzz(checkFastDecode)
}

// TestFastPathLeavesOtherFrames: what is not a session/update
// notification goes to jsonrpc2 untouched.
func TestFastPathLeavesOtherFrames(t *testing.T) {
	c := &Client{subs: subscribers{turns: map[turnKey]*turnSink{}}}
	c.wire.router.c = c
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"session":"s-1","seq":1,"update":{}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"session/update","params":{}}`,
		`{"jsonrpc":"2.0","method":"session\/update","params":{"session":"s-1","seq":1,"update":{}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":[1]}`,
		`{"jsonrpc":"2.0","method":"session/update"}`,
		`{"jsonrpc":"2.0","method":"cleanup/proof","params":{"proof":{}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"status":"completed"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"session":"s-1"`,
		`not json`,
	} {
		if c.wire.router.take([]byte(line)) {
			t.Errorf("took %s", line)
		}
	}
}

// TestRouterDeliversToTheTurnThenOnUpdate: an update of a registered turn
// goes to its sink and wakes it only at flush; once the turn has ended
// (or for requestId null, or an unknown turn) updates go to OnUpdate, the
// sink's leftovers included, in order.
func TestRouterDeliversToTheTurnThenOnUpdate(t *testing.T) {
	c := &Client{subs: subscribers{turns: map[turnKey]*turnSink{}}, cb: callbacks{events: newQueue()}}
	got := make(chan Update, 16)
	c.opts.OnUpdate = func(u Update) { got <- u }
	c.wire.router.c = c
	line := func(rid string, seq int) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"session":"s-1","requestId":` + rid + `,"seq":` + string(rune('0'+seq)) + `,"update":{}}}`)
	}
	key := turnKey{"s-1", "t1"}
	sink := newTurnSink()
	c.subs.turns[key] = sink
	for i, l := range [][]byte{line(`"t1"`, 1), line(`"t1"`, 2), line("null", 3), line(`"t0"`, 4)} {
		if !c.wire.router.take(l) {
			t.Fatalf("line %d not taken", i)
		}
	}
	select {
	case <-sink.wake:
		t.Fatal("woken before flush")
	default:
	}
	c.wire.router.flush()
	select {
	case <-sink.wake:
	default:
		t.Fatal("not woken at flush")
	}
	if ups := sink.take(); len(ups) != 2 || ups[0].Seq != 1 || ups[1].Seq != 2 || *ups[1].RequestID != "t1" {
		t.Fatalf("sink got %+v", ups)
	}
	c.wire.router.take(line(`"t1"`, 5)) // after the last take: a leftover
	c.endTurn(key, sink)
	c.wire.router.take(line(`"t1"`, 6)) // the turn has ended
	if _, ok := c.subs.turns[key]; ok {
		t.Fatal("endTurn left the sink registered")
	}
	for _, want := range []uint64{3, 4, 5, 6} {
		select {
		case u := <-got:
			if u.Seq != want {
				t.Fatalf("OnUpdate got seq %d, want %d", u.Seq, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("OnUpdate did not get seq %d", want)
		}
	}
	c.cb.events.close()
	<-c.cb.events.done
}
