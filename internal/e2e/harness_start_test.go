package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
	"github.com/acpx-sidecar/acpx-sidecar/internal/wirecheck"
)

// containmentEnv names the containment mode (e.g. "process-table") that
// every sidecar of this run gets when its test asks for none: `make test`
// runs the cleanup, close and shutdown tests a second time with it
// (docs/operations.md, "macOS").
const containmentEnv = "ACPX_E2E_CONTAINMENT"

// withContainment appends --containment $ACPX_E2E_CONTAINMENT to args
// that choose no containment.
func withContainment(args []string) []string {
	m := os.Getenv(containmentEnv)
	if m == "" {
		return args
	}
	for _, a := range args {
		if a == "--containment" || strings.HasPrefix(a, "--containment=") {
			return args
		}
	}
	return append(append([]string(nil), args...), "--containment", m)
}

// startSidecar spawns the built sidecar with args (no initialize sent),
// under $ACPX_E2E_CONTAINMENT when set and args choose no containment.
func startSidecar(t testing.TB, args ...string) *sidecar {
	t.Helper()
	return startSidecarVia(t, nil, args...)
}

// startSidecarBin is startSidecar of the executable at bin (a copy of the
// built sidecar somewhere else, say).
func startSidecarBin(t testing.TB, bin string, args ...string) *sidecar {
	t.Helper()
	return startSidecarExec(t, bin, nil, args...)
}

// startSidecarVia is startSidecar run through wrapper (a command that
// execs its last argument in its own place, such as `prlimit --nofile=N:N
// --`), so the sidecar starts under whatever the wrapper sets; nil runs
// the sidecar directly.
func startSidecarVia(t testing.TB, wrapper []string, args ...string) *sidecar {
	t.Helper()
	return startSidecarExec(t, sidecarBin, wrapper, args...)
}

// startSidecarExec starts the sidecar executable sc, through wrapper when
// it is not nil (startSidecarVia), with args.
func startSidecarExec(t testing.TB, sc string, wrapper []string, args ...string) *sidecar {
	t.Helper()
	args = withContainment(args)
	bin := sc
	if len(wrapper) > 0 {
		bin = wrapper[0]
		args = append(append(append([]string(nil), wrapper[1:]...), sc), args...)
	}
	s := &sidecar{t: t, replies: map[string]*frame{}, stderr: &bytes.Buffer{}, exited: make(chan struct{}),
		nextID: rawIDBase, later: map[string]chan map[string]json.RawMessage{}}
	s.cond = sync.NewCond(&s.mu)
	schema, err := wirecheck.Default()
	if err != nil {
		t.Fatalf("protocol schema: %v", err)
	}
	s.wire = schema.NewConn()
	s.c, err = client.Spawn(context.Background(), client.Options{
		Binary: bin,
		Args:   args,
		Stderr: lockedBuf{&s.errMu, s.stderr, func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		}},
		OnFrame:   s.tap,
		OnRequest: s.serve,
	})
	if err != nil {
		t.Fatal(err)
	}
	trackChild(s.c.Process().Pid) // its Wait is the client's, not the orphan reaper's
	s.cmd = procHandle{s.c.Process()}
	s.stdin = stdinPipe{s.c}
	go s.watch()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.stdin.Close() // EOF = shutdown + exit
			select {
			case <-s.exited:
			case <-time.After(30 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.exited
				t.Errorf("sidecar did not exit after stdin EOF")
			}
		}
	})
	return s
}
