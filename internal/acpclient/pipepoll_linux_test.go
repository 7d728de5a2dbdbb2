//go:build linux

package acpclient

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// pipePair is an os.Pipe whose read end went to an epoll instance of its
// own (pollPipe).
func pipePair(t *testing.T) (io.ReadCloser, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr := pollPipe(r)
	if _, ok := pr.(*pipeReader); !ok {
		t.Fatalf("pollPipe kept the runtime's reader (%T)", pr)
	}
	return pr, w
}

// TestPipeReader_DeliversInOrderThenEOF: what the writer writes, in
// pieces with pauses between them (the reader paces while data keeps
// coming, and waits armed across the pauses), arrives whole and in order; the writer's close is
// io.EOF once drained.
func TestPipeReader_DeliversInOrderThenEOF(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, w := pipePair(t)
	r.(*pipeReader).setPacing(true) // as while taking updates: empty reads pace
	var want bytes.Buffer
	lines := make([]string, 300)
	for i := range lines {
		lines[i] = "line " + strconv.Itoa(i) + "\n"
		want.WriteString(lines[i])
	}
	go func() {
		for i, line := range lines {
			_, _ = w.WriteString(line)
			if i%100 == 99 {
				time.Sleep(5 * time.Millisecond) // an idle gap: the reader waits armed
			}
		}
		w.Close()
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read %d bytes, want %d, or out of order", len(got), want.Len())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPipeReader_CloseWakesAWaitingRead: a Read waiting on an empty pipe
// whose writer stays open returns os.ErrClosed when the reader is closed,
// and the descriptor is closed (a second Close is a no-op).
func TestPipeReader_CloseWakesAWaitingRead(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, w := pipePair(t)
	defer w.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 16))
		errc <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read after close: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Read was not woken by Close")
	}
	_ = r.Close()
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("the pipe's read end is still open after Close")
	}
}

// TestPipeReader_CloseReleasesItsDescriptors: each reader holds its pipe
// and an epoll instance; Close releases both: no descriptor of this
// process names the reader's pipe any more (its pipe:[inode] is gone from
// /proc/self/fd once the write end is closed too) and its epoll file is
// closed. Checked by identity, not by counting the descriptor table,
// which goroutines of earlier tests may still be changing.
func TestPipeReader_CloseReleasesItsDescriptors(t *testing.T) {
	targets := func() map[string]int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
				m[l]++
			}
		}
		return m
	}
	var rs []*pipeReader
	var ws []*os.File
	var pipes []string
	for i := 0; i < 20; i++ {
		r, w := pipePair(t)
		pr := r.(*pipeReader)
		l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(pr.fd))
		if err != nil || !strings.HasPrefix(l, "pipe:[") {
			t.Fatalf("reader %d's descriptor %d is %q (%v), want a pipe", i, pr.fd, l, err)
		}
		if el, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(pr.ep.Fd()))); err != nil || el != "anon_inode:[eventpoll]" {
			t.Fatalf("reader %d's epoll descriptor is %q (%v)", i, el, err)
		}
		rs, ws, pipes = append(rs, pr), append(ws, w), append(pipes, l)
	}
	for i := range rs {
		if err := rs[i].Close(); err != nil {
			t.Fatal(err)
		}
		ws[i].Close()
	}
	now := targets()
	for i, l := range pipes {
		if now[l] != 0 {
			t.Errorf("reader %d: %d descriptors still name its %s after Close", i, now[l], l)
		}
		if err := rs[i].ep.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("reader %d: its epoll file was still open (Close: %v)", i, err)
		}
	}
}

// TestPipeReader_PacedReadAfterADrainingRead: while pacing, a read that
// emptied the pipe (it returned less than asked) makes the next Read pace
// before its read(2); what was written meanwhile still arrives, and a
// Read pacing or waiting after such a read is woken by Close.
func TestPipeReader_PacedReadAfterADrainingRead(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, w := pipePair(t)
	defer w.Close()
	pr := r.(*pipeReader)
	pr.setPacing(true)
	buf := make([]byte, 64)
	for _, line := range []string{"a\n", "bb\n"} {
		if _, err := w.WriteString(line); err != nil {
			t.Fatal(err)
		}
		n, err := r.Read(buf)
		if err != nil || string(buf[:n]) != line {
			t.Fatalf("Read = %q, %v; want %q", buf[:n], err, line)
		}
		if !pr.drained {
			t.Fatalf("a read of %d bytes into %d did not mark the pipe drained", n, len(buf))
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.Read(buf)
		errc <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read after close: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a pacing Read was not woken by Close")
	}
}
