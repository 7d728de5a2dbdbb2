package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// TestCancelledOpenStillDeliversTheCleanupProof: an Open whose ctx ends
// during admission returns CANCELLED at once, and the cleanup proof of
// the aborted admission, which comes in the sidecar's later answer
// (docs/protocol.md §7 $/cancelRequest), reaches OnProof.
func TestCancelledOpenStillDeliversTheCleanupProof(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()
	proofs := make(chan client.Proof, 4)
	c := start(t, client.Options{OnProof: func(p client.Proof) { proofs <- p }})

	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	opened := make(chan error, 1)
	go func() {
		_, err := c.Open(octx, client.OpenParams{
			SessionKey: "late-proof", Agent: "generic", Cwd: t.TempDir(),
			Command: client.Command{Path: faultagentBin, Args: []string{"--mode", "hang-initialize"}},
			Env:     map[string]string{testmark.Env: mark},
		})
		opened <- err
	}()
	// Cancel once the provider runs, so that there is a tree to clean up.
	for deadline := time.Now().Add(20 * time.Second); len(markedLive(mark)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the provider never started")
		}
	}
	ocancel()
	select {
	case err := <-opened:
		var ce *client.Error
		if !errors.As(err, &ce) || ce.DataCode != client.DataCodeCancelled || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Open: %#v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled Open did not return")
	}
	select {
	case p := <-proofs:
		if p.Origin != "admission" || p.SessionKey != "late-proof" || p.Reason != "admission aborted" || !p.Complete || len(p.Processes) == 0 {
			t.Fatalf("proof = %+v", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the aborted admission's cleanup proof never reached OnProof")
	}
	assertNoMarkedProcess(t, mark)
	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestCancelledPromptWaitsForTheTurnToEnd: a Prompt whose ctx ends sends
// the cancel and returns CANCELLED only once the sidecar has answered the
// turn (with its cancelled result), so the next Prompt on the session is
// not refused TURN_ACTIVE.
func TestCancelledPromptWaitsForTheTurnToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := testmark.New()
	c := start(t, client.Options{})
	s := openFault(ctx, t, c, "cancel-wait", mark, client.OpenParams{}, "slow-turn=60000")

	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	type answer struct {
		res *client.PromptResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.Prompt(pctx, client.PromptParams{RequestID: "t1", Prompt: "slow"}, nil)
		done <- answer{res, err}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := s.Status(ctx)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.State == "turn" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn never started: %+v", st)
		}
	}
	pcancel()
	var r answer
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a cancelled Prompt did not return")
	}
	var ce *client.Error
	if !errors.As(r.err, &ce) || ce.DataCode != client.DataCodeCancelled || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Prompt: %#v", r.err)
	}
	if r.res == nil || r.res.RequestID != "t1" || r.res.Status != "cancelled" {
		t.Fatalf("cancelled Prompt's result = %+v, want the turn's cancelled result", r.res)
	}
	if st, err := s.Status(ctx); err != nil || st.State != "open" {
		t.Fatalf("Status right after the cancelled Prompt: %+v, %v", st, err)
	}
	// The next turn is accepted (it runs into its own timeoutMs).
	res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t2", Prompt: "next", TimeoutMs: 300}, nil)
	if err != nil || res.Status != "failed" || res.Error == nil || res.Error.Code != "TURN_TIMEOUT" {
		t.Fatalf("Prompt after the cancelled one: %+v, %v", res, err)
	}
	if _, err := s.Close(ctx, client.CloseParams{}); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	assertNoMarkedProcess(t, mark)
}
