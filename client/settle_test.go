package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/testmark"
)

// ask is one call of a permission handler that never answers.
type ask struct {
	ctx context.Context
	req client.PermissionRequest
}

// waitEnded fails t unless ctx (a permission handler's) ends within a
// bound while the connection is still open.
func waitEnded(t *testing.T, c *client.Client, what string, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-c.Done():
		t.Fatalf("%s: the handler's ctx ended only with the connection", what)
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: the handler's ctx did not end after the sidecar settled the ask", what)
	}
}

func nextAsk(t *testing.T, asks <-chan ask) ask {
	t.Helper()
	select {
	case a := <-asks:
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("no session/requestPermission reached OnPermission")
		return ask{}
	}
}

// TestPermissionHandlerIsToldWhenTheAskIsSettled: an OnPermission that
// never answers gets its ctx ended when the sidecar decides the ask
// without it (permissionTimeoutMs), when the turn is cancelled, and when
// the session is closed, not only when the connection closes
// (docs/protocol.md §9, §18.3).
func TestPermissionHandlerIsToldWhenTheAskIsSettled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	mark := testmark.New()
	asks := make(chan ask, 8)
	c := start(t, client.Options{OnPermission: func(ctx context.Context, req client.PermissionRequest) client.PermissionOutcome {
		asks <- ask{ctx, req}
		<-ctx.Done()
		return client.Cancelled()
	}})
	open := func(key string, timeoutMs int64) *client.Session {
		return openFault(ctx, t, c, key, mark, client.OpenParams{
			PermissionMode: "approve-reads", NonInteractivePermissions: "deny", PermissionTimeoutMs: timeoutMs,
		}, "permission=execute")
	}

	t.Run("timeout", func(t *testing.T) {
		s := open("settle-timeout", 300)
		res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "run"}, nil)
		if err != nil || res.Status != "completed" {
			t.Fatalf("Prompt: %+v, %v", res, err)
		}
		a := nextAsk(t, asks)
		if a.req.Session != s.ID() || a.req.RequestID != "t1" {
			t.Fatalf("ask = %+v", a.req)
		}
		waitEnded(t, c, "permissionTimeoutMs", a.ctx)
		if _, err := s.Close(ctx, client.CloseParams{}); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})

	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			s := open("settle-"+how, 0)
			type answer struct {
				res *client.PromptResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := s.Prompt(ctx, client.PromptParams{RequestID: "t1", Prompt: "run"}, nil)
				done <- answer{res, err}
			}()
			a := nextAsk(t, asks)
			switch how {
			case "cancel":
				if ok, err := s.Cancel(ctx); !ok || err != nil {
					t.Fatalf("Cancel: %v, %v", ok, err)
				}
			case "close":
				if _, err := s.Close(ctx, client.CloseParams{}); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			waitEnded(t, c, how, a.ctx)
			r := <-done
			if r.err != nil || r.res.Status != "cancelled" {
				t.Fatalf("Prompt: %+v, %v", r.res, r.err)
			}
			if how == "cancel" {
				if _, err := s.Close(ctx, client.CloseParams{}); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
		})
	}

	if _, err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	assertNoMarkedProcess(t, mark)
}
