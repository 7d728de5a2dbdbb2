package cleanup

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// fakeSink records what Publish did, in order.
type fakeSink struct {
	held    error // HoldKey's error
	jnErr   error // Journal's error
	events  []string
	holding bool
}

func (f *fakeSink) HoldKey(key string) (func(), error) {
	if f.held != nil {
		return nil, f.held
	}
	f.holding = true
	f.events = append(f.events, "hold "+key)
	return func() { f.holding = false; f.events = append(f.events, "release") }, nil
}

func (f *fakeSink) Journal(key, session string, raw json.RawMessage) error {
	if !f.holding {
		f.events = append(f.events, "journal without the key")
	}
	f.events = append(f.events, "journal "+key+" "+session)
	return f.jnErr
}

func (f *fakeSink) Notify(raw json.RawMessage) error {
	var n protocol.ProofNotice
	if json.Unmarshal(raw, &n) != nil || n.Proof == nil {
		f.events = append(f.events, "notify garbage")
	} else {
		f.events = append(f.events, "notify "+n.Proof.CleanupID)
	}
	return nil
}

func TestPublish_JournalBeforeHostAndKeyRules(t *testing.T) {
	p := &protocol.Proof{CleanupID: "c1", Session: "s1", SessionKey: "k", Complete: true}
	cases := []struct {
		name string
		sink *fakeSink
		d    Delivery
		want string
		jn   bool
	}{
		{"journal and notify", &fakeSink{}, Delivery{Journal: true, Notify: true}, "hold k|journal k s1|release|notify c1", true},
		{"key held by another sidecar: only sent", &fakeSink{held: errors.New("held")}, Delivery{Journal: true, Notify: true}, "notify c1", false},
		{"journal fails: still sent", &fakeSink{jnErr: errors.New("disk full")}, Delivery{Journal: true, Notify: true}, "hold k|journal k s1|release|notify c1", false},
		{"journal deleted with the record", &fakeSink{}, Delivery{Notify: true}, "notify c1", false},
		{"shutdown result carries it", &fakeSink{}, Delivery{Journal: true}, "hold k|journal k s1|release", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Publish(c.sink, p, c.d)
			if got := strings.Join(c.sink.events, "|"); got != c.want {
				t.Fatalf("events %q, want %q", got, c.want)
			}
			if res.Journaled != c.jn || res.Err != nil || res.Raw == nil {
				t.Fatalf("result %+v, want journaled %v", res, c.jn)
			}
			if c.d.Journal && !c.jn && res.JournalErr == nil {
				t.Fatal("not journaled, and no JournalErr says why")
			}
		})
	}
}
