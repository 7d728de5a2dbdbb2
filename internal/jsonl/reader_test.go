package jsonl

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

type msg struct {
	ID     any    `json:"id"`
	Method string `json:"method"`
}

// readAll reads every message of input and returns them plus the bad
// frames reported between them, in order.
func readAll(t *testing.T, framing Framing, max int, input string) ([]msg, []*FrameError) {
	t.Helper()
	r := NewReader(strings.NewReader(input), framing, max)
	var got []msg
	var bad []*FrameError
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("reader does not make progress")
		}
		var m msg
		err := r.ReadMessage(&m)
		var fe *FrameError
		switch {
		case errors.As(err, &fe):
			bad = append(bad, fe)
		case err == io.EOF:
			return got, bad
		case err != nil:
			t.Fatalf("ReadMessage: %v", err)
		default:
			got = append(got, m)
		}
	}
}

func methods(ms []msg) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Method)
	}
	return strings.Join(s, ",")
}

func kinds(fes []*FrameError) []Kind {
	var k []Kind
	for _, fe := range fes {
		k = append(k, fe.Kind)
	}
	return k
}

func lspFrame(body string) string {
	return "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestReader_BadFramesAreReportedAndSkipped: a malformed, batched,
// invalid or oversized line is reported as a FrameError of its kind, and
// the messages around it are delivered; blank lines and "\r\n" are fine.
func TestReader_BadFramesAreReportedAndSkipped(t *testing.T) {
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
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\x28\",\"method\":\"u\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"u\",\"params\":{\"sessionKey\":\"bad\xffkey\"}}",
		`{"jsonrpc":"2.0","method":"f"}`,
	}, "\n")
	got, bad := readAll(t, NDJSON, 4096, input)
	if methods(got) != "a,e,f" {
		t.Fatalf("delivered %v, want a,e,f", methods(got))
	}
	want := []Kind{Malformed, Batch, Invalid, Oversized, Invalid, Malformed, Malformed}
	if !equalKinds(kinds(bad), want) {
		t.Fatalf("bad frames %v, want %v", kinds(bad), want)
	}
	if r := bad[5].Reason; r != "a frame must be valid UTF-8" {
		t.Errorf("invalid UTF-8 reported as %q", r)
	}
	if o := bad[3]; o.Reason != "frame exceeds 4096 bytes" || o.Limit != 4096 || o.Length != 0 {
		t.Errorf("oversized line reported as %+v", o)
	}
}

func equalKinds(a, b []Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReader_LimitIsExact: the limit counts the frame without its line
// terminator ("\n" or "\r\n").
func TestReader_LimitIsExact(t *testing.T) {
	pad := func(n int) string {
		base := `{"jsonrpc":"2.0","method":"m","params":{"p":""}}`
		return base[:len(base)-3] + strings.Repeat("z", n-len(base)) + `"}}`
	}
	got, bad := readAll(t, NDJSON, 100, pad(100)+"\r\n"+pad(101)+"\n"+pad(100)+"\n")
	if len(got) != 2 || len(bad) != 1 || bad[0].Kind != Oversized {
		t.Fatalf("100-byte frames must pass and a 101-byte one fail: got %d, bad %v", len(got), kinds(bad))
	}
	// LSP: the limit is the Content-Length.
	got, bad = readAll(t, LSP, 100, lspFrame(pad(100))+lspFrame(pad(101))+lspFrame(pad(100)))
	if len(got) != 2 || len(bad) != 1 || bad[0].Kind != Oversized {
		t.Fatalf("lsp: got %d, bad %v", len(got), kinds(bad))
	}
}

// TestReader_OversizedLineAtEOF: a last oversized line without terminator
// ends the stream with io.EOF (nothing follows to keep in sync with).
func TestReader_OversizedLineAtEOF(t *testing.T) {
	r := NewReader(strings.NewReader(`{"jsonrpc":"2.0","method":"`+strings.Repeat("x", 200)+`"}`), NDJSON, 100)
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

// TestReader_LongLineBeyondBuffer: lines longer than the reader's 64 KiB
// buffer are assembled whole, and skipped whole when over the limit.
func TestReader_LongLineBeyondBuffer(t *testing.T) {
	big := `{"jsonrpc":"2.0","method":"` + strings.Repeat("b", 200<<10) + `"}`
	got, bad := readAll(t, NDJSON, 300<<10, big+"\n"+big+big+"\n"+`{"jsonrpc":"2.0","method":"c"}`)
	if len(got) != 2 || len(got[0].Method) != 200<<10 || got[1].Method != "c" || !equalKinds(kinds(bad), []Kind{Oversized}) {
		t.Fatalf("got %d messages, bad %v", len(got), kinds(bad))
	}
}

// TestReader_LSPFraming: Content-Length frames in; an oversized body is
// reported (with its declared length) and skipped exactly.
func TestReader_LSPFraming(t *testing.T) {
	input := lspFrame(`{"jsonrpc":"2.0","id":1,"method":"a"}`) + lspFrame(`{"jsonrpc":"2.0","id":2,"method":"`+strings.Repeat("y", 3000)+`"}`) +
		"\r\n" + "content-length: 37\r\nX-Other: 1\r\n\r\n" + `{"jsonrpc":"2.0","id":3,"method":"c"}`
	got, bad := readAll(t, LSP, 2048, input)
	if methods(got) != "a,c" {
		t.Fatalf("delivered %+v", got)
	}
	if len(bad) != 1 || bad[0].Kind != Oversized || bad[0].Length != 3036 || bad[0].Limit != 2048 ||
		bad[0].Reason != "frame exceeds 2048 bytes (Content-Length 3036); its body is being discarded" {
		t.Fatalf("bad frames %+v", bad)
	}
}

// TestReader_LSPOversizedReportedBeforeBody: the error for an oversized
// Content-Length comes as soon as the header block is read; the body is
// discarded by the next read.
func TestReader_LSPOversizedReportedBeforeBody(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { _, _ = io.WriteString(pw, "Content-Length: 5000\r\n\r\n") }()
	r := NewReader(pr, LSP, 1024)
	var fe *FrameError
	if _, err := r.ReadFrame(); !errors.As(err, &fe) || fe.Kind != Oversized {
		t.Fatalf("got %v, want an Oversized FrameError before the body", err)
	}
	go func() {
		_, _ = io.WriteString(pw, strings.Repeat("x", 5000)+lspFrame(`{"jsonrpc":"2.0","method":"next"}`))
		_ = pw.Close()
	}()
	var m msg
	if err := r.ReadMessage(&m); err != nil || m.Method != "next" {
		t.Fatalf("after the skipped body: %+v %v", m, err)
	}
}

// TestReader_LSPResyncAfterMissingLength: a header block without
// Content-Length is reported, and the next frame is found again whether
// the stray body ends with a line break or is glued to the next header.
func TestReader_LSPResyncAfterMissingLength(t *testing.T) {
	for name, sep := range map[string]string{"glued": "", "newline": "\r\n"} {
		input := "X-Other: 1\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"lost"}` + sep +
			lspFrame(`{"jsonrpc":"2.0","id":2,"method":"found"}`)
		got, bad := readAll(t, LSP, 1024, input)
		if methods(got) != "found" || len(bad) != 1 || bad[0].Kind != NoLength {
			t.Errorf("%s: delivered %+v, bad %v", name, got, kinds(bad))
		}
	}
	for _, h := range []string{"Content-Length: x", "Content-Length: -1"} {
		_, bad := readAll(t, LSP, 1024, h+"\r\n\r\n")
		if len(bad) != 1 || bad[0].Kind != NoLength || bad[0].Reason != "frame header without a valid Content-Length" {
			t.Errorf("%q: bad %+v", h, bad)
		}
	}
}

// TestReader_TruncatedLSPBody: a body cut short ends the stream with a
// read error, not a frame.
func TestReader_TruncatedLSPBody(t *testing.T) {
	r := NewReader(strings.NewReader("Content-Length: 10\r\n\r\n{}"), LSP, 1024)
	if _, err := r.ReadFrame(); err == nil || errors.As(err, new(*FrameError)) {
		t.Fatalf("got %v, want a read error", err)
	}
}

// TestReader_DefaultLimit: maxBytes ≤ 0 means DefaultMaxFrameBytes.
func TestReader_DefaultLimit(t *testing.T) {
	if r := NewReader(strings.NewReader(""), NDJSON, 0); r.MaxBytes() != DefaultMaxFrameBytes || r.Framing() != NDJSON {
		t.Fatalf("MaxBytes %d, Framing %q", r.MaxBytes(), r.Framing())
	}
}

// FuzzReader: no input makes a Reader panic or stop making progress, in
// either framing; frames are non-empty and within the limit, and every
// error is a *FrameError or ends the stream.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"a"}`+"\n"), false)
	f.Add([]byte("[1,2]\n{\n"), false)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1.5,"result":{}}`+"\n"), false)
	f.Add([]byte(lspFrame(`{"jsonrpc":"2.0","id":1,"method":"a"}`)), true)
	f.Add([]byte("X: 1\r\n\r\n{}Content-Length: 2\r\n\r\n{}Content-Length: 999\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, lsp bool) {
		framing := NDJSON
		if lsp {
			framing = LSP
		}
		r := NewReader(bytes.NewReader(in), framing, 256)
		for i := 0; i <= len(in)+1; i++ {
			frame, err := r.ReadFrame()
			var fe *FrameError
			if errors.As(err, &fe) {
				continue
			}
			if err != nil {
				return
			}
			if len(frame) == 0 || len(frame) > 256 {
				t.Fatalf("frame of %d bytes", len(frame))
			}
			if err := CheckMessage(frame); err != nil && !errors.As(err, &fe) {
				t.Fatalf("CheckMessage: %v", err)
			}
		}
		t.Fatalf("no end after %d reads of %d bytes", len(in)+2, len(in))
	})
}

// endlessReader yields n bytes of 'x' then a newline and a small message.
type endlessReader struct{ n int64 }

func (e *endlessReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	k := int64(len(p))
	if k > e.n {
		k = e.n
	}
	for i := range p[:k] {
		p[i] = 'x'
	}
	e.n -= k
	return int(k), nil
}

// TestReader_OverCapLineHoldsAtMostTheCap: a 256 MiB line under an 8 MiB
// cap is dropped as it is read: the reader allocates about the cap for it
// (measured as bytes allocated, not time), never the line, and reads on
// (docs/protocol.md §20).
func TestReader_OverCapLineHoldsAtMostTheCap(t *testing.T) {
	const limit = 8 << 20
	in := io.MultiReader(&endlessReader{n: 256 << 20}, strings.NewReader("\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n"))
	r := NewReader(in, NDJSON, limit)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := r.ReadFrame()
	runtime.ReadMemStats(&after)
	var fe *FrameError
	if !errors.As(err, &fe) || fe.Kind != Oversized {
		t.Fatalf("over-cap line: %v, want Oversized", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > limit+limit/2 {
		t.Fatalf("allocated %d bytes for a dropped line under a %d-byte cap", got, limit)
	}
	if f, err := r.ReadFrame(); err != nil || !strings.Contains(string(f), `"m"`) {
		t.Fatalf("next frame %q %v", f, err)
	}
}

// TestReader_ReadFrameToFillsTheBuffer: lines that fit the buffer's spare
// capacity are copied into it one after another (each frame a subslice of
// it, trimmed; the buffer grows by each whole line), a line that does not
// fit gets its own allocation and leaves the buffer as it was, and
// reading them allocates nothing per line that fits.
func TestReader_ReadFrameToFillsTheBuffer(t *testing.T) {
	in := " {\"a\":1}\r\n\n{\"b\":2}\n" + `{"c":"` + strings.Repeat("x", 64) + "\"}\n{\"d\":4}\n"
	r := NewReader(strings.NewReader(in), NDJSON, 0)
	buf := make([]byte, 0, 32)
	var frames []string
	for {
		out, frame, err := r.ReadFrameTo(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		inBuf := len(frame) > 0 && cap(out) > 0 && &out[:cap(out)][cap(out)-1] == &buf[:cap(buf)][cap(buf)-1] &&
			len(out) > len(buf)
		frames = append(frames, string(frame)+map[bool]string{true: " in", false: " own"}[inBuf])
		if !inBuf && len(out) != len(buf) {
			t.Fatalf("a frame of its own changed the buffer: len %d → %d", len(buf), len(out))
		}
		if inBuf && string(out[len(out)-len(frame)-1:len(out)-1]) != string(frame) && string(out[len(out)-len(frame)-2:len(out)-2]) != string(frame) {
			t.Fatalf("frame %q is not the buffer's tail %q", frame, out)
		}
		buf = out
	}
	want := []string{`{"a":1} in`, `{"b":2} in`, `{"c":"` + strings.Repeat("x", 64) + `"} own`, `{"d":4} in`}
	if strings.Join(frames, "|") != strings.Join(want, "|") {
		t.Fatalf("frames %q, want %q", frames, want)
	}
	if string(buf) != " {\"a\":1}\r\n\n{\"b\":2}\n{\"d\":4}\n" {
		t.Fatalf("buffer %q", buf)
	}
	line := []byte("{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n")
	src := bytes.NewReader(bytes.Repeat(line, 1000))
	r = NewReader(src, NDJSON, 0)
	big := make([]byte, 0, 1000*len(line))
	allocs := testing.AllocsPerRun(1, func() {
		for {
			var err error
			if big, _, err = r.ReadFrameTo(big); err != nil {
				return
			}
		}
	})
	if allocs > 5 || len(big) != 1000*len(line) {
		t.Fatalf("%v allocations for 1000 lines into one buffer (%d bytes of %d)", allocs, len(big), 1000*len(line))
	}
}
