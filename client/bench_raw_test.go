package client_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// This file holds what the floor benchmarks (bench_floor_test.go,
// bench_open_test.go) share: the bare reader, a host that drives the
// sidecar by hand (bufio + json.Unmarshal of each line's envelope, the
// cheapest a Go host can read the stream and still know what each frame
// is), and the statistics.

// envelope is what the bare reader decodes of every line: a JSON-RPC
// message's members, params and result left raw.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// rawSidecar is a sidecar driven by hand over ndjson (the default
// framing, docs/protocol.md §3).
type rawSidecar struct {
	cmd    *exec.Cmd
	w      io.WriteCloser
	sc     *bufio.Scanner
	nextID int
	// onNote, if set, sees every notification but session/update that
	// await reads past.
	onNote func(envelope)
}

// startRaw runs the sidecar with a state dir of b's and runs initialize.
func startRaw(b *testing.B) *rawSidecar {
	b.Helper()
	return startRawArgs(b)
}

// startRawArgs is startRaw with extra sidecar flags.
func startRawArgs(b *testing.B, args ...string) *rawSidecar {
	b.Helper()
	cmd := exec.Command(sidecarBin, append([]string{"--state-dir", b.TempDir()}, args...)...)
	w, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	s := &rawSidecar{cmd: cmd, w: w, sc: sc}
	b.Cleanup(s.close)
	if _, err := s.call("initialize", map[string]any{"protocolVersion": 1, "clientInfo": map[string]string{"name": "bench", "version": "0"}}); err != nil {
		b.Fatal(err)
	}
	return s
}

// close ends stdin (shutdown + exit, docs/protocol.md §4) and reaps.
func (s *rawSidecar) close() {
	_ = s.w.Close()
	for s.sc.Scan() {
	}
	_ = s.cmd.Wait()
}

// send writes one request and returns its id.
func (s *rawSidecar) send(method string, params any) (int, error) {
	s.nextID++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
	if err != nil {
		return 0, err
	}
	_, err = s.w.Write(append(line, '\n'))
	return s.nextID, err
}

// await reads until every id in ids is answered; it returns the results by
// id and how many session/update notifications came meanwhile. An error
// answer is an error.
func (s *rawSidecar) await(ids ...int) (map[int]json.RawMessage, int, error) {
	want := make(map[string]int, len(ids))
	for _, id := range ids {
		want[strconv.Itoa(id)] = id
	}
	res := make(map[int]json.RawMessage, len(ids))
	updates := 0
	for len(want) > 0 && s.sc.Scan() {
		var m envelope
		if err := json.Unmarshal(s.sc.Bytes(), &m); err != nil {
			return nil, updates, fmt.Errorf("bad line %q: %v", s.sc.Bytes(), err)
		}
		if m.Method == "session/update" {
			updates++
			continue
		}
		if m.Method != "" {
			if s.onNote != nil {
				s.onNote(m)
			}
			continue
		}
		id, ok := want[string(m.ID)]
		if !ok {
			continue
		}
		if m.Error != nil {
			return nil, updates, fmt.Errorf("request %d: %s", id, m.Error)
		}
		delete(want, string(m.ID))
		res[id] = m.Result
	}
	if len(want) > 0 {
		return nil, updates, fmt.Errorf("the sidecar's stdout ended: %v", s.sc.Err())
	}
	return res, updates, nil
}

// call sends one request and waits for its result.
func (s *rawSidecar) call(method string, params any) (json.RawMessage, error) {
	id, err := s.send(method, params)
	if err != nil {
		return nil, err
	}
	res, _, err := s.await(id)
	return res[id], err
}

// openRaw opens a fault-agent session with modes and returns its id.
func (s *rawSidecar) open(key, cwd, modes string) (string, error) {
	raw, err := s.call("session/open", floodOpenParams(key, cwd, modes))
	if err != nil {
		return "", err
	}
	var r struct {
		Session string `json:"session"`
	}
	err = json.Unmarshal(raw, &r)
	return r.Session, err
}

// floodOpenParams are session/open params for the fault agent.
func floodOpenParams(key, cwd, modes string) map[string]any {
	return map[string]any{"sessionKey": key, "agent": "generic", "cwd": cwd,
		"command":        map[string]any{"path": faultagentBin, "args": []string{"--mode", modes}},
		"permissionMode": "approve-reads", "nonInteractivePermissions": "deny"}
}

// cpuNow is this process's CPU time so far (user + system, every thread).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sample is one timed run: host CPU and wall time.
type sample struct{ cpu, wall time.Duration }

// measure runs f and returns this process's CPU and the wall time it took.
func measure(f func() error) (sample, error) {
	c0, t0 := cpuNow(), time.Now()
	err := f()
	return sample{cpu: cpuNow() - c0, wall: time.Since(t0)}, err
}

// median of ds (ds is sorted in place).
func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// percentile p (0–100) of ds, nearest rank (ds is sorted in place).
func percentile(ds []time.Duration, p float64) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(float64(len(ds))*p/100+0.5) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// medians are the medians of samples' CPU and wall times.
func medians(ss []sample) sample {
	var cpu, wall []time.Duration
	for _, s := range ss {
		cpu = append(cpu, s.cpu)
		wall = append(wall, s.wall)
	}
	return sample{cpu: median(cpu), wall: median(wall)}
}

// envInt is the integer in env name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// loadAvg is /proc/loadavg's first three fields, for the report.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "?"
	}
	var a, c, d string
	_, _ = fmt.Sscan(string(b), &a, &c, &d)
	return a + " " + c + " " + d
}

// waitNote reads until a notification (not session/update) that ok
// accepts; the replies it reads past are dropped.
func (s *rawSidecar) waitNote(ok func(envelope) bool) error {
	for s.sc.Scan() {
		var m envelope
		if json.Unmarshal(s.sc.Bytes(), &m) == nil && m.Method != "" && ok(m) {
			return nil
		}
	}
	return fmt.Errorf("the sidecar's stdout ended: %v", s.sc.Err())
}
