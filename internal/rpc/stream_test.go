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

// TestFrameStream_BadFramesAreAnsweredAndSkipped: docs/protocol.md §3 — a
// malformed, batched, invalid or oversized frame gets an error with id null
// and the stream keeps delivering the valid frames around it.
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

// TestFrameStream_LSPBadFramesAreAnswered: under LSP an oversized body is
// skipped with -32600, and a header block without Content-Length is
// answered with -32600 whether the stray body ends with a line break or is
// glued to the next header. (How jsonl delimits and resyncs is tested in
// internal/jsonl.)
func TestFrameStream_LSPBadFramesAreAnswered(t *testing.T) {
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
	for name, sep := range map[string]string{"glued": "", "newline": "\r\n"} {
		input := "X-Other: 1\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"lost"}` + sep +
			frame(`{"jsonrpc":"2.0","id":2,"method":"found"}`)
		got, answers := readAll(t, FramingLSP, 1024, input)
		if len(got) != 1 || got[0].Method != "found" || len(answers) != 1 || errCode(answers[0]) != -32600 {
			t.Errorf("%s: delivered %+v, answers %v", name, got, answers)
		}
		if len(answers) == 1 && answers[0]["id"] != nil {
			t.Errorf("%s: answered under id %v, want null", name, answers[0]["id"])
		}
	}
}

// TestFrameStream_LSPOversizedAnsweredBeforeBody: docs/protocol.md §3 — the
// answer to an oversized Content-Length is written as soon as the header
// block is read, before any body byte arrives.
func TestFrameStream_LSPOversizedAnsweredBeforeBody(t *testing.T) {
	pr, pw := io.Pipe()
	answered := make(chan string, 1)
	st := NewFrameStream(pr, writerFunc(func(b []byte) (int, error) {
		select {
		case answered <- string(b):
		default:
		}
		return len(b), nil
	}), nil, FramingLSP, 1024)
	done := make(chan error, 1)
	go func() {
		var m msg
		done <- st.ReadObject(&m)
	}()
	if _, err := io.WriteString(pw, "Content-Length: 5000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	a := <-answered // the LSP header of the answer: no body byte was sent yet
	if !strings.HasPrefix(a, "Content-Length: ") {
		t.Fatalf("first write %q, want an answer's header", a)
	}
	_ = pw.Close()
	if err := <-done; err == nil {
		t.Fatal("ReadObject returned a message from a truncated body")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

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
