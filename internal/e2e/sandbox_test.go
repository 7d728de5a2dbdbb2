package e2e

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestSandbox_WorkspaceWallsTheAgentIn: under the default sandbox
// (workspace), in cgroup and subreaper containment, the fault agent (root
// here) writes its cwd, HOME and the private TMPDIR the sidecar made, and
// gets EACCES/EPERM writing anywhere else: outside them, into
// --state-dir, into its own cgroup's cgroup.procs, over its own command;
// a setsid'd descendant gets the same. Nothing it was denied exists on
// disk, its tree is proven gone with a complete proof, and the private
// TMPDIR is removed after the proof.
func TestSandbox_WorkspaceWallsTheAgentIn(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cgroup", "subreaper"} {
		t.Run(mode, func(t *testing.T) {
			e := newFaultEnv(t)
			home, outside := t.TempDir(), t.TempDir()
			s := startSidecar(t, "--state-dir", e.stateDir, "--containment", mode)
			s.initialize(false)
			o := e.openProbe(s, "ws-"+mode, home, nil)
			sb := o.Sandbox
			if !sb.Enforced || sb.Filesystem != "workspace" || sb.Signals != "own-tree" || sb.LandlockABI < 6 || sb.TmpDir == "" {
				t.Fatalf("sandbox %+v, want workspace enforced with own-tree signals and a private TMPDIR", sb)
			}
			if fi, err := os.Stat(sb.TmpDir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("private TMPDIR %s: %v %v, want a 0700 directory", sb.TmpDir, fi, err)
			}
			for _, w := range []string{realDir(t, e.work), realDir(t, home), sb.TmpDir} {
				if !slices.Contains(sb.Writable, w) {
					t.Errorf("writable %v lacks %s", sb.Writable, w)
				}
			}
			work := e.work
			got := probeTurn(t, s, o.Session, "t1",
				"write "+work+"/in-cwd", "write "+home+"/in-home", "write "+sb.TmpDir+"/in-tmp",
				"write "+outside+"/out", "write "+e.stateDir+"/planted", "write "+e.stateDir+"/sessions/planted",
				"cgroup-escape", "replace "+faultBin,
				"child write "+outside+"/child-out", "child write "+work+"/child-in", "child cgroup-escape")
			wantProbes(t, got, map[string]string{
				"write " + work + "/in-cwd": "ok", "write " + home + "/in-home": "ok", "write " + sb.TmpDir + "/in-tmp": "ok",
				"write " + outside + "/out": "denied", "write " + e.stateDir + "/planted": "denied",
				"write " + e.stateDir + "/sessions/planted": "denied",
				"cgroup-escape": "denied", "replace " + faultBin: "denied",
				"child write " + outside + "/child-out": "denied", "child write " + work + "/child-in": "ok",
				"child cgroup-escape": "denied"})
			requireAbsent(t, outside+"/out", outside+"/child-out", e.stateDir+"/planted", e.stateDir+"/sessions/planted", faultBin+".new")
			for _, f := range []string{work + "/in-cwd", home + "/in-home", work + "/child-in"} {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("allowed write missing: %v", err)
				}
			}
			closeClean(t, s, o.Session, e.mark, e.work)
			waitGone(t, sb.TmpDir, 10*time.Second)
		})
	}
}

// TestSandbox_OwnTreeCannotReachOutside: with signals own-tree (the
// default), the agent cannot kill(2) the sidecar or the host (EPERM),
// cannot connect to an abstract UNIX socket the test listens on, and
// cannot open /proc/<pid>/fd of the sidecar or of a neighbour session's
// agent, sandboxed (another domain: nor signal it) or not (Landlock
// denies ptrace-class access outside its domain). The
// neighbour, opened side by side with filesystem and signals off,
// reaches the same socket and writes outside its cwd: a sandboxed and a
// non-sandboxed open in one sidecar. The walled agents run with
// processes "all" (they see the host's PID namespace): what is tested
// here is the Landlock scope on its own; with processes "own-tree" (the
// default) these pids do not exist for them at all
// (TestSandbox_OwnProcessNamespaceSeesOnlyItsTree).
func TestSandbox_OwnTreeCannotReachOutside(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	home, outside := t.TempDir(), t.TempDir()
	name := "acpx-e2e-" + randHex(6)
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	hostPIDs := map[string]any{"processes": "all"}
	walled := e.openProbe(s, "walled", home, hostPIDs)
	walled2 := e.openProbe(s, "walled2", home, hostPIDs) // a sandboxed neighbour: another domain
	free := e.openProbe(s, "free", home, map[string]any{"filesystem": "off", "signals": "all"})
	if free.Sandbox.Enforced || free.Sandbox.Filesystem != "off" {
		t.Fatalf("the unsandboxed open reports %+v", free.Sandbox)
	}
	sidecarPid := strconv.Itoa(s.cmd.Process.Pid)
	hostPid := strconv.Itoa(os.Getpid())
	neighbour, sandboxedNeighbour := strconv.Itoa(free.Process.Pid), strconv.Itoa(walled2.Process.Pid)
	got := probeTurn(t, s, walled.Session, "w1", "kill "+sidecarPid, "kill "+hostPid, "abstract "+name,
		"procfd "+neighbour, "procfd "+sandboxedNeighbour, "kill "+sandboxedNeighbour, "procfd "+sidecarPid,
		"child kill "+sidecarPid, "child abstract "+name, "child procfd "+sandboxedNeighbour)
	wantProbes(t, got, map[string]string{"kill " + sidecarPid: "EPERM", "kill " + hostPid: "EPERM", "abstract " + name: "EPERM",
		"procfd " + neighbour: "denied", "procfd " + sandboxedNeighbour: "denied", "kill " + sandboxedNeighbour: "EPERM",
		"procfd " + sidecarPid: "denied", "child kill " + sidecarPid: "EPERM", "child abstract " + name: "EPERM",
		"child procfd " + sandboxedNeighbour: "denied"})
	// The same probes from the unsandboxed neighbour succeed: the denials
	// above are the sandbox's.
	walledPid := strconv.Itoa(walled.Process.Pid)
	got = probeTurn(t, s, free.Session, "f1", "kill "+sidecarPid, "abstract "+name, "procfd "+walledPid, "write "+outside+"/free")
	wantProbes(t, got, map[string]string{"kill " + sidecarPid: "ok", "abstract " + name: "ok", "procfd " + walledPid: "ok",
		"write " + outside + "/free": "ok"})
	closeAllClean(t, s, e, walled.Session, walled2.Session, free.Session)
}

// TestSandbox_StrictReadsOnlyItsOwn: in strict mode the agent cannot
// read a key planted in a fake ~/.ssh outside its HOME, nor another
// session's workspace, but reads its cwd, and node, python and /bin/sh
// still start.
func TestSandbox_StrictReadsOnlyItsOwn(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	home, userHome, otherWork := t.TempDir(), t.TempDir(), t.TempDir()
	key := filepath.Join(userHome, ".ssh", "id_ed25519")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{key, otherWork + "/secret.txt", e.work + "/mine.txt"} {
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	o := e.openProbe(s, "strict", home, map[string]any{"filesystem": "strict"})
	if !o.Sandbox.Enforced || o.Sandbox.Filesystem != "strict" || slices.Contains(o.Sandbox.Readable, "/") ||
		!slices.Contains(o.Sandbox.Readable, realDir(t, faultBin)) {
		t.Fatalf("sandbox %+v, want strict, not reading /, reading the command", o.Sandbox)
	}
	got := probeTurn(t, s, o.Session, "s1", "read "+key, "read "+otherWork+"/secret.txt", "read "+e.work+"/mine.txt",
		"exec /usr/bin/node -e console.log(6*7)", "exec /usr/bin/python3 -c print(6*7)", "exec /bin/sh -c pwd",
		"child read "+key)
	wantProbes(t, got, map[string]string{"read " + key: "denied", "read " + otherWork + "/secret.txt": "denied",
		"read " + e.work + "/mine.txt": "ok", "exec /usr/bin/node -e console.log(6*7)": "ok 42",
		"exec /usr/bin/python3 -c print(6*7)": "ok 42", "exec /bin/sh -c pwd": "ok " + e.work, "child read " + key: "denied"})
	closeClean(t, s, o.Session, e.mark, e.work)
}

// TestSandbox_Network: with network {connectTcp: [A]} a connect to the
// test's loopback listener on A works and one on B fails; with network
// "none" the agent has its own loopback only, so neither listener is
// reachable.
func TestSandbox_Network(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	home := t.TempDir()
	var addrs []string
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	_, portA, _ := net.SplitHostPort(addrs[0])
	a, _ := strconv.Atoi(portA)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	tcp := e.openProbe(s, "tcp", home, map[string]any{"network": map[string]any{"connectTcp": []int{a}}})
	if string(tcp.Sandbox.Network) != `{"connectTcp":[`+portA+`]}` {
		t.Errorf("network %s", tcp.Sandbox.Network)
	}
	got := probeTurn(t, s, tcp.Session, "n1", "tcp "+addrs[0], "tcp "+addrs[1], "child tcp "+addrs[1])
	wantProbes(t, got, map[string]string{"tcp " + addrs[0]: "ok", "tcp " + addrs[1]: "denied", "child tcp " + addrs[1]: "denied"})
	none := e.openProbe(s, "none", home, map[string]any{"network": "none"})
	got = probeTurn(t, s, none.Session, "n2", "tcp "+addrs[0], "tcp "+addrs[1])
	wantProbes(t, got, map[string]string{"tcp " + addrs[0]: "ECONNREFUSED", "tcp " + addrs[1]: "ECONNREFUSED"})
	closeAllClean(t, s, e, tcp.Session, none.Session)
}

// TestSandbox_UnenforceableAndConflicts: on a kernel without Landlock
// (simulated: --assume-landlock-abi 0) an explicit sandbox is
// PLATFORM_UNSUPPORTED with nothing launched, while an open that names
// none runs and reports enforced false; a writable path inside the state
// dir is SANDBOX_CONFLICT (data.paths); a HOME that holds the state dir
// keeps it read-only (a bind mount), not writable.
func TestSandbox_UnenforceableAndConflicts(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	home := t.TempDir()
	s := startSidecar(t, "--state-dir", e.stateDir, "--assume-landlock-abi", "0")
	init := s.initialize(false)
	caps, _ := init["capabilities"].(map[string]any)
	if sb, _ := caps["sandbox"].(map[string]any); sb["default"] != "off" || sb["filesystem"] != false || sb["landlockAbi"] != 0.0 {
		t.Errorf("capabilities.sandbox %v, want default off, no filesystem, ABI 0", sb)
	}
	p := e.openParams("explicit", "probe")
	p["sandbox"] = map[string]any{"filesystem": "workspace"}
	f := s.call("session/open", p)
	wantError(t, "explicit sandbox without Landlock", f, -32000, "PLATFORM_UNSUPPORTED")
	if pids := markedPids(e.mark, e.work); len(pids) != 0 {
		t.Fatalf("a refused open launched %v", pids)
	}
	o := e.openProbe(s, "default", home, nil)
	if o.Sandbox.Enforced || o.Sandbox.Reason == "" || o.Sandbox.Filesystem != "workspace" {
		t.Errorf("default on a kernel without Landlock: %+v, want workspace not enforced, with a reason", o.Sandbox)
	}
	closeClean(t, s, o.Session, e.mark, e.work)

	// On the real kernel: conflicts.
	e2 := newFaultEnv(t)
	homeWithState := t.TempDir()
	state := filepath.Join(homeWithState, ".acpx-sidecar")
	s2 := startSidecar(t, "--state-dir", state)
	s2.initialize(false)
	p = e2.openParams("conflict", "probe")
	p["stateDir"] = state
	p["sandbox"] = map[string]any{"writable": []string{filepath.Join(state, "sessions")}}
	f = s2.call("session/open", p)
	d := wantError(t, "writable inside the state dir", f, -32000, "SANDBOX_CONFLICT")
	if len(d.Paths) != 1 || d.Paths[0] != realDir(t, state) {
		t.Errorf("data.paths %v, want [%s]", d.Paths, state)
	}
	p = e2.openParams("ro", "probe")
	p["stateDir"] = state
	p["env"] = map[string]string{"ACPX_TEST_MARK": e2.mark, "HOME": homeWithState}
	var ro sandboxOpen
	s2.mustCall("session/open", p, &ro)
	if !slices.Contains(ro.Sandbox.ReadOnly, realDir(t, state)) {
		t.Fatalf("readOnly %v, want the state dir inside HOME", ro.Sandbox.ReadOnly)
	}
	got := probeTurn(t, s2, ro.Session, "r1", "write "+homeWithState+"/ok", "write "+state+"/planted")
	wantProbes(t, got, map[string]string{"write " + homeWithState + "/ok": "ok", "write " + state + "/planted": "EROFS"})
	requireAbsent(t, state+"/planted")
	closeClean(t, s2, ro.Session, e2.mark, e2.work)
}
