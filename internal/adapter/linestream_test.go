package adapter

import (
	"bytes"
	"encoding/json"
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
