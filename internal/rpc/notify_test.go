package rpc

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/jsonl"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// batchBackend answers session/status after sending a batch of three
// notifications through the server (as a session actor flushes its queue
// before it replies).
type batchBackend struct {
	fakeBackend
}

func (b *batchBackend) Status(p protocol.SessionRef, reply Reply) {
	ns := make([]jsonl.Notification, 3)
	for i := range ns {
		ns[i] = jsonl.Notification{Method: "session/update", Params: []byte(`{"session":"` + p.Session + `","seq":` + strconv.Itoa(i+1) + `}`)}
	}
	if err := b.srv.NotifyBatch(ns); err != nil {
		reply(nil, err)
		return
	}
	reply(map[string]string{"session": p.Session}, nil)
}

type wireFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Session string `json:"session"`
		Seq     int    `json:"seq"`
	} `json:"params"`
	Result struct {
		Session string `json:"session"`
	} `json:"result"`
}

func serveBatch(t *testing.T) (*Server, io.Writer, *bufio.Reader, func()) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := NewServer(Options{In: inR, Out: outW})
	be := &batchBackend{fakeBackend{srv: srv}}
	done := make(chan struct{})
	go func() { srv.Serve(be); close(done) }()
	r := bufio.NewReader(outR)
	stop := func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, r) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("server did not stop")
		}
		_ = outW.Close()
	}
	return srv, inW, r, stop
}

func readFrame(t *testing.T, r *bufio.Reader) wireFrame {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	var f wireFrame
	if err := json.Unmarshal(line, &f); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return f
}

// TestServer_NotifyBatchPrecedesLaterResponse: the frames of a batch sent
// before a reply reach the host in order and before that reply, for
// requests answered one after another and for requests in flight together.
func TestServer_NotifyBatchPrecedesLaterResponse(t *testing.T) {
	_, in, r, stop := serveBatch(t)
	defer stop()
	send := func(s string) {
		if _, err := io.WriteString(in, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}`)
	if f := readFrame(t, r); string(f.ID) != `"init"` {
		t.Fatalf("first frame %+v", f)
	}
	const n = 20
	go func() {
		for i := 0; i < n; i++ {
			send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"session/status","params":{"session":"s` + strconv.Itoa(i) + `"}}`)
		}
	}()
	// Per session: updates 1, 2, 3 consecutively, then its answer.
	next := map[string]int{}
	answered := 0
	var inBatch string
	for answered < n {
		f := readFrame(t, r)
		switch {
		case f.Method == "session/update":
			s := f.Params.Session
			if inBatch != "" && inBatch != s {
				t.Fatalf("a frame of %s inside the batch of %s", s, inBatch)
			}
			if f.Params.Seq != next[s]+1 {
				t.Fatalf("%s: update %d after %d", s, f.Params.Seq, next[s])
			}
			next[s] = f.Params.Seq
			inBatch = s
			if f.Params.Seq == 3 {
				inBatch = ""
			}
		case f.ID != nil:
			if inBatch != "" {
				t.Fatalf("response %s inside the batch of %s", f.ID, inBatch)
			}
			if next[f.Result.Session] != 3 {
				t.Fatalf("answer for %s after %d of its 3 updates", f.Result.Session, next[f.Result.Session])
			}
			answered++
		default:
			t.Fatalf("unexpected frame %+v", f)
		}
	}
}

// TestServer_NotifyBatchBlocksWhileHostNotReading: a batch is written while
// the host reads it and not before: NotifyBatch has not returned while
// part of the batch is unread (backpressure), and returns once it is read;
// concurrent batches never interleave.
func TestServer_NotifyBatchBlocksWhileHostNotReading(t *testing.T) {
	srv, in, r, stop := serveBatch(t)
	defer stop()
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	readFrame(t, r)
	big := `"` + strings.Repeat("y", 256<<10) + `"`
	var wg sync.WaitGroup
	returned := make(chan string, 2)
	for _, who := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := []jsonl.Notification{
				{Method: "x/" + who, Params: []byte(`{"session":"` + who + `","seq":1,"pad":` + big + `}`)},
				{Method: "x/" + who, Params: []byte(`{"session":"` + who + `","seq":2}`)},
			}
			if err := srv.NotifyBatch(ns); err != nil {
				t.Error(err)
			}
			returned <- who
		}()
	}
	// Read the first frame's first bytes only: its batch cannot be written
	// through, so neither batch has returned.
	head := make([]byte, 64)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	select {
	case who := <-returned:
		t.Fatalf("the batch of %s returned while unread", who)
	default:
	}
	rest, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var f wireFrame
	if err := json.Unmarshal(append(head, rest...), &f); err != nil {
		t.Fatal(err)
	}
	first := f.Params.Session
	if g := readFrame(t, r); g.Params.Session != first || g.Params.Seq != 2 {
		t.Fatalf("after %s's first frame came %+v", first, g)
	}
	if who := <-returned; who != first {
		t.Fatalf("%s returned first, but %s's batch was written", who, first)
	}
	for i := 1; i <= 2; i++ {
		if g := readFrame(t, r); g.Params.Seq != i || g.Params.Session == first {
			t.Fatalf("second batch frame %d: %+v", i, g)
		}
	}
	wg.Wait()
}
