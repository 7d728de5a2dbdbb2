//go:build linux

package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpx-sidecar/acpx-sidecar/internal/procfs"
)

// TestMain runs the fallback init when the test binary is re-executed as
// one (InitCommand's fallback).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == InitArg {
		os.Exit(InitMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// requireRoot skips where a tree cannot get its own namespaces.
func requireRoot(t *testing.T) Caps {
	t.Helper()
	c := Probe()
	if !c.PIDNamespace || !c.Filesystem() || !c.Seccomp {
		t.Skipf("needs root, Landlock ABI %d+ and a procfs with pidns: %+v", FSMinABI, c)
	}
	return c
}

// tree is one launched test tree.
type tree struct {
	st          Started
	conn        *InitConn
	outR        *os.File
	initErr     error
	agentStatus syscall.WaitStatus
	agentGone   chan struct{}
	served      chan struct{}
	mu          sync.Mutex
	announced   []procfs.Child // what the init announced, as /proc showed it then
}

// launch starts script under /bin/sh inside plan (init from InitCommand
// with fallback forced when useFallback), in dir.
func launch(t *testing.T, plan *Plan, dir, script string, useFallback bool) *tree {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	conn, err := NewInitConn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseChild()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outW.Close()
	tr := &tree{conn: conn, outR: outR, agentGone: make(chan struct{}), served: make(chan struct{})}
	env := []string{"PATH=/usr/bin:/bin", "SECRET_OF_THE_TREE=s3cr3t"}
	st, err := Start(plan, Forks{
		Init: func() (int, error) {
			path, argv, _ := InitCommand("/proc/self/exe")
			if useFallback {
				path, argv = "/proc/self/exe", []string{InitName, InitArg}
			}
			return syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: "/", Env: env,
				Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), conn.ChildFD()}, Sys: &syscall.SysProcAttr{Setpgid: true}})
		},
		Agent: func(int) (int, error) {
			return syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{Dir: dir, Env: env,
				Files: []uintptr{null.Fd(), outW.Fd(), outW.Fd()}, Sys: &syscall.SysProcAttr{Setpgid: true}})
		},
	})
	tr.st = st
	if err != nil {
		tr.initErr = err
		if st.InitPid > 0 {
			_ = unix.Kill(st.InitPid, unix.SIGKILL)
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(st.InitPid, &ws, 0, nil)
		}
		conn.Close()
		outR.Close()
		return tr
	}
	t.Cleanup(func() { _ = unix.Kill(st.InitPid, unix.SIGKILL); _ = unix.Kill(st.AgentPid, unix.SIGKILL) })
	go func() {
		defer close(tr.served)
		conn.Serve(func() {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			for _, c := range procfs.Children(st.InitPid) {
				if c.Exited {
					tr.announced = append(tr.announced, c)
				}
			}
		}, tr.agentGone)
	}()
	return tr
}

// finish waits for the agent, closes the init's control pipe as the
// reaper does, and waits (bounded) for the init to exit 0. It returns
// the agent's output.
func (tr *tree) finish(t *testing.T) string {
	t.Helper()
	out := make(chan []byte, 1)
	go func() {
		b, _ := readAll(tr.outR)
		out <- b
	}()
	if _, err := syscall.Wait4(tr.st.AgentPid, &tr.agentStatus, 0, nil); err != nil {
		t.Fatal(err)
	}
	close(tr.agentGone)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(tr.st.InitPid, &ws, syscall.WNOHANG, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pid == tr.st.InitPid {
			if !ws.Exited() || ws.ExitStatus() != 0 {
				t.Errorf("init ended %v, want exit 0", ws)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the init did not exit within 10 s of the agent's end")
		}
		time.Sleep(5 * time.Millisecond) // polling our own child's exit, bounded above
	}
	tr.conn.Close()
	<-tr.served
	select {
	case b := <-out:
		return string(b)
	case <-time.After(10 * time.Second):
		t.Fatal("the tree's stdout never hit EOF")
	}
	return ""
}

func readAll(f *os.File) ([]byte, error) {
	defer f.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.Bytes(), err
}

// ownTreePlan is a workspace plan with every layer, cwd work.
func ownTreePlan(t *testing.T, work string) *Plan {
	t.Helper()
	pol := Policy{Filesystem: Workspace, Network: NetAll, Signals: OwnTree, Processes: OwnTreeProcesses, Capabilities: CapsNone}
	plan, _, err := Build(pol, Paths{Cwd: work}, BuildOptions{BindReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.NewPIDNS || !plan.DropCaps || !plan.Seccomp || !plan.DenyUserNS {
		t.Fatalf("plan %+v lacks a layer", plan)
	}
	return &plan
}

// TestStart_TreeSeesOnlyItselfHoldsNothingAndItsInitLeavesWithIt: a tree
// started with every layer sees only its own processes in /proc (the
// init as pid 1, itself as 2), cannot read the init's environ, holds no
// capability in any set with securebits locked, cannot make a user
// namespace (unshare -U and clone), cannot mount; an orphan it leaves
// (exiting 7) is announced by the init and seen with its status before
// the init reaps it, and the init exits once the agent is gone and the
// orphan too — with the memfd init and with the fallback.
func TestStart_TreeSeesOnlyItselfHoldsNothingAndItsInitLeavesWithIt(t *testing.T) {
	requireRoot(t)
	for _, fallback := range []bool{false, true} {
		t.Run("fallback="+strconv.FormatBool(fallback), func(t *testing.T) {
			work := t.TempDir()
			script := `ls /proc | grep -E '^[0-9]+$' | tr '\n' ' '; echo
echo self=$$
grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status
cat /proc/1/environ >/dev/null 2>&1 && echo environ1=read || echo environ1=denied
unshare -U true 2>/dev/null && echo userns=made || echo userns=refused
mkdir -p x; mount -t tmpfs none x 2>/dev/null && echo mount=done || echo mount=refused
(setsid sh -c 'sleep 0.4; exit 7' &)
`
			tr := launch(t, ownTreePlan(t, work), work, script, fallback)
			if tr.initErr != nil {
				t.Fatal(tr.initErr)
			}
			start := time.Now()
			out := tr.finish(t)
			if time.Since(start) < 300*time.Millisecond {
				t.Errorf("the init left before the orphan (sleep 0.4) ended: %v", time.Since(start))
			}
			t.Logf("tree output:\n%s", out)
			lines := strings.Split(out, "\n")
			pids := strings.Fields(lines[0])
			// The agent is the namespace's second process: pid 2 with the
			// single-threaded memfd init; the fallback's Go runtime
			// threads take pids there first.
			self := "2"
			if fallback {
				self = strings.TrimPrefix(lines[1], "self=")
			}
			if len(pids) < 2 || pids[0] != "1" || !slices.Contains(pids, self) {
				t.Errorf("/proc lists %v, want the init (1), the agent (%s) and its own pipeline only", pids, self)
			}
			for _, p := range pids {
				if n, _ := strconv.Atoi(p); n > 10 {
					t.Errorf("/proc lists pid %s: a process outside the tree?", p)
				}
			}
			for _, want := range []string{"self=" + self, "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
				"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1",
				"Seccomp:\t2", "environ1=denied", "userns=refused", "mount=refused"} {
				if !strings.Contains(out, want) {
					t.Errorf("tree output lacks %q", want)
				}
			}
			if !tr.agentStatus.Exited() || tr.agentStatus.ExitStatus() != 0 {
				t.Errorf("agent %v", tr.agentStatus)
			}
			seven := false
			for _, c := range tr.announced {
				seven = seven || c.Status.Exited() && c.Status.ExitStatus() == 7
			}
			if !seven {
				t.Errorf("announced exits %+v: the orphan's exit 7 is not among them", tr.announced)
			}
		})
	}
}

// TestStart_RulePathSwappedForALinkFailsTheLaunch: a writable rule path
// replaced by a link to another directory after Build makes Start fail
// with ErrRuleMoved, the agent never forked; so does one replaced by
// another directory of the same name.
func TestStart_RulePathSwappedForALinkFailsTheLaunch(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	work, target := filepath.Join(base, "work"), filepath.Join(base, "target")
	for _, d := range []string{work, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plan := ownTreePlan(t, work)
	if err := os.Rename(work, work+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, work); err != nil {
		t.Fatal(err)
	}
	tr := launch(t, plan, "/", "touch "+filepath.Join(work, "planted"), false)
	if !errors.Is(tr.initErr, ErrRuleMoved) || tr.st.AgentPid != 0 {
		t.Fatalf("link swap: %v (agent %d), want ErrRuleMoved and no agent", tr.initErr, tr.st.AgentPid)
	}
	if _, err := os.Stat(filepath.Join(target, "planted")); err == nil {
		t.Fatal("the link's target was written")
	}
	os.Remove(work)
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	tr = launch(t, plan, "/", "true", false)
	if !errors.Is(tr.initErr, ErrRuleMoved) {
		t.Fatalf("another directory of the same name: %v, want ErrRuleMoved", tr.initErr)
	}
}

// TestInitELF_IsAStaticExecutableOfTheInitCode checks the image header
// and that the code ends at the marker's ud2.
func TestInitELF_IsAStaticExecutableOfTheInitCode(t *testing.T) {
	code := nsinitCode()
	if code == nil {
		t.Skip("no init program on this architecture (the fallback runs)")
	}
	if len(code) < 64 || !bytes.HasSuffix(code, []byte{0x0f, 0x0b}) {
		t.Fatalf("code of %d bytes, want it to end at ud2", len(code))
	}
	img := initELF(code)
	if !bytes.HasPrefix(img, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1}) || binary.LittleEndian.Uint16(img[18:]) != elfMachine {
		t.Fatalf("header % x", img[:20])
	}
	if entry := binary.LittleEndian.Uint64(img[24:]); entry != 0x400000+64+2*56 {
		t.Errorf("entry %#x", entry)
	}
	if !bytes.Equal(img[64+2*56:], code) {
		t.Errorf("the code is not right after the headers")
	}
}
