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
// run alternately (client, client batches, floor, then the next round
// starting one later: runFloor) so that machine noise falls on all; the
// medians are reported. Host CPU is this process's
// (getrusage, every thread) from the session/prompt sent to its result;
// the sidecar's and the agent's CPU are not in it. The floor is the bare
// reader of bench_raw_test.go. Knobs: ACPX_BENCH_FLOOR_UPDATES (updates
// per measured run, default 200000), ACPX_BENCH_FLOOR_ROUNDS (runs of each
// side, default 5), ACPX_BENCH_FLOOR_SESSIONS (sessions of the concurrent
// flood, default 100).

// BenchmarkGoClientTurn: one session, one turn of ACPX_BENCH_FLOOR_UPDATES
// updates, through Session.Prompt with a per-update callback (client) and
// through Session.PromptBatches (batches) against the bare reader (floor).
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
		cl := newClientSide(b)
		raw := newRawSide(b)
		keys := 0
		key := func() string { keys++; return "k" + strconv.Itoa(keys) }
		sides := []floorSide{
			{name: "client", open: func() (any, error) { return cl.open(key(), modes) }, turn: func(ss []any, r int) error { return cl.turn(ss, r, perTurn, false) }, close: cl.closeSession},
			{name: "batches", open: func() (any, error) { return cl.open(key(), modes) }, turn: func(ss []any, r int) error { return cl.turn(ss, r, perTurn, true) }, close: cl.closeSession},
			{name: "floor", open: func() (any, error) { return raw.open(key(), modes) }, turn: func(ss []any, r int) error { return raw.turn(ss, r, perTurn) }, close: raw.closeSession},
		}
		samples := runFloor(b, sides, sessions, rounds)
		c, cb, f := medians(samples["client"]), medians(samples["batches"]), medians(samples["floor"])
		perUpdate := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(total) }
		b.ReportMetric(perUpdate(c.cpu), "client-cpu-µs/update")
		b.ReportMetric(perUpdate(f.cpu), "floor-cpu-µs/update")
		b.ReportMetric(float64(c.cpu)/float64(f.cpu), "cpu-ratio")
		b.ReportMetric(float64(c.wall.Milliseconds()), "client-wall-ms")
		b.ReportMetric(float64(f.wall.Milliseconds()), "floor-wall-ms")
		b.ReportMetric(float64(c.wall)/float64(f.wall), "wall-ratio")
		b.ReportMetric(float64(cb.cpu)/float64(f.cpu), "batches-cpu-ratio")
		b.ReportMetric(float64(cb.wall)/float64(f.wall), "batches-wall-ratio")
		row := func(name string, s sample) string {
			return fmt.Sprintf("%s %.2f µs CPU/update, %d ms (CPU ×%.2f, wall ×%.2f)", name, perUpdate(s.cpu), s.wall.Milliseconds(),
				float64(s.cpu)/float64(f.cpu), float64(s.wall)/float64(f.wall))
		}
		b.Logf("Go host, %d session(s), %d updates, medians of %d alternated runs (load %s): %s; %s; floor (bufio + json.Unmarshal) %.2f µs, %d ms",
			sessions, total, rounds, loadAvg(), row("client (Prompt)", c), row("client (PromptBatches)", cb), perUpdate(f.cpu), f.wall.Milliseconds())
		cl.close(b)
	}
}

// floorSide is one way of running the turns: its sessions' open, one
// turn of all of them, and a session's close.
type floorSide struct {
	name  string
	open  func() (any, error)
	turn  func(sessions []any, round int) error
	close func(any) error
}

// runFloor runs rounds turns of each side, alternated, each round starting
// with the next side (a b c, b c a, …) so that what a turn leaves behind
// (the journal's writeback) falls on all alike. Each side has sessions of
// its own, so every agent runs one turn per round (the fault agent keeps
// each session's history, which slows it as it grows); with one session,
// each measured turn gets a fresh one.
func runFloor(b *testing.B, sides []floorSide, sessions, rounds int) map[string][]sample {
	b.Helper()
	openN := func(s floorSide, n int) []any {
		var ss []any
		for range n {
			x, err := s.open()
			if err != nil {
				b.Fatalf("%s: open: %v", s.name, err)
			}
			ss = append(ss, x)
		}
		return ss
	}
	fresh := sessions == 1
	sets := map[string][]any{}
	if !fresh {
		for _, s := range sides {
			sets[s.name] = openN(s, sessions)
		}
	}
	out := map[string][]sample{}
	for r := range rounds {
		for i := range sides {
			s := sides[(i+r)%len(sides)]
			ss := sets[s.name]
			if fresh {
				ss = openN(s, 1)
			}
			m, err := measure(func() error { return s.turn(ss, r) })
			if err != nil {
				b.Fatalf("%s turn: %v", s.name, err)
			}
			out[s.name] = append(out[s.name], m)
			if fresh {
				if err := s.close(ss[0]); err != nil {
					b.Fatalf("%s: close: %v", s.name, err)
				}
			}
		}
	}
	return out
}

// clientSide is a sidecar run through this package.
type clientSide struct {
	c   *client.Client
	cwd string
}

func newClientSide(b *testing.B) *clientSide {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Start(ctx, client.Options{Binary: sidecarBin, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	return &clientSide{c: c, cwd: b.TempDir()}
}

func (cs *clientSide) open(key, modes string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cs.c.Open(ctx, client.OpenParams{SessionKey: key, Agent: "generic", Cwd: cs.cwd,
		Command:        client.Command{Path: faultagentBin, Args: []string{"--mode", modes}},
		PermissionMode: "approve-reads", NonInteractivePermissions: "deny"})
}

func (cs *clientSide) closeSession(s any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.(*client.Session).Close(ctx, client.CloseParams{})
	return err
}

// turn runs one turn on every session at once (Prompt with a per-update
// callback, or PromptBatches) and checks each one's update count.
func (cs *clientSide) turn(sessions []any, round, perTurn int, batches bool) error {
	ctx := context.Background()
	errs := make(chan error, len(sessions))
	var wg sync.WaitGroup
	for _, x := range sessions {
		s := x.(*client.Session)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			p := client.PromptParams{RequestID: "t" + strconv.Itoa(round), Prompt: "go"}
			var err error
			if batches {
				_, err = s.PromptBatches(ctx, p, func(ups []client.Update) { n += len(ups) })
			} else {
				_, err = s.Prompt(ctx, p, func(client.Update) { n++ })
			}
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

// rawSide is a sidecar driven by the bare reader.
type rawSide struct {
	s   *rawSidecar
	cwd string
}

func newRawSide(b *testing.B) *rawSide {
	b.Helper()
	return &rawSide{s: startRaw(b), cwd: b.TempDir()}
}

func (rs *rawSide) open(key, modes string) (any, error) { return rs.s.open(key, rs.cwd, modes) }

func (rs *rawSide) closeSession(s any) error {
	_, err := rs.s.call("session/close", map[string]any{"session": s})
	return err
}

// turn sends every session's prompt, then reads until all are answered.
func (rs *rawSide) turn(sessions []any, round, perTurn int) error {
	ids := make([]int, 0, len(sessions))
	for _, s := range sessions {
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
	if want := perTurn * len(sessions); n != want {
		return fmt.Errorf("%d updates, want %d", n, want)
	}
	return nil
}
