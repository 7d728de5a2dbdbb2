package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/journal"
)

// cgroup2Mount finds the writable cgroup2 mount (this machine:
// /sys/fs/cgroup/unified), or fails the test.
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if pf, qf := strings.Fields(pre), strings.Fields(post); ok && len(pf) >= 5 && len(qf) > 0 && qf[0] == "cgroup2" {
			if syscall.Access(pf[4], 2) == nil {
				return pf[4]
			}
		}
	}
	t.Fatal("no writable cgroup2 mount")
	return ""
}

// startBait starts `sleep 300` as a stranger no sidecar launched, with
// the extra environment entries given, and arranges its end.
func startBait(t *testing.T, attr *syscall.SysProcAttr, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "300")
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	trackChild(cmd.Process.Pid)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	return cmd
}

// startTicks is field 22 of /proc/<pid>/stat.
func startTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// TestAttack_ForgedLedgerAndPlantedLinksHurtNobody: an agent (mode plant)
// writes a ledger entry naming a dead owner and four strangers — the
// entry's pid (start time matching), a process group, a process in an
// unrelated cgroup, an environment entry as "marker" — and plants the
// record lock of key "victim" and the journal of key "future" as symlinks
// to files outside the state dir (issue 18). The next sidecar on that
// state dir kills none of the four, leaves their cgroup alone, sends no
// proof for the planted key and drops the entry; the open of "victim" is
// refused STORE_UNAVAILABLE with nothing created outside; "future" runs
// without its journal, whose target is never written, and session/events
// refuses it (docs/protocol.md §20).
func TestAttack_ForgedLedgerAndPlantedLinksHurtNobody(t *testing.T) {
	startOrphanReaper(t)
	e := newFaultEnv(t)
	outside := t.TempDir()
	mount := cgroup2Mount(t)
	baitCg := filepath.Join(mount, "acpx-e2e-bait-"+randHex(4))
	if err := os.Mkdir(baitCg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); os.Remove(baitCg) != nil && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // the killed bait leaves its cgroup asynchronously
		}
	})
	envMark := "ACPX_E2E_BAIT=" + randHex(8)
	baitPid := startBait(t, nil)
	baitGroup := startBait(t, &syscall.SysProcAttr{Setpgid: true})
	baitInCg := startBait(t, nil)
	if err := os.WriteFile(filepath.Join(baitCg, "cgroup.procs"), []byte(strconv.Itoa(baitInCg.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	baitEnv := startBait(t, nil, envMark)
	baits := []*exec.Cmd{baitPid, baitGroup, baitInCg, baitEnv}

	deadOwner := 4194000
	for ; deadOwner > 1000 && alive(deadOwner); deadOwner-- {
	}
	forged := "s-" + randHex(8)
	entry, _ := json.Marshal(map[string]any{"id": forged, "sidecarPid": deadOwner, "session": forged, "sessionKey": "victim",
		"pid": baitPid.Process.Pid, "startTime": startTicks(t, baitPid.Process.Pid), "pgid": baitGroup.Process.Pid,
		"cgroup": baitCg, "marker": envMark, "markerSha256": sha256Hex("ACPX_SIDECAR_SESSION=" + forged + ".guess"),
		"containment": "cgroup", "createdAt": "2026-12-01T00:00:00Z"})
	journalTarget := filepath.Join(outside, "journal-target")
	if err := os.WriteFile(journalTarget, []byte("untouched\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(e.stateDir, "sessions")
	spec := filepath.Join(t.TempDir(), "plant.json")
	writeJSON(t, spec, map[string]any{
		"files": []map[string]string{{"path": filepath.Join(e.stateDir, "owned", forged+".json"), "data": string(entry)}},
		"links": []map[string]string{
			{"path": filepath.Join(sessions, ".victim.lock"), "target": filepath.Join(outside, "victim.lock")},
			{"path": journal.SegmentPath(sessions, journal.Stem("future"), 0), "target": journalTarget},
		}})

	s1 := startSidecar(t, "--state-dir", e.stateDir)
	s1.initialize(false)
	planter := openAttacker(s1, e, "planter", "plant="+spec)
	runTurn(t, s1, planter.Session, "p1", "go")
	if chunks := agentChunks(s1, planter.Session, "p1"); !contains(chunks, "plant: ok") {
		t.Fatalf("the agent did not plant: %q", chunks)
	}
	closeClean(t, s1, planter.Session, e.mark, e.work)
	_, _ = s1.shutdownAndExit()

	s2 := startSidecar(t, "--state-dir", e.stateDir)
	s2.initialize(false)
	pollUntil(t, 20*time.Second, "the forged ledger entry dropped", func() bool {
		_, err := os.Stat(filepath.Join(e.stateDir, "owned", forged+".json"))
		return errors.Is(err, os.ErrNotExist)
	})
	for i, b := range baits {
		if !alive(b.Process.Pid) {
			t.Errorf("bait %d (pid %d) was killed", i, b.Process.Pid)
		}
	}
	if procs, _ := os.ReadFile(filepath.Join(baitCg, "cgroup.procs")); !bytes.Contains(procs, []byte(strconv.Itoa(baitInCg.Process.Pid))) {
		t.Errorf("the unrelated cgroup lost its process: %q", procs)
	}
	f := s2.call("session/open", attackerParams(e, "victim", "normal"))
	wantError(t, "open of a key whose record lock is a planted link", f, -32000, "STORE_UNAVAILABLE")
	if _, err := os.Lstat(filepath.Join(outside, "victim.lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was created outside the state dir through the planted lock link: %v", err)
	}
	fut := openAttacker(s2, e, "future", "normal")
	runTurn(t, s2, fut.Session, "f1", "go")
	closeClean(t, s2, fut.Session, e.mark, e.work)
	ev := s2.call("session/events", map[string]any{"sessionKey": "future", "stateDir": e.stateDir})
	wantError(t, "session/events through a planted journal link", ev, -32000, "STORE_UNAVAILABLE")
	if b, _ := os.ReadFile(journalTarget); string(b) != "untouched\n" {
		t.Errorf("the journal link's target outside the state dir was written: %q", b)
	}
	_, _ = s2.shutdownAndExit()
	for _, n := range s2.notesOf("cleanup/proof") {
		if strings.Contains(string(n.Params), `"sessionKey":"victim"`) {
			t.Errorf("a proof was sent for the planted key: %s", n.Params)
		}
	}
}

// TestAttack_AgentThatEscapesTheLedgerIsSwept: an agent deletes its own
// ledger entry, starts a child that ignores SIGTERM, then SIGKILLs the
// sidecar's watchdog and the sidecar (issue 18: it then survived the next
// sidecar forever). Its child survives in the dead sidecar's cgroup
// (asserted, or the test proves nothing); the next sidecar — on another
// state dir, so no ledger entry of it exists anywhere it looks — sweeps the
// populated cgroups of dead sidecars: the child is killed and the cgroup
// removed.
func TestAttack_AgentThatEscapesTheLedgerIsSwept(t *testing.T) {
	startOrphanReaper(t)
	e := newFaultEnv(t)
	s1 := startSidecar(t, "--state-dir", e.stateDir, "--containment", "cgroup")
	trackChild(s1.cmd.Process.Pid)
	s1.initialize(false)
	o := openAttacker(s1, e, "escaper", "escape-ledger="+e.stateDir)
	s1.start("session/prompt", map[string]any{"session": o.Session, "requestId": "x1", "prompt": "go"})
	select {
	case <-s1.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not kill the sidecar")
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, "owned", o.Session+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the agent's ledger entry is still there: %v", err)
	}
	survivors := waitMarked(t, e.mark, 10*time.Second)
	var cg string
	for _, pid := range survivors {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		for _, line := range strings.Split(string(b), "\n") {
			if rel, ok := strings.CutPrefix(line, "0::"); ok && strings.Contains(rel, "/acpx-sidecar-"+strconv.Itoa(s1.cmd.Process.Pid)+"/") {
				cg = filepath.Join(cgroup2Mount(t), rel)
			}
		}
	}
	if cg == "" {
		t.Fatalf("no survivor (%v) in the dead sidecar's cgroup: this test would prove nothing", survivors)
	}
	s2 := startSidecar(t, "--state-dir", t.TempDir())
	s2.initialize(false)
	waitNoMarked(t, e.mark, e.work, 30*time.Second)
	pollUntil(t, 30*time.Second, "the dead sidecar's cgroup removed", func() bool {
		_, err := os.Stat(cg)
		return errors.Is(err, os.ErrNotExist)
	})
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Errorf("exit status %d", status)
	}
}

// TestStateDir_WrongShapeIsNotRetryable: a stateDir that is a regular
// file, or whose sessions directory is a symlink, is STORE_UNAVAILABLE
// with retryable false — waiting does not fix it — and the connection
// keeps working; a usable stateDir opens (found by a fresh-user trial).
func TestStateDir_WrongShapeIsNotRetryable(t *testing.T) {
	e := newFaultEnv(t)
	s := startSidecar(t, seedArgs(e)...)
	s.initialize(false)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	linked := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(linked, "sessions")); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"a regular file": file, "a symlinked sessions dir": linked} {
		p := e.openParams("shape", "normal")
		p["stateDir"] = dir
		d := wantError(t, "open with "+name, s.call("session/open", p), -32000, "STORE_UNAVAILABLE")
		if d.Retryable == nil || *d.Retryable {
			t.Errorf("%s: retryable %v, want false", name, d.Retryable)
		}
	}
	var o openResult
	s.mustCall("session/open", e.openParams("shape", "normal"), &o)
	closeProof(s, o.Session, nil)
}
