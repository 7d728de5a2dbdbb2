package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/client"
)

// The floor benchmarks (issue 22; docs/architecture.md, "Performance"):
// one built sidecar per side, the fault agent's flood, and the same turns
// run alternately (client, floor, client, floor, …) so that machine noise
// falls on both; the medians are reported. Host CPU is this process's
// (getrusage, every thread) from the session/prompt sent to its result;
// the sidecar's and the agent's CPU are not in it. The floor is the bare
// reader of bench_raw_test.go. Knobs: ACPX_BENCH_FLOOR_UPDATES (updates
// per measured run, default 200000), ACPX_BENCH_FLOOR_ROUNDS (runs of each
// side, default 5), ACPX_BENCH_FLOOR_SESSIONS (sessions of the concurrent
// flood, default 100).

// BenchmarkGoClientTurn: one session, one turn of ACPX_BENCH_FLOOR_UPDATES
// updates, through Session.Prompt with a per-update callback (client)
// against the bare reader (floor).
func BenchmarkGoClientTurn(b *testing.B) {
	benchFloor(b, 1)
}

// BenchmarkGoClientFlood: ACPX_BENCH_FLOOR_SESSIONS sessions in one
// sidecar, each running one turn at the same time, the turns' updates
// adding up to ACPX_BENCH_FLOOR_UPDATES.
func BenchmarkGoClientFlood(b *testing.B) {
	benchFloor(b, envInt("ACPX_BENCH_FLOOR_SESSIONS", 100))
}

func benchFloor(b *testing.B, sessions int) {
	total := envInt("ACPX_BENCH_FLOOR_UPDATES", 200000)
	rounds := envInt("ACPX_BENCH_FLOOR_ROUNDS", 5)
	perTurn := total / sessions
	// A fault-agent turn sends a hello chunk, flood=N chunks and a
	// usage_update: N+2 updates.
	modes := "flood=" + strconv.Itoa(perTurn-2)
	total = perTurn * sessions
	for range b.N {
		cl := newClientSide(b, sessions, modes)
		raw := newRawSide(b, sessions, modes)
		var cs, rs []sample
		for r := range rounds {
			s, err := measure(func() error { return cl.turn(r, perTurn) })
			if err != nil {
				b.Fatalf("client turn: %v", err)
			}
			cs = append(cs, s)
			s, err = measure(func() error { return raw.turn(r, perTurn) })
			if err != nil {
				b.Fatalf("bare turn: %v", err)
			}
			rs = append(rs, s)
		}
		c, f := medians(cs), medians(rs)
		perUpdate := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(total) }
		b.ReportMetric(perUpdate(c.cpu), "client-cpu-µs/update")
		b.ReportMetric(perUpdate(f.cpu), "floor-cpu-µs/update")
		b.ReportMetric(float64(c.cpu)/float64(f.cpu), "cpu-ratio")
		b.ReportMetric(float64(c.wall.Milliseconds()), "client-wall-ms")
		b.ReportMetric(float64(f.wall.Milliseconds()), "floor-wall-ms")
		b.ReportMetric(float64(c.wall)/float64(f.wall), "wall-ratio")
		b.Logf("Go host, %d session(s), %d updates, medians of %d alternated runs (load %s): client %.2f µs CPU/update, %d ms; floor (bufio + json.Unmarshal) %.2f µs, %d ms; CPU ×%.2f, wall ×%.2f",
			sessions, total, rounds, loadAvg(), perUpdate(c.cpu), c.wall.Milliseconds(), perUpdate(f.cpu), f.wall.Milliseconds(),
			float64(c.cpu)/float64(f.cpu), float64(c.wall)/float64(f.wall))
		cl.close(b)
	}
}

// clientSide is a sidecar run through this package with sessions open.
type clientSide struct {
	c        *client.Client
	sessions []*client.Session
}

func newClientSide(b *testing.B, n int, modes string) *clientSide {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Start(ctx, client.Options{Binary: sidecarBin, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	cs := &clientSide{c: c}
	cwd := b.TempDir()
	for i := range n {
		s, err := c.Open(ctx, client.OpenParams{SessionKey: fmt.Sprintf("client-%d", i), Agent: "generic", Cwd: cwd,
			Command:        client.Command{Path: faultagentBin, Args: []string{"--mode", modes}},
			PermissionMode: "approve-reads", NonInteractivePermissions: "deny"})
		if err != nil {
			_ = c.Close(ctx)
			b.Fatalf("Open: %v", err)
		}
		cs.sessions = append(cs.sessions, s)
	}
	return cs
}

// turn runs one turn on every session at once and checks each one's
// update count.
func (cs *clientSide) turn(round, perTurn int) error {
	ctx := context.Background()
	errs := make(chan error, len(cs.sessions))
	var wg sync.WaitGroup
	for _, s := range cs.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			_, err := s.Prompt(ctx, client.PromptParams{RequestID: "t" + strconv.Itoa(round), Prompt: "go"}, func(client.Update) { n++ })
			if err == nil && n != perTurn {
				err = fmt.Errorf("%s: %d updates, want %d", s.ID(), n, perTurn)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (cs *clientSide) close(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cs.c.Shutdown(ctx); err != nil {
		b.Errorf("Shutdown: %v", err)
	}
}

// rawSide is a sidecar driven by the bare reader with sessions open.
type rawSide struct {
	s        *rawSidecar
	sessions []string
}

func newRawSide(b *testing.B, n int, modes string) *rawSide {
	b.Helper()
	rs := &rawSide{s: startRaw(b)}
	cwd := b.TempDir()
	for i := range n {
		id, err := rs.s.open(fmt.Sprintf("raw-%d", i), cwd, modes)
		if err != nil {
			b.Fatalf("open: %v", err)
		}
		rs.sessions = append(rs.sessions, id)
	}
	return rs
}

// turn sends every session's prompt, then reads until all are answered.
func (rs *rawSide) turn(round, perTurn int) error {
	ids := make([]int, 0, len(rs.sessions))
	for _, s := range rs.sessions {
		id, err := rs.s.send("session/prompt", map[string]any{"session": s, "requestId": "t" + strconv.Itoa(round), "prompt": "go"})
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	res, n, err := rs.s.await(ids...)
	if err != nil {
		return err
	}
	for _, r := range res {
		var pr struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(r, &pr) != nil || pr.Status != "completed" {
			return fmt.Errorf("prompt result %s", r)
		}
	}
	if want := perTurn * len(rs.sessions); n != want {
		return fmt.Errorf("%d updates, want %d", n, want)
	}
	return nil
}
