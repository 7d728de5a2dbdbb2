package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeFS: every path in dirs is a directory, in files a file; nothing
// else exists.
func fakeFS(dirs, files []string) func(string) (bool, bool) {
	return func(p string) (bool, bool) {
		if slices.Contains(dirs, p) {
			return true, true
		}
		return slices.Contains(files, p), false
	}
}

var sysDirs = append(slices.Clone(SystemReadable), "/", "/dev/pts", "/dev/shm")
var devFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/urandom", "/dev/random", "/dev/ptmx"}

func ruleOf(p Plan, path string) (uint64, bool) {
	for _, r := range p.FS {
		if r.Path == path {
			return r.Access, true
		}
	}
	return 0, false
}

func wsPolicy() Policy {
	return Policy{Filesystem: Workspace, Network: NetAll, Signals: OwnTree, Processes: OwnTreeProcesses, Capabilities: CapsNone}
}

func TestBuild_WorkspaceReadsAllWritesOnlyItsPlaces(t *testing.T) {
	dirs := append(slices.Clone(sysDirs), "/w", "/h", "/t", "/extra")
	paths := Paths{Cwd: "/w", Home: "/h", TmpDir: "/t", Protected: []string{"/state", "/sys/fs/cgroup"}}
	pol := wsPolicy()
	pol.Writable = []string{"/extra"}
	plan, ap, err := Build(pol, paths, BuildOptions{Exists: fakeFS(dirs, devFiles)})
	if err != nil {
		t.Fatal(err)
	}
	if plan.HandledFS != HandledFS || plan.Scoped != ScopeSignal|ScopeAbstractUnixSocket || plan.HandledNet != 0 || plan.NewNetNS {
		t.Fatalf("plan %+v", plan)
	}
	if a, ok := ruleOf(plan, "/"); !ok || a != ReadAccess {
		t.Errorf("/: %b, %v; want read only", a, ok)
	}
	for _, w := range []string{"/w", "/h", "/t", "/extra", "/dev/shm"} {
		if a, ok := ruleOf(plan, w); !ok || a != ReadAccess|WriteAccess {
			t.Errorf("%s: %b %v, want read+write", w, a, ok)
		}
	}
	for _, d := range devFiles {
		if a, ok := ruleOf(plan, d); !ok || a != DeviceAccess&FileAccess {
			t.Errorf("%s: %b %v, want device file rights", d, a, ok)
		}
	}
	if a, _ := ruleOf(plan, "/dev/pts"); a != DeviceAccess {
		t.Errorf("/dev/pts: %b", a)
	}
	// No rule anywhere grants device creation.
	for _, r := range plan.FS {
		if r.Access&(AccessFSMakeBlock|AccessFSMakeChar) != 0 {
			t.Errorf("%s grants mknod: %b", r.Path, r.Access)
		}
		if r.Path != "/" && Within("/state", r.Path) || Within(r.Path, "/sys/fs/cgroup") {
			t.Errorf("rule on %s covers a protected path", r.Path)
		}
	}
	if !slices.Contains(ap.Writable, "/w") || !slices.Contains(ap.Readable, "/") || len(ap.ReadOnly) != 0 {
		t.Errorf("applied %+v", ap)
	}
}

func TestBuild_StrictReadsOnlySystemInstallAndItsPlaces(t *testing.T) {
	dirs := slices.DeleteFunc(append(slices.Clone(sysDirs), "/w", "/h", "/t", "/nm", "/ro"),
		func(d string) bool { return d == "/lib32" })
	paths := Paths{Cwd: "/w", Home: "/h", TmpDir: "/t", Install: []string{"/nm", "/bin/agent"}}
	pol := wsPolicy()
	pol.Filesystem, pol.Readable = Strict, []string{"/ro"}
	plan, ap, err := Build(pol, paths, BuildOptions{Exists: fakeFS(dirs, append(devFiles, "/bin/agent"))})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ruleOf(plan, "/"); ok {
		t.Errorf("strict reads /")
	}
	for _, r := range []string{"/usr", "/etc", "/proc", "/sys", "/nm", "/ro"} {
		if a, ok := ruleOf(plan, r); !ok || a != ReadAccess {
			t.Errorf("%s: %b %v, want read", r, a, ok)
		}
	}
	// A file rule carries file rights only (a directory right would be EINVAL).
	if a, ok := ruleOf(plan, "/bin/agent"); !ok || a != ReadAccess&FileAccess {
		t.Errorf("/bin/agent: %b %v", a, ok)
	}
	if _, ok := ruleOf(plan, "/lib32"); ok {
		t.Errorf("a missing path became a rule")
	}
	if !slices.Contains(ap.Readable, "/nm") || slices.Contains(ap.Readable, "/root") {
		t.Errorf("applied %+v", ap)
	}
}

func TestBuild_ProtectedInsideWritableIsReadOnlyOrConflict(t *testing.T) {
	dirs := append(slices.Clone(sysDirs), "/h", "/w")
	paths := Paths{Cwd: "/w", Home: "/h", Protected: []string{"/h/.acpx-sidecar", "/w/node_modules", "/sys/fs/cgroup"}}
	plan, ap, err := Build(wsPolicy(), paths, BuildOptions{BindReadOnly: true, Exists: fakeFS(dirs, nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/h/.acpx-sidecar", "/w/node_modules"}
	if !slices.Equal(plan.ReadOnly, want) || !slices.Equal(ap.ReadOnly, want) {
		t.Errorf("read-only %v / %v, want %v", plan.ReadOnly, ap.ReadOnly, want)
	}
	_, _, err = Build(wsPolicy(), paths, BuildOptions{Exists: fakeFS(dirs, nil)})
	var ce *ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Paths, want) {
		t.Errorf("without bind mounts: %v, want a conflict on %v", err, want)
	}
}

func TestBuild_WritableInsideProtectedIsAlwaysAConflict(t *testing.T) {
	for _, w := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified/x", "/state/sessions"} {
		pol := wsPolicy()
		pol.Writable = []string{w}
		_, _, err := Build(pol, Paths{Cwd: "/w", Protected: []string{"/state", "/sys/fs/cgroup"}},
			BuildOptions{BindReadOnly: true, Exists: fakeFS([]string{"/", "/w", w}, nil)})
		var ce *ConflictError
		if !errors.As(err, &ce) || len(ce.Paths) != 1 || !Within(w, ce.Paths[0]) {
			t.Errorf("writable %s: %v, want a conflict", w, err)
		}
	}
}

func TestBuild_NetworkAndSignals(t *testing.T) {
	pol := Policy{Filesystem: Off, Network: NetConnectTCP, ConnectTCP: []uint16{443, 80, 443}, Signals: AllSignals,
		Processes: AllProcesses, Capabilities: CapsKeep}
	plan, _, err := Build(pol, Paths{Cwd: "/w"}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.HandledFS != 0 || len(plan.FS) != 0 || plan.Scoped != 0 {
		t.Errorf("filesystem off / signals all restricted something: %+v", plan)
	}
	if plan.HandledNet != AccessNetBindTCP|AccessNetConnectTCP || !slices.Equal(plan.ConnectTCP, []uint16{80, 443}) {
		t.Errorf("connectTcp: %+v (bind must be handled, no bind rule)", plan)
	}
	pol = Policy{Filesystem: Off, Network: NetNone, Signals: AllSignals, Processes: AllProcesses, Capabilities: CapsKeep}
	if plan, _, _ = Build(pol, Paths{}, BuildOptions{}); !plan.NewNetNS || plan.Landlocks() {
		t.Errorf("none: %+v", plan)
	}
	pol.Network = NetAll
	if plan, _, _ = Build(pol, Paths{}, BuildOptions{}); !plan.Empty() {
		t.Errorf("all off: %+v, want empty", plan)
	}
	for _, bad := range []Policy{{Filesystem: "open", Network: NetAll, Signals: OwnTree, Processes: AllProcesses, Capabilities: CapsKeep},
		{Filesystem: Off, Network: "some", Signals: OwnTree, Processes: AllProcesses, Capabilities: CapsKeep},
		{Filesystem: Off, Network: NetAll, Signals: "x", Processes: AllProcesses, Capabilities: CapsKeep},
		{Filesystem: Off, Network: NetAll, Signals: OwnTree, Processes: "mine", Capabilities: CapsKeep},
		{Filesystem: Off, Network: NetAll, Signals: OwnTree, Processes: AllProcesses, Capabilities: "some"}} {
		if _, _, err := Build(bad, Paths{}, BuildOptions{}); !errors.Is(err, ErrBadPolicy) {
			t.Errorf("%+v: %v, want ErrBadPolicy", bad, err)
		}
	}
}

// TestBuild_LayersAgainstRoot: processes own-tree and capabilities none
// are independent of the filesystem mode; the seccomp filter comes with
// any filesystem sandbox, and the user-namespace denial with it where
// mount namespaces are available.
func TestBuild_LayersAgainstRoot(t *testing.T) {
	plan, _, err := Build(wsPolicy(), Paths{Cwd: "/w"}, BuildOptions{BindReadOnly: true, Exists: fakeFS([]string{"/", "/w"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.NewPIDNS || !plan.DropCaps || !plan.Seccomp || !plan.DenyUserNS || !plan.NewMountNS() {
		t.Errorf("workspace with every layer: %+v", plan)
	}
	plan, _, _ = Build(wsPolicy(), Paths{Cwd: "/w"}, BuildOptions{Exists: fakeFS([]string{"/", "/w"}, nil)})
	if !plan.Seccomp || plan.DenyUserNS {
		t.Errorf("without namespaces: seccomp %v, denyUserNS %v; want the filter, no mount over /", plan.Seccomp, plan.DenyUserNS)
	}
	pol := Policy{Filesystem: Off, Network: NetAll, Signals: AllSignals, Processes: OwnTreeProcesses, Capabilities: CapsNone}
	plan, _, _ = Build(pol, Paths{}, BuildOptions{BindReadOnly: true})
	if !plan.NewPIDNS || !plan.DropCaps || plan.Seccomp || plan.Landlocks() || plan.Empty() {
		t.Errorf("filesystem off, own-tree, no caps: %+v", plan)
	}
}

// TestBuild_ProtectedPathCannotBeRenamedAway: every directory between a
// protected path and the outermost writable root holding it is pinned
// (outermost first); the key's private HOME may lie inside its state
// dir, no other writable path may.
func TestBuild_ProtectedPathCannotBeRenamedAway(t *testing.T) {
	paths := Paths{Cwd: "/w", Home: "/w/sub", Protected: []string{"/w/a/b/node_modules", "/w/state"}}
	plan, _, err := Build(wsPolicy(), paths, BuildOptions{BindReadOnly: true, Exists: fakeFS([]string{"/", "/w", "/w/sub"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/w/a", "/w/a/b"}; !slices.Equal(plan.Pin, want) {
		t.Errorf("pins %v, want %v", plan.Pin, want)
	}
	if want := []string{"/w/a/b/node_modules", "/w/state"}; !slices.Equal(plan.ReadOnly, want) {
		t.Errorf("read-only %v, want %v", plan.ReadOnly, want)
	}
	inCwd := Paths{Cwd: "/w", Home: "/w/state/homes/k", PrivateHome: "/w/state/homes/k", Protected: []string{"/w/state"}}
	plan, _, err = Build(wsPolicy(), inCwd, BuildOptions{BindReadOnly: true, Exists: fakeFS([]string{"/", "/w", "/w/state/homes/k"}, nil)})
	if err != nil || !slices.Equal(plan.ReadOnly, []string{"/w/state"}) || !slices.Equal(plan.ReadWrite, []string{"/w/state/homes/k"}) {
		t.Errorf("a private home in a state dir kept read-only in the cwd: %v, read-only %v, read-write %v", err, plan.ReadOnly, plan.ReadWrite)
	}
	home := Paths{Cwd: "/w", Home: "/s/homes/k", PrivateHome: "/s/homes/k", Protected: []string{"/s"}}
	plan, ap, err := Build(wsPolicy(), home, BuildOptions{Exists: fakeFS([]string{"/", "/w", "/s/homes/k"}, nil)})
	if err != nil || !slices.Contains(ap.Writable, "/s/homes/k") {
		t.Fatalf("private home: %v, writable %v", err, ap.Writable)
	}
	home.PrivateHome = ""
	if _, _, err := Build(wsPolicy(), home, BuildOptions{Exists: fakeFS([]string{"/", "/w", "/s/homes/k"}, nil)}); err == nil {
		t.Errorf("a HOME inside a state dir that is not the key's private one was allowed")
	}
	pol := wsPolicy()
	pol.Writable = []string{"/s/homes/other"}
	home.PrivateHome = "/s/homes/k"
	if _, _, err := Build(pol, home, BuildOptions{Exists: fakeFS([]string{"/", "/w", "/s/homes/k", "/s/homes/other"}, nil)}); err == nil {
		t.Errorf("another key's home was made writable")
	}
	_ = plan
}

func TestCapsCheck_NamesEveryMissingPart(t *testing.T) {
	plan := Plan{HandledFS: HandledFS, HandledNet: HandledNet, Scoped: ScopeSignal, NewNetNS: true, ReadOnly: []string{"/x"}}
	if err := (Caps{LandlockABI: 7, Namespaces: true}).Check(&plan); err != nil {
		t.Errorf("ABI 7 + namespaces: %v", err)
	}
	var ue *UnsupportedError
	if err := (Caps{LandlockABI: 4}).Check(&plan); !errors.As(err, &ue) || len(ue.Missing) != 4 {
		t.Errorf("ABI 4, no namespaces: %v, want filesystem, scopes, netns, binds missing", err)
	}
	root := Plan{NewPIDNS: true, Seccomp: true, DropCaps: true}
	if err := (Caps{LandlockABI: 7, Namespaces: true, PIDNamespace: true, Seccomp: true}).Check(&root); err != nil {
		t.Errorf("every layer available: %v", err)
	}
	if err := (Caps{LandlockABI: 7, Namespaces: true, ProcessesReason: "no pidns"}).Check(&root); !errors.As(err, &ue) ||
		len(ue.Missing) != 2 || !strings.Contains(ue.Missing[0], "no pidns") {
		t.Errorf("no PID namespace, no seccomp: %v", err)
	}
	if err := (Caps{LandlockABI: 7, Namespaces: true}.Limit(0)).Check(&Plan{Scoped: ScopeSignal}); err == nil {
		t.Errorf("Limit(0) still enforces scopes")
	}
}

func TestInstallation_NodeModulesTreeAndExecutable(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "node_modules", "@x", "agent", "node_modules", "dep", "bin.js")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "agent")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(root)
	got := Installation("/bin/sh", []string{"-c", link, "relative/x"}, "")
	want := []string{"/bin/sh", filepath.Join(real, "node_modules")}
	if r, _ := filepath.EvalSymlinks("/bin/sh"); r != "/bin/sh" {
		want[0] = r
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Installation = %v, want %v", got, want)
	}
}

func TestParseMountinfo(t *testing.T) {
	mp, fs, ok := parseMountinfo(`35 25 0:30 / /sys/fs/cgroup/unified\040x rw,nosuid shared:9 - cgroup2 cgroup2 rw`)
	if !ok || mp != "/sys/fs/cgroup/unified x" || fs != "cgroup2" {
		t.Errorf("got %q %q %v", mp, fs, ok)
	}
	if got := CgroupMounts(); !slices.Contains(got, "/sys/fs/cgroup") {
		t.Errorf("CgroupMounts() = %v on a machine with /sys/fs/cgroup", got)
	}
}

// TestInstallation_ScriptInterpreterAndItsVersionManager: a script whose
// "#!/usr/bin/env -S fakepy -u" names an interpreter found on the launch
// PATH under a version manager's tree (a shim script itself, whose own
// interpreter is /bin/sh) brings the shim, the manager's whole directory
// and, through the shim, /bin/sh into the installation; a name not on
// PATH brings nothing.
func TestInstallation_ScriptInterpreterAndItsVersionManager(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	shims := filepath.Join(root, ".pyenv", "shims")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(shims, "fakepy")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec real \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "agent.py")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env -S fakepy -u\nprint(1)\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := Installation(script, nil, "/nonexistent:"+shims)
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	for _, want := range []string{script, shim, filepath.Join(root, ".pyenv"), sh} {
		if !slices.Contains(got, want) {
			t.Errorf("Installation = %v, lacks %s", got, want)
		}
	}
	if got := Installation(script, nil, "/nonexistent"); len(got) != 1 || got[0] != script {
		t.Errorf("interpreter not on PATH: %v, want the script alone", got)
	}
	if r := interpreterRoot("/usr/bin/python3"); r != "" {
		t.Errorf("a system interpreter's root %q, want none", r)
	}
	if r := interpreterRoot("/opt/node/bin/node"); r != "/opt/node" {
		t.Errorf("/opt/node/bin/node's root %q", r)
	}
}
