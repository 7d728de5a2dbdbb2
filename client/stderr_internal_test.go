package client

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return 0, errors.New("broken")
}

// TestStderrTeeKeepsTheCappedEnd: the tee keeps the last stderrTailBytes,
// from a whole line when it had to cut, copies everything to out and never
// fails the sidecar's stderr copy because out fails.
func TestStderrTeeKeepsTheCappedEnd(t *testing.T) {
	out := &failingWriter{}
	tee := &stderrTee{out: out}
	var all bytes.Buffer
	for i := range 300 {
		line := strings.Repeat("x", i%50) + "\n"
		all.WriteString(line)
		if n, err := tee.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if _, err := tee.Write([]byte("last line\n")); err != nil {
		t.Fatal(err)
	}
	all.WriteString("last line\n")
	if out.n != all.Len() {
		t.Errorf("out got %d bytes, want %d", out.n, all.Len())
	}
	tail := tee.Tail()
	if len(tail) > stderrTailBytes || !strings.HasSuffix(tail, "last line") || !strings.HasSuffix(strings.TrimSuffix(all.String(), "\n"), tail) {
		t.Fatalf("tail (%d bytes) is not the capped end of the stream", len(tail))
	}
	if !strings.HasSuffix(all.String()[:all.Len()-len(tail)-1], "\n") {
		t.Errorf("tail does not start at a whole line")
	}

	big := &stderrTee{}
	_, _ = big.Write(bytes.Repeat([]byte("y"), 3*stderrTailBytes))
	if n := len(big.Tail()); n != stderrTailBytes {
		t.Errorf("tail of one long write = %d bytes, want %d", n, stderrTailBytes)
	}
	small := &stderrTee{}
	_, _ = small.Write([]byte("one\ntwo\n"))
	if got := small.Tail(); got != "one\ntwo" {
		t.Errorf("uncut tail = %q", got)
	}
}
