package launch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/registry"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Sandbox is what admission launches with: the plan (nil: none), the
// open result's `sandbox`, the private TMPDIR made for the session (""
// if none; removed once its tree is proven gone), and the key's private
// HOME given to the agent ("" if none; kept across the key's sessions,
// removed by a close with discardPersistentState). docs/protocol.md §19.
type Sandbox struct {
	// Plan is the kernel sandbox plan; nil: none.
	Plan *sandbox.Plan
	// Result is the open result's `sandbox` member.
	Result *protocol.SandboxResult
	// TmpDir is the session's private TMPDIR, an absolute path; "" if none.
	TmpDir string
	// Home is the key's private HOME given to the agent, an absolute
	// path; "" if none.
	Home string
	// HomeMade says this setup made the key's private HOME (it did not
	// exist before): an open that fails afterwards removes it again if it
	// is still empty (store.RemoveEmptyHome).
	HomeMade bool
}

// SandboxSite is what carrying out an open's sandbox needs of the session
// and its Manager. SetupSandbox runs on the session's actor: Rules is
// actor state.
type SandboxSite struct {
	// ID and Key are the session id and its sessionKey.
	ID, Key string
	// Config is the sidecar's sandbox configuration (default mode, what
	// the machine can enforce).
	Config *admission.SandboxConfig
	// Launcher is the containment; its Mode is asked only when a sandbox
	// is wanted.
	Launcher Launcher
	// Store is the open's state directory (the key's private HOME); nil:
	// none.
	Store *store.Store
	// Live are the writable roots of every live sandboxed tree; the state
	// dirs are read and this tree's roots registered under its lock.
	Live *registry.Sandboxes
	// StateDirs are every state dir the sidecar uses, extra included.
	StateDirs func(extra string) []string
	// SpareTmp takes a spare private TMPDIR made with prefix ("" if none).
	SpareTmp func(prefix string) string
	// RefuseAllow is the open's error for an allow list this sidecar
	// cannot enforce, nil when it can.
	RefuseAllow func() *protocol.Error
	// JoinEgress returns the session's network namespace descriptor for
	// the allow list, and the list as enforced (docs/protocol.md §19.1).
	JoinEgress func(list []string) (fd int, allowed []string, e *protocol.Error)
	// Rules are the open's Landlock rules: nil before the first launch,
	// which records them; a revive's must match (sameRulesAsOpen).
	Rules *[]sandbox.Rule
}

// SetupSandbox derives the sandbox of an open from its params, its launch
// environment env and the command (docs/protocol.md §19), before
// anything is written or launched. It returns env with TMPDIR set to a
// private directory it made when env has none and a filesystem sandbox
// is on. Errors launch nothing: INVALID_PARAMS for a writable or
// readable path that is not an existing directory; SANDBOX_CONFLICT
// (data.paths) when a writable path is, lies inside, or holds (and
// cannot keep read-only) a never-writable path, or the tree could reach
// a secret it cannot hide (sandbox.Build); PLATFORM_UNSUPPORTED for
// an explicit sandbox this machine or containment mode cannot enforce. A
// default this machine cannot enforce is reported (enforced: false), not
// refused. A refusal leaves no private HOME it made behind.
func SetupSandbox(site SandboxSite, p protocol.OpenParams, env []string) (Sandbox, []string, *protocol.Error) {
	sb, env, e := setupSandbox(site, p, env)
	if e != nil && sb.HomeMade {
		_, _ = site.Store.RemoveEmptyHome(site.Key)
	}
	return sb, env, e
}

// setupSandbox is SetupSandbox but for the removal of a HOME it made.
func setupSandbox(site SandboxSite, p protocol.OpenParams, env []string) (Sandbox, []string, *protocol.Error) {
	cfg := site.Config
	pol, defaulted := cfg.Policy(p)
	explicit := p.Sandbox != nil
	res := &protocol.SandboxResult{Filesystem: pol.Filesystem, Signals: pol.Signals,
		Network: protocol.SandboxNetwork{Mode: pol.Network}, LandlockABI: cfg.Caps.LandlockABI,
		Processes: sandbox.AllProcesses, Capabilities: sandbox.CapsKeep,
		Writable: []string{}, Readable: []string{}}
	if pol.Network == sandbox.NetAllow {
		if e := site.RefuseAllow(); e != nil {
			return Sandbox{Result: res}, env, e
		}
	}
	if pol.Network == sandbox.NetConnectTCP {
		res.Network.ConnectTCP = []int{}
		for _, port := range pol.ConnectTCP {
			res.Network.ConnectTCP = append(res.Network.ConnectTCP, int(port))
		}
	}
	setup := Sandbox{Result: res}
	if pol.Filesystem == sandbox.Off && pol.Network == sandbox.NetAll && pol.Signals == sandbox.AllSignals &&
		pol.Processes == sandbox.AllProcesses && pol.Capabilities == sandbox.CapsKeep {
		return setup, env, nil
	}
	// The one mode check (reaper.SandboxSupported): a containment that
	// cannot carry a sandbox refuses an explicit one, reports a default.
	if mode := site.Launcher.Mode(); !reaper.SandboxSupported(mode) {
		why := "containment " + string(mode) + " cannot apply a sandbox"
		if explicit {
			return setup, env, protocol.Domain(protocol.ErrPlatformUnsupported, "the sandbox cannot be enforced: "+why, false)
		}
		res.Reason = why
		return setup, env, nil
	}
	origEnv := env
	if pol.Filesystem != sandbox.Off && !admission.HostHome(p) && site.Store != nil {
		// The key's private HOME (docs/protocol.md §19): the sidecar's own
		// never reaches a sandboxed agent.
		_, statErr := os.Lstat(site.Store.HomePath(site.Key))
		home, err := site.Store.Home(site.Key)
		if err != nil {
			return setup, env, admission.OrExhausted("the key's private HOME could not be made", err,
				protocol.Domain(protocol.ErrStoreUnavailable, "the key's private HOME could not be made: "+ErrText(err), storeRetryable(err)))
		}
		env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
		env = append(env, "HOME="+home)
		setup.Home, setup.HomeMade = home, errors.Is(statErr, fs.ErrNotExist)
	}
	// The state dirs read here and this tree's writable roots registered
	// below under one lock (internal/registry's Sandboxes).
	site.Live.Lock()
	defer site.Live.Unlock()
	paths := cfg.SandboxPaths(p, pol, env, site.StateDirs(p.StateDir))
	if setup.Home != "" {
		paths.PrivateHome = paths.Home
	}
	for i, l := range [][]string{pol.Writable, pol.Readable} {
		field := [2]string{"writable", "readable"}[i]
		for j, d := range l {
			real, err := filepath.EvalSymlinks(d)
			if fi, serr := os.Stat(real); err != nil || serr != nil || !fi.IsDir() {
				return setup, env, protocol.InvalidParams("sandbox."+field+"."+strconv.Itoa(j), "sandbox paths must be existing directories")
			}
			l[j] = real
		}
	}
	tmpMade := ""
	if pol.Filesystem != sandbox.Off && paths.TmpDir == "" {
		// Made in the resolved temp dir and never resolved again: an agent
		// that can write that dir could swap the new one for a link, and
		// the path kept here is what is removed after the proof
		// (os.RemoveAll removes a link, not its target; fresh-user trial).
		parent := PrivateTmpParent()
		dir, err := site.SpareTmp(TmpPrefix(site.ID)), error(nil) // internal/registry
		if dir == "" {
			dir, err = os.MkdirTemp(parent, TmpPrefix(site.ID)) // 0700
		}
		if err != nil {
			if fi, serr := os.Stat(parent); serr != nil || !fi.IsDir() {
				// Not a passing fault: the sidecar's own TMPDIR is missing
				// (its start-up said so in the log, issue 33).
				return setup, env, protocol.Domain(protocol.ErrPlatformUnsupported, "the session's private TMPDIR could not be made: the sidecar's TMPDIR "+
					protocol.QuoteShort(parent)+" is not an existing directory (start the sidecar with TMPDIR set to one, or give the open env.TMPDIR)", false)
			}
			return setup, env, admission.OrExhausted("the session's private TMPDIR could not be made", err,
				protocol.Domain(protocol.ErrPlatformUnsupported, "the session's private TMPDIR could not be made: "+ErrText(err), true))
		}
		tmpMade, paths.TmpDir = dir, dir
		env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") })
		env = append(env, "TMPDIR="+dir)
	}
	fail := func(e *protocol.Error) (Sandbox, []string, *protocol.Error) {
		if tmpMade != "" {
			_ = os.RemoveAll(tmpMade)
		}
		return setup, env, e
	}
	plan, ap, err := sandbox.Build(pol, paths, sandbox.BuildOptions{BindReadOnly: cfg.Caps.Namespaces})
	if plan.Seccomp && !cfg.Caps.Seccomp && (p.Sandbox == nil || p.Sandbox.Filesystem == "") {
		// The filter comes with the filesystem sandbox: one the open did
		// not name itself is a default, reported below.
		plan.Seccomp, plan.DenyUserNS = false, false
		defaulted = strings.TrimPrefix(defaulted+"; no seccomp filter: this kernel has none", "; ")
	}
	var ce *sandbox.ConflictError
	if errors.As(err, &ce) {
		e := protocol.Domain(protocol.ErrSandboxConflict, "the sandbox would expose a path the sidecar keeps from agents: "+ce.Why, false)
		e.Data.Paths = ce.Paths
		return fail(e)
	}
	if err != nil {
		return fail(protocol.InvalidParams("sandbox", err.Error()))
	}
	if err := cfg.Caps.Check(&plan); err != nil {
		if explicit {
			return fail(protocol.Domain(protocol.ErrPlatformUnsupported, err.Error(), false))
		}
		res.Reason = err.Error()
		if tmpMade != "" {
			_ = os.RemoveAll(tmpMade)
		}
		setup.Home = "" // kept on disk, not given: the launch environment is as without a sandbox
		return setup, origEnv, nil
	}
	if e := sameRulesAsOpen(site.Rules, plan.FS, tmpMade, paths.PrivateHome); e != nil {
		return fail(e)
	}
	if pol.Network == sandbox.NetAllow {
		// The session's own network namespace, made once and joined by
		// every tree it launches (docs/protocol.md §19.1).
		fd, list, e := site.JoinEgress(p.Sandbox.Network.Allow)
		if e != nil {
			return fail(e)
		}
		plan.JoinNetNS = fd
		res.Network.Allow = list
	}
	res.Enforced = !plan.Empty()
	res.Writable, res.Readable, res.ReadOnly, res.TmpDir = admission.NonNil(ap.Writable), admission.NonNil(ap.Readable), ap.ReadOnly, tmpMade
	res.Processes, res.Capabilities, res.Seccomp, res.Reason = pol.Processes, pol.Capabilities, plan.Seccomp, defaulted
	res.Home = setup.Home
	setup.Plan, setup.TmpDir = &plan, tmpMade
	if pol.Filesystem != sandbox.Off && res.Enforced {
		site.Live.AddLocked(site.ID, ap.Writable, ap.ReadOnly, paths.PrivateHome)
	}
	return setup, env, nil
}

// sameRulesAsOpen checks a revive's Landlock rules against the open's
// (docs/protocol.md §19: no rule is granted through a path the agent
// made): every rule path must be one the open's plan had, still the same
// file (device and inode) — a writable directory the agent swapped for a
// link to elsewhere between two turns resolves to a path the open never
// named. The private TMPDIR (made anew for every launch) and HOME (made
// again after a retire removed it) are the sidecar's own and exempt. The
// first launch records its rules in *open. nil, or SANDBOX_CONFLICT with
// data.paths.
func sameRulesAsOpen(open *[]sandbox.Rule, rules []sandbox.Rule, tmpDir, home string) *protocol.Error {
	if *open == nil {
		*open = slices.Clone(rules)
		if *open == nil {
			*open = []sandbox.Rule{}
		}
		return nil
	}
	var moved []string
	for _, r := range rules {
		if (tmpDir != "" && r.Path == tmpDir) || (home != "" && r.Path == home) {
			continue
		}
		i := slices.IndexFunc(*open, func(o sandbox.Rule) bool { return o.Path == r.Path })
		if i < 0 || (*open)[i].Dev != r.Dev || (*open)[i].Ino != r.Ino {
			moved = append(moved, r.Path)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	e := protocol.Domain(protocol.ErrSandboxConflict, "a sandbox path is not the one the open's sandbox was made of (replaced, or a link to elsewhere, since the open)", false)
	e.Data.Paths = moved
	return e
}

// PrivateTmpParent is the directory private TMPDIRs are made in:
// os.TempDir() with its links resolved.
func PrivateTmpParent() string {
	if r, err := filepath.EvalSymlinks(os.TempDir()); err == nil {
		return r
	}
	return os.TempDir()
}

// TmpPrefix is the name prefix of session id's private TMPDIR under the
// OS temp dir.
func TmpPrefix(id string) string { return "acpx-" + id + "-tmp-" }

// RemoveSessionTmp removes the private TMPDIR(s) of session id, made by a
// sidecar that died before its proof; the recovery of that session's
// ledger entry calls it once the leftover tree is proven gone. Session ids
// are random, so the pattern names that session's only.
func RemoveSessionTmp(id string) {
	if id == "" || strings.ContainsAny(id, "/*?[\\") {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), TmpPrefix(id)+"*"))
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}
