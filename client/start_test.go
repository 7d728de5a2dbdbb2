package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
)

// TestStartReportsWhyTheSidecarExited: when the sidecar refuses to start,
// the Start error gives its exit status and the end of its stderr, also
// without Options.Stderr.
func TestStartReportsWhyTheSidecarExited(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"bad flag", []string{"--no-such-flag"}, []string{"exit status 2", "flag provided but not defined: -no-such-flag"}},
		// Refused where the cgroup2 hierarchy has no pids controller
		// (docs/protocol.md §18.2); elsewhere the sidecar starts and the
		// case is skipped.
		{"default pids", []string{"--default-pids", "64"}, []string{"exit status 2", "--default-pids cannot be enforced"}},
		// Refused before the spawn: this client reads NDJSON only, and an
		// LSP-framed sidecar would leave Start waiting for its context.
		{"lsp framing", []string{"--framing", "lsp"}, []string{"ndjson framing only"}},
		{"lsp framing =", []string{"--framing=lsp"}, []string{"ndjson framing only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := client.Start(ctx, client.Options{Binary: sidecarBin, StateDir: t.TempDir(), Args: tc.args})
			if err == nil {
				_ = c.Close(ctx)
				if tc.name == "default pids" {
					t.Skip("this machine enforces --default-pids")
				}
				t.Fatal("Start succeeded")
			}
			var ce *client.Error
			if !errors.As(err, &ce) || ce.DataCode != client.DataCodeStart {
				t.Fatalf("Start error: %#v, want %s", err, client.DataCodeStart)
			}
			for _, w := range tc.want {
				if !strings.Contains(ce.Message, w) {
					t.Errorf("Start error %q lacks %q", ce.Message, w)
				}
			}
			if len(ce.Message) > 4096+200 {
				t.Errorf("Start error is %d bytes long, not capped", len(ce.Message))
			}
		})
	}
}

// TestStartRefusesABinaryThatIsNotTheSidecar: a binary that echoes the
// client's frames back (cat) answers initialize with the client's own
// -32601; Start says the binary is not acpx-sidecar (DataCodeStart).
func TestStartRefusesABinaryThatIsNotTheSidecar(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Start(ctx, client.Options{Binary: "/bin/cat"})
	if err == nil {
		_ = c.Close(ctx)
		t.Fatal("Start of /bin/cat succeeded")
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.DataCode != client.DataCodeStart || !strings.Contains(ce.Message, "not answer initialize as acpx-sidecar") {
		t.Fatalf("Start error: %#v, want %s saying it is not acpx-sidecar", err, client.DataCodeStart)
	}
}
