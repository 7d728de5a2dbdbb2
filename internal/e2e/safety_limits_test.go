package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireLimits skips t where doctor says limits are not enforceable,
// except where they must be: with ACPX_REQUIRE_LIMITS=1 or in CI (CI
// set, as GitHub Actions and most CI systems set it) the test fails
// instead, so a CI runner that lost its cgroup controllers cannot turn
// the OOM and fork-bomb tests into silent skips (docs/protocol.md §18.2).
func requireLimits(t *testing.T) {
	t.Helper()
	ok, why := limitsEnforceable(t)
	if ok {
		return
	}
	if os.Getenv("ACPX_REQUIRE_LIMITS") == "1" || os.Getenv("CI") != "" {
		t.Fatalf("limits are not enforceable on this machine (%s), and ACPX_REQUIRE_LIMITS=1 or CI says they must be", why)
	}
	t.Skip("limits are not enforceable on this machine: " + why)
}

// limitsEnforceable asks the built binary's doctor whether this machine
// can enforce every kind of limit (docs/protocol.md §18.2), and why not.
func limitsEnforceable(t *testing.T) (bool, string) {
	t.Helper()
	out, _ := runTracked(exec.Command(sidecarBin, "doctor"))
	var d struct {
		Containment string `json:"containment"`
		Limits      map[string]struct {
			Enforceable bool   `json:"enforceable"`
			Reason      string `json:"reason"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("doctor output %q: %v", out, err)
	}
	for _, k := range []string{"memoryBytes", "pids", "cpuPercent"} {
		if l, ok := d.Limits[k]; !ok || !l.Enforceable {
			return false, k + ": " + l.Reason
		}
	}
	return true, ""
}

// TestLimits_RefusedWhereTheContainmentCannotEnforceThem
// (docs/protocol.md §18.2): limits in a mode without a cgroup, or where
// neither the cgroup2 hierarchy nor a cgroup v1 hierarchy has the
// controllers (not this machine: a hybrid host, memory/pids/cpu in cgroup
// v1), are PLATFORM_UNSUPPORTED and nothing is launched (the fault agent's record file is never created); the same
// sidecar then opens without limits. Unenforceable --default-* flags are
// a flag error (exit status 2).
func TestLimits_RefusedWhereTheContainmentCannotEnforceThem(t *testing.T) {
	ok, why := limitsEnforceable(t)
	modes := [][]string{{"--containment", "subreaper"}, {"--containment", "process-table"}}
	if !ok {
		modes = append(modes, []string{"--containment", "cgroup"})
	}
	for _, mode := range modes {
		t.Run(mode[1], func(t *testing.T) {
			e := newFaultEnv(t)
			s := startSidecar(t, append(seedArgs(e), mode...)...)
			s.initialize(false)
			rec := seedRecordFile(t)
			p := withHostHome(e.openParams("lim-"+mode[1], "record="+rec))
			p["limits"] = map[string]any{"memoryBytes": 64 << 20, "pids": 32}
			f := s.call("session/open", p)
			wantError(t, "open with limits in "+mode[1]+" mode", f, -32000, "PLATFORM_UNSUPPORTED")
			t.Logf("refused: %s", f.Error.Message)
			if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the provider was started (record file: %v)", err)
			}
			if left := markedPids(e.mark, ""); len(left) != 0 {
				t.Errorf("marked processes after the refusal: %v", left)
			}
			delete(p, "limits")
			var o openResult
			s.mustCall("session/open", p, &o)
			seedCloseProof(t, s, o.Session, nil)
		})
	}
	t.Run("default flag under process-table", func(t *testing.T) {
		cmd := exec.Command(sidecarBin, "--containment", "process-table", "--default-pids", "64")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := runTracked(cmd)
		out = append(out, errb.Bytes()...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "default-pids") {
			t.Errorf("--default-pids under process-table: %v, %q; want exit 2 naming the flag", err, out)
		}
	})
	if !ok {
		t.Run("default flag", func(t *testing.T) {
			cmd := exec.Command(sidecarBin, "--containment", "cgroup", "--default-pids", "64")
			var combined bytes.Buffer
			cmd.Stdout, cmd.Stderr = &combined, &combined
			_, err := runTracked(cmd)
			out := combined.Bytes()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "default-pids") {
				t.Errorf("unenforceable --default-pids: %v, %q; want exit 2 naming the flag (%s)", err, out, why)
			}
		})
	}
}

// TestLimits_MemoryHogIsOOMKilledAndOthersGoOn (docs/protocol.md §18.2):
// a provider that allocates past limits.memoryBytes is OOM-killed; the
// turn fails PROVIDER_PROCESS_LOST, session/exited says reason "oom", the
// provider-exit proof is complete and carries PROVIDER_OOM; another
// session of the same sidecar keeps working. Needs the memory controller
// in the cgroup2 hierarchy or a cgroup v1 one (this machine: v1,
// memory.limit_in_bytes, oom_kill of memory.oom_control); requireLimits.
func TestLimits_MemoryHogIsOOMKilledAndOthersGoOn(t *testing.T) {
	requireLimits(t)
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	other := e.open(s, "lim-other", "")
	p := e.openParams("lim-hog", "turn-hog=512")
	p["limits"] = map[string]any{"memoryBytes": 64 << 20}
	var hog openResult
	s.mustCall("session/open", p, &hog)
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": hog.Session, "requestId": "t1", "prompt": "eat"}, &res)
	if res.Status != "failed" || res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		t.Errorf("hog turn %+v, want failed PROVIDER_PROCESS_LOST", res)
	}
	raw := s.waitNote("session/exited", 30*time.Second, func(p json.RawMessage) bool {
		return strings.Contains(string(p), hog.Session)
	})
	var ex struct {
		Reason string `json:"reason"`
		Signal string `json:"signal"`
	}
	_ = json.Unmarshal(raw, &ex)
	if ex.Reason != "oom" || ex.Signal != "SIGKILL" {
		t.Errorf("session/exited %s, want reason oom, signal SIGKILL", raw)
	}
	t.Logf("session/exited %s", raw)
	pr := seedWaitProof(s, func(p seedProof) bool { return p.Session == hog.Session })
	if !pr.Complete || !strings.Contains(strings.Join(pr.errorCodes(), ","), "PROVIDER_OOM") {
		t.Errorf("provider-exit proof %+v, want complete with PROVIDER_OOM", pr)
	}
	var res2 turnResult
	s.mustCall("session/prompt", map[string]any{"session": other.Session, "requestId": "t1", "prompt": "hi"}, &res2)
	if res2.Status != "completed" {
		t.Errorf("the other session's turn %+v, want completed", res2)
	}
	seedCloseProof(t, s, other.Session, nil)
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
	waitNoMarked(t, e.mark, "", 10*time.Second)
}

// TestLimits_ForkBombStaysUnderPidsAndIsCleanedUp (docs/protocol.md
// §18.2): a provider that forks without end under limits.pids never has
// more tasks than pids.max (status resources while it runs; the proof's
// process count), pids.events counts the refused forks, and the close
// proof is complete with no process of the tree left. Needs the pids
// controller in the cgroup2 hierarchy or a cgroup v1 one (this machine:
// v1); requireLimits.
func TestLimits_ForkBombStaysUnderPidsAndIsCleanedUp(t *testing.T) {
	requireLimits(t)
	const max = 48
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	p := e.openParams("lim-bomb", "turn-forkbomb=1000")
	p["limits"] = map[string]any{"pids": max}
	var o openResult
	s.mustCall("session/open", p, &o)
	var res turnResult
	s.mustCall("session/prompt", map[string]any{"session": o.Session, "requestId": "t1", "prompt": "fork"}, &res)
	if res.Status == "completed" {
		var st struct {
			Resources *struct {
				PidsCurrent   *int64 `json:"pidsCurrent"`
				PidsMax       *int64 `json:"pidsMax"`
				PidsLimitHits int64  `json:"pidsLimitHits"`
			} `json:"resources"`
		}
		s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
		r := st.Resources
		if r != nil && r.PidsCurrent != nil && r.PidsMax != nil {
			t.Logf("status resources: pidsCurrent %d, pidsMax %d, pidsLimitHits %d", *r.PidsCurrent, *r.PidsMax, r.PidsLimitHits)
		}
		if r == nil || r.PidsMax == nil || *r.PidsMax != max || r.PidsCurrent == nil || *r.PidsCurrent > max || r.PidsLimitHits == 0 {
			t.Errorf("status resources %+v, want pidsCurrent <= pidsMax %d and pidsLimitHits > 0", r, max)
		}
	} else if res.Error == nil || res.Error.Code != "PROVIDER_PROCESS_LOST" {
		// The agent's own runtime may die of a refused thread; that is a
		// lost provider, never more processes.
		t.Errorf("fork-bomb turn %+v, want completed or PROVIDER_PROCESS_LOST", res)
	}
	var pr seedProof
	if res.Status == "completed" {
		pr = seedCloseProof(t, s, o.Session, nil)
	} else {
		pr = seedWaitProof(s, func(p seedProof) bool { return p.Session == o.Session })
	}
	t.Logf("turn %s; proof complete=%v with %d processes", res.Status, pr.Complete, len(pr.Processes))
	if !pr.Complete || len(pr.Processes) > max {
		t.Errorf("proof complete=%v with %d processes, want complete with at most %d", pr.Complete, len(pr.Processes), max)
	}
	waitNoMarked(t, e.mark, "", 10*time.Second)
}

// v1OwnDir is this test process's cgroup directory in the cgroup v1
// hierarchy mounted at /sys/fs/cgroup/<controller> (the sidecar it starts
// inherits it); "" when there is none (not a hybrid host).
func v1OwnDir(controller string) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[0] != "0" && slices.Contains(strings.Split(parts[1], ","), controller) {
			dir := filepath.Join("/sys/fs/cgroup", controller, parts[2])
			if _, err := os.Stat(dir); err == nil {
				return dir
			}
		}
	}
	return ""
}

// TestLimits_SidecarKilledLeavesNoV1Cgroups (docs/operations.md,
// "Per-session limits"): on a hybrid host a limited provider is a member
// of its cgroup v1 limit cgroups under "acpx-sidecar-<pid>"; the sidecar
// is SIGKILLed, its watchdog kills the tree (nothing marked stays alive),
// and the next sidecar on the same state directory recovers the ledger
// entry and removes the dead sidecar's v1 directories. Runs only where
// the pids and memory limits are enforced in cgroup v1.
func TestLimits_SidecarKilledLeavesNoV1Cgroups(t *testing.T) {
	requireLimits(t)
	var parents []string
	for _, c := range []string{"memory", "pids"} {
		if d := v1OwnDir(c); d != "" {
			parents = append(parents, d)
		}
	}
	if len(parents) != 2 {
		t.Skip("memory and pids are not cgroup v1 hierarchies here")
	}
	startOrphanReaper(t)
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	trackChild(s.cmd.Process.Pid)
	s.initialize(false)
	p := e.openParams("lim-killed", "")
	p["limits"] = map[string]any{"memoryBytes": 256 << 20, "pids": 64}
	var o openResult
	s.mustCall("session/open", p, &o)
	pids := slices.DeleteFunc(markedPids(e.mark, ""), isHelper)
	if len(pids) != 1 {
		t.Fatalf("marked processes %v (the tree's init aside), want the provider alone", pids)
	}
	var dirs []string
	for i := range parents {
		parents[i] = filepath.Join(parents[i], "acpx-sidecar-"+strconv.Itoa(s.cmd.Process.Pid))
		procs, _ := filepath.Glob(filepath.Join(parents[i], "*", "cgroup.procs"))
		if len(procs) != 1 {
			t.Fatalf("v1 provider cgroups under %s: %v, want one", parents[i], procs)
		}
		b, _ := os.ReadFile(procs[0])
		if strings.TrimSpace(string(b)) != strconv.Itoa(pids[0]) {
			t.Errorf("%s = %q, want the provider %d", procs[0], b, pids[0])
		}
		dirs = append(dirs, filepath.Dir(procs[0]))
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	waitNoMarked(t, e.mark, "", 10*time.Second)

	s2 := startSidecar(t, seedArgs(e)...)
	trackChild(s2.cmd.Process.Pid)
	s2.initialize(false)
	s2.waitNote("cleanup/proof", 10*time.Second, func(p json.RawMessage) bool {
		var rp recoveredProof
		return json.Unmarshal(p, &rp) == nil && rp.Proof.SessionKey == "lim-killed" && rp.Proof.Origin == "recovered"
	})
	for _, d := range append(dirs, parents...) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup v1 directory %s of the killed sidecar is still there (%v)", d, err)
		}
	}
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}
