package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// readAll reads every valid message from input and returns them plus what
// the stream answered for the bad frames.
func readAll(t *testing.T, framing Framing, max int, input string) ([]msg, []map[string]any) {
	t.Helper()
	var out bytes.Buffer
	st := NewFrameStream(strings.NewReader(input), &out, nil, framing, max)
	var got []msg
	for {
		var m msg
		err := st.ReadObject(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ReadObject: %v", err)
		}
		got = append(got, m)
	}
	// Read the answers back: one JSON object per frame.
	var answers []map[string]any
	rest := out.String()
	for rest != "" {
		var body string
		if framing == FramingLSP {
			_, after, ok := strings.Cut(rest, "\r\n\r\n")
			if !ok {
				t.Fatalf("answer without LSP header end: %q", rest)
			}
			var n int
			if _, err := fmt.Sscanf(rest, "Content-Length: %d", &n); err != nil {
				t.Fatalf("bad LSP header: %q", rest)
			}
			body, rest = after[:n], after[n:]
		} else {
			body, rest, _ = strings.Cut(rest, "\n")
		}
		var a map[string]any
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("answer is not JSON: %q", body)
		}
		answers = append(answers, a)
	}
	return got, answers
}

func errCode(a map[string]any) float64 {
	e, _ := a["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestFrameStream_BadFramesAreAnsweredAndSkipped: PROTOCOL §1 — a malformed,
// batched, invalid or oversized frame gets an error with id null and the
// stream keeps delivering the valid frames around it.
func TestFrameStream_BadFramesAreAnsweredAndSkipped(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":9,"method":"` + strings.Repeat("x", 5000) + `"}`
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"a"}`,
		`{not json`,
		`[{"jsonrpc":"2.0","id":2,"method":"b"}]`,
		`{"id":3,"method":"c"}`,
		long,
		`{"jsonrpc":"2.0","id":-4,"method":"d"}`,
		"",
		`{"jsonrpc":"2.0","id":"s5","method":"e"}` + "\r",
		`{"jsonrpc":"2.0","method":"f"}`,
	}, "\n")
	got, answers := readAll(t, FramingNDJSON, 4096, input)
	var methods []string
	for _, m := range got {
		methods = append(methods, m.Method)
	}
	if strings.Join(methods, ",") != "a,e,f" {
		t.Fatalf("delivered %v, want a,e,f", methods)
	}
	want := []float64{-32700, -32600, -32600, -32600, -32600}
	if len(answers) != len(want) {
		t.Fatalf("answers %v, want %d", answers, len(want))
	}
	for i, a := range answers {
		if errCode(a) != want[i] {
			t.Errorf("answer %d code %v, want %v", i, errCode(a), want[i])
		}
	}
	for _, a := range answers {
		if id, ok := a["id"]; !ok || id != nil {
			t.Errorf("a discarded frame must be answered with id null: %v", a)
		}
	}
}

// TestFrameStream_LimitIsExact: --max-frame-bytes counts the frame without
// its line terminator.
func TestFrameStream_LimitIsExact(t *testing.T) {
	pad := func(n int) string {
		base := `{"jsonrpc":"2.0","method":"m","params":{"p":""}}`
		return base[:len(base)-3] + strings.Repeat("z", n-len(base)) + `"}}`
	}
	got, answers := readAll(t, FramingNDJSON, 100, pad(100)+"\r\n"+pad(101)+"\n"+pad(100)+"\n")
	if len(got) != 2 || len(answers) != 1 {
		t.Fatalf("100-byte frames must pass and a 101-byte one fail: got %d, answers %v", len(got), answers)
	}
}

// TestFrameStream_LSPFraming: Content-Length frames in, oversized body
// skipped with -32600.
func TestFrameStream_LSPFraming(t *testing.T) {
	frame := func(body string) string { return "Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body }
	input := frame(`{"jsonrpc":"2.0","id":1,"method":"a"}`) + frame(`{"jsonrpc":"2.0","id":2,"method":"`+strings.Repeat("y", 3000)+`"}`) +
		frame(`{"jsonrpc":"2.0","id":3,"method":"c"}`)
	got, answers := readAll(t, FramingLSP, 2048, input)
	if len(got) != 2 || got[0].Method != "a" || got[1].Method != "c" {
		t.Fatalf("delivered %+v", got)
	}
	if len(answers) != 1 || errCode(answers[0]) != -32600 {
		t.Fatalf("answers %v", answers)
	}
}

// TestFrameStream_LSPResyncAfterMissingLength: a header block without
// Content-Length is answered, and the next frame is found again whether
// the stray body ends with a line break or is glued to the next header.
func TestFrameStream_LSPResyncAfterMissingLength(t *testing.T) {
	frame := func(body string) string { return "Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body }
	for name, sep := range map[string]string{"glued": "", "newline": "\r\n"} {
		input := "X-Other: 1\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"lost"}` + sep +
			frame(`{"jsonrpc":"2.0","id":2,"method":"found"}`)
		got, answers := readAll(t, FramingLSP, 1024, input)
		if len(got) != 1 || got[0].Method != "found" || len(answers) != 1 || errCode(answers[0]) != -32600 {
			t.Errorf("%s: delivered %+v, answers %v", name, got, answers)
		}
	}
}

// TestFrameStream_QuietDiscardsWithoutAnswer: the provider side never
// answers an agent's log lines.
func TestFrameStream_QuietDiscardsWithoutAnswer(t *testing.T) {
	var out bytes.Buffer
	st := NewFrameStream(strings.NewReader("starting up...\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n"), &out, nil, FramingNDJSON, 1<<20)
	st.Quiet = true
	var m msg
	if err := st.ReadObject(&m); err != nil || m.Method != "x" {
		t.Fatalf("got %+v %v", m, err)
	}
	if out.Len() != 0 {
		t.Fatalf("quiet stream answered: %q", out.String())
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// FuzzFrameStream: no input makes ReadObject panic or loop; every answer is
// one valid JSON line.
func FuzzFrameStream(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"a"}` + "\n"))
	f.Add([]byte("[1,2]\n{\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1.5,"result":{}}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		st := NewFrameStream(bytes.NewReader(in), &out, nil, FramingNDJSON, 256)
		for i := 0; i < 1000; i++ {
			var v map[string]any
			if err := st.ReadObject(&v); err != nil {
				break
			}
		}
		for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			if len(line) > 0 && !json.Valid(line) {
				t.Fatalf("invalid answer %q", line)
			}
		}
	})
}
