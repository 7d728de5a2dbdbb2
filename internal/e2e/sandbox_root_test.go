package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The sandbox holds against root (docs/protocol.md §19; the design's
// PROTOCOL §10.3): the tests run as root here, under the sidecar's
// default sandbox (workspace with processes own-tree, capabilities none
// and the seccomp filter).

// requireRootLayers initializes s and skips where the machine cannot
// give a tree its own PID namespace, a seccomp filter and the
// user-namespace refusal (initialize's capabilities.sandbox says so).
func requireRootLayers(t *testing.T, s *sidecar) {
	t.Helper()
	res := s.initialize(false)
	caps, _ := res["capabilities"].(map[string]any)
	sb, _ := caps["sandbox"].(map[string]any)
	if sb["processes"] != true || sb["seccomp"] != true || sb["userNamespacesRefused"] != true {
		t.Skipf("this machine cannot enforce processes own-tree, seccomp and the user-namespace refusal: %v", sb)
	}
}

// pidsOf parses a probe's "ok 1 2 3".
func pidsOf(t *testing.T, probe, got string) []int {
	t.Helper()
	rest, ok := strings.CutPrefix(got, "ok ")
	if !ok {
		t.Fatalf("probe %s => %q", probe, got)
	}
	var out []int
	for _, f := range strings.Fields(rest) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// TestSandbox_OwnProcessNamespaceSeesOnlyItsTree: two sandboxed sessions
// side by side (the default sandbox). Each agent's /proc and `ps` list
// only its own tree (its init as 1, itself as 2, a few more); reading the
// other agent's, the sidecar's or the test's environ, cmdline or maps
// fails, and so does its own init's environ (the init is undumpable). The
// proofs still name every process of each tree by its host pid — the
// init, the agent, its setsid'd grandchild and a double-forked orphan —
// and are complete; nothing survives.
func TestSandbox_OwnProcessNamespaceSeesOnlyItsTree(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir, "--term-grace-ms", "300", "--kill-grace-ms", "500")
	requireRootLayers(t, s)
	open := func(key string) openResult {
		var o openResult
		s.mustCall("session/open", e.openParams(key, "probe,grandchild"), &o)
		if sb := o.Sandbox; sb == nil || !sb.Enforced || sb.Processes != "own-tree" || sb.Capabilities != "none" || !sb.Seccomp {
			t.Fatalf("open %s: sandbox %+v, want processes own-tree, capabilities none, seccomp", key, o.Sandbox)
		}
		return o
	}
	a, b := open("ns-a"), open("ns-b")
	self := strconv.Itoa(os.Getpid())
	for _, pair := range [][2]openResult{{a, b}, {b, a}} {
		me, other := pair[0], pair[1]
		op := strconv.Itoa(other.Process.Pid)
		sc := strconv.Itoa(s.cmd.Process.Pid)
		lines := []string{"proc", "ps", "double-fork", "read /proc/1/environ"}
		for _, pid := range []string{op, sc, self} {
			for _, f := range []string{"environ", "cmdline", "maps"} {
				lines = append(lines, "read /proc/"+pid+"/"+f)
			}
		}
		got := probeTurn(t, s, me.Session, "t-"+me.Session, lines...)
		for _, probe := range []string{"proc", "ps"} {
			pids := pidsOf(t, probe, got[probe])
			if !slices.Contains(pids, 1) || !slices.Contains(pids, 2) || len(pids) > 8 || slices.Contains(pids, other.Process.Pid) ||
				slices.Contains(pids, s.cmd.Process.Pid) {
				t.Errorf("%s of %s lists %v: want its own tree only (1 the init, 2 itself)", probe, me.Session, pids)
			}
		}
		for _, l := range lines[3:] {
			if got[l] == "ok" || got[l] == "" {
				t.Errorf("%s: probe %q => %q, want it refused", me.Session, l, got[l])
			}
		}
	}
	// The settled trees, by host pid: init, agent, grandchild, orphan.
	var alive []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive = markedPids(e.mark, "")
		inits := slices.DeleteFunc(slices.Clone(alive), func(p int) bool { return !isHelper(p) })
		if len(alive) >= 8 && len(inits) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("marked processes %v: want each tree's init, agent, grandchild and orphan", alive)
		}
		time.Sleep(20 * time.Millisecond) // the orphans are forked asynchronously; bounded
	}
	var proofs []proof
	for _, o := range []openResult{a, b} {
		p := closeProof(s, o.Session, nil)
		if !p.Complete || !p.Verified.TreeEmpty {
			t.Fatalf("close proof of %s not complete: %+v", o.Session, p)
		}
		proofs = append(proofs, p)
	}
	for _, pid := range alive {
		if !proofs[0].names(pid) && !proofs[1].names(pid) {
			t.Errorf("host pid %d is in neither proof: %+v %+v", pid, proofs[0].Processes, proofs[1].Processes)
		}
	}
	for i, o := range []openResult{a, b} {
		if !proofs[i].names(o.Process.Pid) {
			t.Errorf("the proof of %s does not name its provider %d", o.Session, o.Process.Pid)
		}
		for _, pp := range proofs[i].Processes {
			if pp.ExitCode == nil && pp.Signal == "" && pp.ReapedBy == "" {
				t.Errorf("entry %+v says nothing of how it ended", pp)
			}
		}
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestSandbox_RootAgentCanDoNoHarm: a root agent (and a setsid'd
// descendant) under the default sandbox is refused EPERM by each
// privileged act, each built to be harmless were it let through (an
// invalid reboot magic, a bogus module image, the clock set to its own
// time, a tmpfs on a workspace dir, a child in a new user namespace that
// exits at once); writing a root-owned place outside its paths is
// denied; its /proc/self/status shows no capability in any set,
// no_new_privs and a seccomp filter. The same probes from an agent whose
// open turned every layer off mostly succeed: the refusals are the
// sandbox's.
func TestSandbox_RootAgentCanDoNoHarm(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the probes are of what root may do")
	}
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	requireRootLayers(t, s)
	mnt := filepath.Join(e.work, "mnt")
	owned := filepath.Join(e.work, "owned")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(owned, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	etc := "/etc/acpx-e2e-" + randHex(6)
	refused := []string{"reboot", "init_module", "clock_settime", "mount " + mnt, "unshare-user", "clone3-user",
		"raw-socket", "ptrace-child", "chown " + owned + " 4242", "syscall keyctl", "syscall io_uring_setup", "syscall setns",
		"syscall bpf", "syscall perf_event_open", "syscall userfaultfd", "syscall swapon", "syscall kexec_load",
		"syscall process_vm_readv", "child clone3-user", "child mount " + mnt, "child raw-socket"}
	p := e.openParams("root", "probe")
	var o openResult
	s.mustCall("session/open", p, &o)
	lines := append(slices.Clone(refused), "write "+etc, "caps", "exec unshare -U true")
	got := probeTurn(t, s, o.Session, "r1", lines...)
	want := map[string]string{"write " + etc: "denied", "exec unshare -U true": "exit 1"}
	for _, l := range refused {
		want[l] = "EPERM"
	}
	wantProbes(t, got, want)
	for _, f := range []string{"CapInh:=0000000000000000", "CapPrm:=0000000000000000", "CapEff:=0000000000000000",
		"CapBnd:=0000000000000000", "CapAmb:=0000000000000000", "NoNewPrivs:=1", "Seccomp:=2"} {
		if !strings.Contains(got["caps"], f) {
			t.Errorf("caps %q lacks %s", got["caps"], f)
		}
	}
	requireAbsent(t, etc)
	if fi, err := os.Stat(owned); err != nil || fi.Sys() == nil {
		t.Fatal(err)
	}
	// The control: every layer off.
	free := e.openParams("free", "probe")
	free["sandbox"] = map[string]any{"filesystem": "off", "signals": "all", "processes": "all", "capabilities": "keep"}
	var f openResult
	s.mustCall("session/open", free, &f)
	if f.Sandbox.Seccomp || f.Sandbox.Processes != "all" || f.Sandbox.Capabilities != "keep" {
		t.Fatalf("the control open reports %+v", f.Sandbox)
	}
	got = probeTurn(t, s, f.Session, "f1", "reboot", "init_module", "raw-socket", "syscall keyctl", "chown "+owned+" 4242",
		"syscall process_vm_readv", "caps")
	wantProbes(t, got, map[string]string{"reboot": "EINVAL", "raw-socket": "ok", "syscall keyctl": "ok",
		"chown " + owned + " 4242": "ok", "syscall process_vm_readv": "ok"})
	if got["init_module"] == "EPERM" || strings.Contains(got["caps"], "CapEff:=0000000000000000") {
		t.Errorf("the control agent: init_module %q, caps %q: want neither refused by a sandbox", got["init_module"], got["caps"])
	}
	closeAllClean(t, s, e, o.Session, f.Session)
}

// TestSandbox_PrivateHomeByDefault: an open without env.HOME (the
// sidecar's own HOME would reach the agent through --inherit-env
// minimal) gives the agent the key's private HOME,
// <stateDir>/homes/<key>, 0700, reported as sandbox.home. Writing
// ~/.bashrc lands there, never in the sidecar's HOME; a reopen of the key
// finds it; a close with discardPersistentState removes the HOME.
func TestSandbox_PrivateHomeByDefault(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	realHome, _ := os.UserHomeDir()
	before, beforeErr := os.ReadFile(filepath.Join(realHome, ".bashrc"))
	// The agent keeps its sessions in its HOME ("~/"), so the reopen can
	// resume from what the first tree left there.
	params := func() map[string]any {
		p := e.openParams("home key/1", "probe")
		p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "probe", "--state-dir", "~/.fa"}}
		return p
	}
	var o openResult
	s.mustCall("session/open", params(), &o)
	home := o.Sandbox.Home
	if want := filepath.Join(e.stateDir, "homes", "home%20key%2F1"); home != want {
		t.Fatalf("sandbox.home %q, want %q", home, want)
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home %s: %v %v, want a 0700 directory", home, fi, err)
	}
	got := probeTurn(t, s, o.Session, "h1", "exec printenv HOME", "write "+home+"/.bashrc", "write "+realHome+"/.bashrc",
		"write "+e.stateDir+"/homes/planted", "write "+e.stateDir+"/sessions/planted")
	wantProbes(t, got, map[string]string{"exec printenv HOME": "ok " + home, "write " + home + "/.bashrc": "ok",
		"write " + realHome + "/.bashrc": "denied", "write " + e.stateDir + "/homes/planted": "denied",
		"write " + e.stateDir + "/sessions/planted": "denied"})
	after, afterErr := os.ReadFile(filepath.Join(realHome, ".bashrc"))
	if string(before) != string(after) || (beforeErr == nil) != (afterErr == nil) {
		t.Errorf("the sidecar's own ~/.bashrc changed")
	}
	if p := closeProof(s, o.Session, nil); !p.Complete {
		t.Fatalf("close: %+v", p)
	}
	var again openResult
	s.mustCall("session/open", params(), &again)
	if again.Sandbox.Home != home {
		t.Fatalf("reopen: home %q, want %q", again.Sandbox.Home, home)
	}
	if !again.Resumed {
		t.Errorf("the reopen did not resume the session the agent kept in its HOME")
	}
	got = probeTurn(t, s, again.Session, "h2", "read "+home+"/.bashrc", "read "+home+"/.fa")
	wantProbes(t, got, map[string]string{"read " + home + "/.bashrc": "ok"})
	if p := closeProof(s, again.Session, map[string]any{"discardPersistentState": true}); !p.Complete {
		t.Fatalf("discarding close: %+v", p)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the private HOME outlived discardPersistentState: %v", err)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestSandbox_RenameCannotMoveWhatTheSidecarUses: the sidecar runs from a
// copy of its binary inside the agent's cwd, with its state dir there
// too. The agent tries to rename their parents away (EBUSY: every
// directory between them and the cwd is a mount point in its namespace)
// and to put its own program and state in their place (read-only).
// Afterwards the record, journal and ledger are where the sidecar put
// them, nothing went into the agent's directories, and a second sidecar
// started from the same path runs the real binary (same digest).
func TestSandbox_RenameCannotMoveWhatTheSidecarUses(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	work := realDir(t, e.work)
	bin := filepath.Join(work, "tools", "bin", "acpx-sidecar")
	state := filepath.Join(work, "data", "state")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(sidecarBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	digest := sha256Hex(string(orig))
	s := startSidecarBin(t, bin, "--state-dir", state)
	requireRootLayers(t, s)
	p := e.openParams("mover", "probe")
	p["stateDir"] = state
	var o openResult
	s.mustCall("session/open", p, &o)
	if len(o.Sandbox.ReadOnly) < 2 {
		t.Fatalf("read-only %v: want the state dir and the sidecar's installation", o.Sandbox.ReadOnly)
	}
	home := o.Sandbox.Home
	if home == "" || !strings.HasPrefix(home, state+"/") {
		t.Fatalf("sandbox.home %q, want the key's private HOME under %s", home, state)
	}
	got := probeTurn(t, s, o.Session, "m1", "write "+home+"/in-home", "rename "+work+"/tools "+work+"/tools.old", "rename "+work+"/data "+work+"/data.old",
		"rename "+work+"/tools/bin "+work+"/bin.old", "rename "+state+" "+work+"/state.old",
		"write "+bin, "write "+state+"/sessions/mover.json", "mkdir "+state+"/sessions/x")
	// A mount point cannot be renamed (EBUSY), nor moved to another
	// mount (EXDEV); a read-only bind is not written (EROFS; a running
	// binary is ETXTBSY first).
	for line, want := range map[string][]string{
		"write " + home + "/in-home":                       {"ok"}, // its HOME stays writable in the read-only state dir
		"rename " + work + "/tools " + work + "/tools.old": {"EBUSY"}, "rename " + work + "/data " + work + "/data.old": {"EBUSY"},
		"rename " + work + "/tools/bin " + work + "/bin.old": {"EBUSY", "EXDEV"}, "rename " + state + " " + work + "/state.old": {"EBUSY", "EXDEV"},
		"write " + bin: {"EROFS", "ETXTBSY"}, "write " + state + "/sessions/mover.json": {"EROFS"}, "mkdir " + state + "/sessions/x": {"EROFS"}} {
		if !slices.Contains(want, got[line]) {
			t.Errorf("probe %q => %q, want one of %v", line, got[line], want)
		}
	}
	runTurn(t, s, o.Session, "m2", "after")
	if p := closeProof(s, o.Session, nil); !p.Complete {
		t.Fatalf("close: %+v", p)
	}
	for _, f := range []string{filepath.Join(state, "sessions", "mover.json"), filepath.Join(state, "sessions", "mover.journal.ndjson")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s is not where the sidecar put it: %v", f, err)
		}
	}
	requireAbsent(t, work+"/tools.old", work+"/data.old", work+"/bin.old", work+"/state.old", state+"/sessions/x")
	if _, status := s.shutdownAndExit(); status != 0 {
		t.Fatalf("exit %d", status)
	}
	if b, err := os.ReadFile(bin); err != nil || sha256Hex(string(b)) != digest {
		t.Fatalf("the binary at %s changed (%v)", bin, err)
	}
	s2 := startSidecarBin(t, bin, "--state-dir", state)
	s2.initialize(false)
	if b, err := os.Readlink("/proc/" + strconv.Itoa(s2.cmd.Process.Pid) + "/exe"); err != nil || b != bin {
		t.Errorf("the second sidecar runs %q (%v), want %s", b, err, bin)
	}
	if _, status := s2.shutdownAndExit(); status != 0 {
		t.Fatalf("second sidecar exit %d", status)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestSandbox_WritablePathSwappedForALinkBetweenTurns: a per-turn
// session's sandbox.writable directory, replaced by the agent (it may
// write the cwd that holds it) with a link to a directory outside
// between two turns, is not followed at the revive: the revive is
// refused (the prompt fails; the sandbox path is not the open's) and the
// link's target is never written.
func TestSandbox_WritablePathSwappedForALinkBetweenTurns(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	work := realDir(t, e.work)
	extra := filepath.Join(work, "extra")
	target := realDir(t, t.TempDir())
	if err := os.Mkdir(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	p := e.openParams("swap", "probe")
	p["lifecycle"] = "per-turn"
	p["sandbox"] = map[string]any{"writable": []string{extra}}
	p["command"] = map[string]any{"path": faultBin, "args": []string{"--mode", "probe", "--state-dir", filepath.Join(work, ".fa")}}
	var o openResult
	s.mustCall("session/open", p, &o)
	got := probeTurn(t, s, o.Session, "s1", "rename "+extra+" "+extra+".old", "symlink "+target+" "+extra)
	wantProbes(t, got, map[string]string{"rename " + extra + " " + extra + ".old": "ok", "symlink " + target + " " + extra: "ok"})
	waitParked(t, s, o.Session, 1)
	f := s.call("session/prompt", map[string]any{"session": o.Session, "requestId": "s2", "prompt": "write " + extra + "/planted"})
	if f.Error == nil && !strings.Contains(string(f.Result), `"failed"`) {
		t.Errorf("the revive through a swapped path ran the turn: %s", f.Result)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("the link's target was written: %v", ents)
	}
	waitNoMarked(t, e.mark, e.work, 10*time.Second)
}

// TestParams_MisspeltMembersRefused: a misspelt member of session/open or
// of its objects is -32602 naming it; nothing is launched.
func TestParams_MisspeltMembersRefused(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	for field, set := range map[string]func(map[string]any){
		"permisionMode":     func(p map[string]any) { p["permisionMode"] = "deny-all" },
		"sandbox.filesytem": func(p map[string]any) { p["sandbox"] = map[string]any{"filesytem": "strict"} },
		"limits.memoryMB":   func(p map[string]any) { p["limits"] = map[string]any{"memoryMB": 64} },
		"command.argv":      func(p map[string]any) { p["command"].(map[string]any)["argv"] = []string{"x"} },
		"permissionPolicy.autoApprov": func(p map[string]any) {
			p["permissionPolicy"] = map[string]any{"autoApprov": []string{"read"}}
		},
	} {
		p := e.openParams("misspelt", "")
		set(p)
		wantFieldError(t, s.call("session/open", p), field)
	}
	p := e.openParams("meta-ok", "")
	p["_meta"] = map[string]any{"anything": map[string]any{"goes": true}}
	var o openResult
	s.mustCall("session/open", p, &o)
	// session/close is read strictly too: a misspelt discard leaves the
	// session open, not closed with its state kept.
	wantFieldError(t, s.call("session/close", map[string]any{"session": o.Session, "discardPersistentStat": true}), "discardPersistentStat")
	var st struct {
		State string `json:"state"`
	}
	s.mustCall("session/status", map[string]any{"session": o.Session}, &st)
	if st.State != "open" {
		t.Errorf("after a refused close the session is %q, want open", st.State)
	}
	closeAllClean(t, s, e, o.Session)
	if _, err := os.Stat(e.recordPath("misspelt")); !os.IsNotExist(err) {
		t.Errorf("a refused open left a record: %v", err)
	}
}

// wantFieldError requires f to be -32602 with data.field field.
func wantFieldError(t *testing.T, f *frame, field string) {
	t.Helper()
	if f.Error == nil || f.Error.Code != -32602 || !strings.Contains(string(f.Error.Data), `"field":"`+field+`"`) {
		t.Errorf("open with %s: %+v, want -32602 naming it", field, f)
	}
}

// TestSandbox_StrictRunsScriptAgentsThroughTheirInterpreters: under
// strict, an agent that is a "#!/usr/bin/env python3" script (the python
// of this machine's PATH: a pyenv shim, itself a bash script running
// pyenv's python) and one that is a "#!/usr/bin/env node" script both
// start and run a turn — strict reads the interpreter and its
// installation — while a file in a fake ~/.ssh of the sidecar's HOME
// stays unreadable.
func TestSandbox_StrictRunsScriptAgentsThroughTheirInterpreters(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	realHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	ssh, err := os.MkdirTemp(realHome, ".ssh-acpx-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ssh) })
	key := filepath.Join(ssh, "id_ed25519")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{
		"python": "#!/usr/bin/env python3\nimport os, sys\nos.execv(sys.argv[1], sys.argv[1:])\n",
		"node":   "#!/usr/bin/env node\nconst c = require('child_process').spawn(process.argv[2], process.argv.slice(3), {stdio: 'inherit'});\nc.on('exit', (code) => process.exit(code === null ? 1 : code));\n",
	}
	s := startSidecar(t, "--state-dir", e.stateDir)
	s.initialize(false)
	var sessions []string
	for name, body := range scripts {
		script := filepath.Join(e.work, name+"-agent")
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		p := e.openParams("strict-"+name, "")
		p["command"] = map[string]any{"path": script, "args": []string{faultBin, "--mode", "probe"}}
		p["sandbox"] = map[string]any{"filesystem": "strict", "readable": []string{filepath.Dir(faultBin)}}
		f := s.call("session/open", p)
		if f.Error != nil {
			t.Fatalf("%s agent under strict: %s %s", name, f.Error.Message, f.Error.Data)
		}
		o := decodeResult[openResult](t, "open "+name, f)
		t.Logf("%s agent: readable %v", name, o.Sandbox.Readable)
		got := probeTurn(t, s, o.Session, "t-"+name, "read "+key, "read "+script)
		wantProbes(t, got, map[string]string{"read " + key: "denied", "read " + script: "ok"})
		sessions = append(sessions, o.Session)
	}
	closeAllClean(t, s, e, sessions...)
}
