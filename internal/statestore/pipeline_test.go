package statestore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
)

// TestStage_PassesBytesInOrderAndErrorsBothWays: a stage delivers every
// byte in order across many chunks and reads EOF again after EOF; the
// writer's error reaches the reader; the reader's error reaches the
// writer's next Write and finish.
func TestStage_PassesBytesInOrderAndErrorsBothWays(t *testing.T) {
	data := make([]byte, 3*stageChunkSize*4+123)
	rand.Read(data)
	var got bytes.Buffer
	st, err := startStage(4, func(r io.Reader) error {
		if _, err := io.Copy(&got, r); err != nil {
			return err
		}
		if n, err := r.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Errorf("read after EOF: %d, %v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := data; len(p) > 0; {
		n := min(len(p), 1000)
		if _, err := st.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := st.finish(nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("bytes differ")
	}

	boom := errors.New("writer failed")
	st, _ = startStage(2, func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	st.Write([]byte("partial"))
	if err := st.finish(boom); err != boom {
		t.Fatalf("reader saw %v, want the writer's error", err)
	}

	bad := errors.New("reader failed")
	st, _ = startStage(2, func(r io.Reader) error { return bad })
	var werr error
	for range 100 {
		if _, werr = st.Write(make([]byte, stageChunkSize)); werr != nil {
			break
		}
	}
	if werr != bad {
		t.Fatalf("Write after the reader failed: %v", werr)
	}
	if err := st.finish(nil); err != bad {
		t.Fatalf("finish: %v", err)
	}
}
