//go:build linux

package launchexec

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
)

// TestMain hands a launch-entry re-execution of this test binary over
// to Main, as cmd/acpx-sidecar's main does.
func TestMain(m *testing.M) {
	if MaybeRun(nil) {
		return
	}
	os.Exit(m.Run())
}

// TestMaybeRun_DispatchesOnlyItsEntries: argv[1] == Arg runs the launch
// entry, an argv[1] named in entries runs that entry (with argv[2:]) and
// exits with its status; anything else returns false having run nothing.
func TestMaybeRun_DispatchesOnlyItsEntries(t *testing.T) {
	never := func(args []string) func([]string) int {
		return func([]string) int { t.Fatalf("%q: an entry ran", args); return 0 }
	}
	for _, args := range [][]string{nil, {"acpx-sidecar"}, {"acpx-sidecar", "doctor"},
		{"acpx-sidecar", "--framing", Arg}, {"acpx-sidecar", "-" + Arg}, {"acpx-sidecar", "__guardianx"}} {
		entries := map[string]Entry{"__guardian": never(args)}
		if maybeRun(args, entries, never(args), func(int) { t.Fatalf("%q: exit called", args) }) {
			t.Errorf("%q: handled", args)
		}
	}
	var gotArgs []string
	gotCode := -1
	entries := map[string]Entry{"__guardian": func(a []string) int { gotArgs = a; return 7 }}
	if !maybeRun([]string{"/x/acpx-sidecar", "__guardian", "a", "b"}, entries, nil, func(c int) { gotCode = c }) {
		t.Fatal("entry argv not handled")
	}
	if !reflect.DeepEqual(gotArgs, []string{"a", "b"}) || gotCode != 7 {
		t.Fatalf("entry got %q, exit got %d; want [a b] and 7", gotArgs, gotCode)
	}
	gotArgs = nil
	launch := func(a []string) int { gotArgs = a; return 3 }
	if !maybeRun([]string{"/x/acpx-sidecar", Arg, "status=3"}, entries, launch, func(c int) { gotCode = c }) ||
		!reflect.DeepEqual(gotArgs, []string{"status=3"}) || gotCode != 3 {
		t.Fatalf("launch entry: got %q, exit %d", gotArgs, gotCode)
	}
}

// runEntry runs this binary's launch entry with args (after Arg), the
// status pipe as fd 3, and returns the status message, the exit status
// and the stdout.
func runEntry(t *testing.T, dir string, args ...string) (msg string, code int, out string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], append([]string{Arg, "status=3"}, args...)...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Dir = dir
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	n, _ := r.Read(b)
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(b[:n]), code, stdout.String()
}

// TestLaunch_JoinFailureExitsDistinctly: the entry that cannot join a
// cgroup reports "join <errno> <path>" on its status pipe and exits
// Failed without running the program.
func TestLaunch_JoinFailureExitsDistinctly(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	msg, code, _ := runEntry(t, "/", "/nonexistent/cgroup.procs", "--", "/bin/touch", "touch", marker)
	if code != Failed {
		t.Errorf("exit %d, want %d", code, Failed)
	}
	if want := "join " + strconv.Itoa(int(syscall.ENOENT)) + " /nonexistent/cgroup.procs"; msg != want {
		t.Errorf("status message %q, want %q", msg, want)
	}
	if perr := ParseStatus(msg, "/bin/touch"); !errors.Is(perr, syscall.ENOENT) || !strings.Contains(perr.Error(), "cgroup v1") {
		t.Errorf("the launcher's error %v", perr)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran (%v)", err)
	}
}

// TestLaunch_LandlockHandedOverHoldsForTheProgramAndItsChildren: a
// workspace ruleset built by sandbox.Start and handed to the entry
// (EntryLandlock) lets /bin/sh (and what it starts) write its cwd and
// nothing else; the status pipe saw only EOF.
func TestLaunch_LandlockHandedOverHoldsForTheProgramAndItsChildren(t *testing.T) {
	if c := sandbox.Probe(); !c.Filesystem() || !c.Namespaces {
		t.Skipf("needs Landlock ABI %d and root: %+v", sandbox.FSMinABI, c)
	}
	work, outside := t.TempDir(), t.TempDir()
	pol := sandbox.Policy{Filesystem: sandbox.Workspace, Network: sandbox.NetAll, Signals: sandbox.OwnTree,
		Processes: sandbox.AllProcesses, Capabilities: sandbox.CapsNone}
	plan, _, err := sandbox.Build(pol, sandbox.Paths{Cwd: work}, sandbox.BuildOptions{BindReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	status, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer status.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	script := `echo in > in.txt && echo ok-in; (echo out > ` + outside + `/out.txt) 2>/dev/null || echo denied-out; sh -c 'echo x > ` + outside + `/child.txt' 2>/dev/null || echo denied-child`
	st, err := sandbox.Start(&plan, sandbox.Forks{EntryLandlock: true, Agent: func(ruleset int) (int, error) {
		argv := Argv(os.Args[0], 3, -1, 4, nil, "/bin/sh", []string{"sh", "-c", script})
		return syscall.ForkExec(os.Args[0], argv, &syscall.ProcAttr{Dir: work, Env: os.Environ(),
			Files: []uintptr{0, outW.Fd(), 2, statusW.Fd(), uintptr(ruleset)}})
	}})
	statusW.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := ReadStatus(status, "/bin/sh"); err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(st.AgentPid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("wait: %v %v", err, ws)
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(outR)
	if out.String() != "ok-in\ndenied-out\ndenied-child\n" {
		t.Errorf("output %q", out.String())
	}
	if _, err := os.Stat(filepath.Join(work, "in.txt")); err != nil {
		t.Errorf("cwd write: %v", err)
	}
	for _, f := range []string{"out.txt", "child.txt"} {
		if _, err := os.Stat(filepath.Join(outside, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s written outside the sandbox (%v)", f, err)
		}
	}
}

// TestLaunch_BadRulesetIsRefusedBeforeTheProgram: a ruleset descriptor
// that is none is a sandbox failure; the program never runs.
func TestLaunch_BadRulesetIsRefusedBeforeTheProgram(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	msg, code, _ := runEntry(t, "/", "landlock=99", "--", "/bin/touch", "touch", marker)
	if code != Failed || !strings.HasPrefix(msg, StageSandbox+" ") {
		t.Errorf("status %q exit %d", msg, code)
	}
	if perr := ParseStatus(msg, "/bin/touch"); !errors.Is(perr, ErrSandbox) {
		t.Errorf("the launcher's error %v", perr)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran (%v)", err)
	}
}
