// Package sandbox turns a session/open's `sandbox` (docs/protocol.md §19,
// "Sandbox", and §10.3 of the design: the sandbox holds against root)
// into the kernel rules its provider tree runs under: Landlock
// path-beneath rules (which paths, which access rights), TCP connect
// ports, the signal and abstract-socket scopes, a new network namespace
// for network "none", read-only bind mounts for protected paths that lie
// inside a writable one (with every directory between them and the
// writable root made a mount point, so no rename can move them), a PID
// namespace with a fresh /proc and an init of its own (processes
// "own-tree"), no capabilities (capabilities "none") and a seccomp
// filter. Build derives a Plan with no process and no system call beyond
// stat(2); Start applies it on a thread of the launcher (the sidecar, or
// the guardian) that then forks the namespace's init and the agent, so
// the agent's first instruction already runs inside it and every
// descendant inherits it (docs/architecture.md, "Kernel sandbox").
package sandbox

import (
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Filesystem modes of `sandbox.filesystem` (docs/protocol.md §19).
const (
	// Workspace: reads anything, writes only cwd, HOME, TMPDIR, writable
	// and the shell's character devices.
	Workspace = "workspace"
	// Strict: as Workspace, and reads only the system, the command's
	// installation, cwd, HOME, TMPDIR and readable.
	Strict = "strict"
	// Off: no filesystem rules.
	Off = "off"
)

// Network modes of `sandbox.network`.
const (
	// NetAll: no network restriction.
	NetAll = "all"
	// NetNone: a new network namespace (its own loopback only).
	NetNone = "none"
	// NetConnectTCP: TCP connect only to Policy.ConnectTCP ports, no bind.
	NetConnectTCP = "connectTcp"
	// NetAllow: the tree joins the network namespace of its allow list
	// (Plan.JoinNetNS, set by the caller; docs/protocol.md §19.1); Build
	// adds no rule for it.
	NetAllow = "allow"
)

// Process visibility of `sandbox.processes` (docs/protocol.md §19).
const (
	// OwnTreeProcesses: a PID namespace and a fresh /proc per tree; the
	// tree sees and reaches no process outside it.
	OwnTreeProcesses = "own-tree"
	// AllProcesses: the host's PID namespace and /proc.
	AllProcesses = "all"
)

// Capability modes of `sandbox.capabilities` (docs/protocol.md §19).
const (
	// CapsNone: every capability set empty, securebits locked.
	CapsNone = "none"
	// CapsKeep: the tree keeps the launcher's capabilities (root's all).
	CapsKeep = "keep"
)

// Signal scopes of `sandbox.signals`.
const (
	// OwnTree: the tree cannot signal, or connect to abstract UNIX
	// sockets of, processes outside it.
	OwnTree = "own-tree"
	// AllSignals: no scope.
	AllSignals = "all"
)

// Policy is a resolved sandbox request: the open's `sandbox` members over
// the sidecar's default (--default-sandbox). Paths are absolute.
type Policy struct {
	Filesystem string   // Workspace, Strict or Off
	Writable   []string // extra writable directories
	Readable   []string // extra readable directories (strict)
	Network    string   // NetAll, NetNone, NetConnectTCP or NetAllow
	ConnectTCP []uint16 // NetConnectTCP: the allowed ports
	Signals    string   // OwnTree or AllSignals
	// Processes is OwnTreeProcesses or AllProcesses.
	Processes string
	// Capabilities is CapsNone or CapsKeep.
	Capabilities string
}

// Paths are what the open and the sidecar contribute to the rules.
// Every member is an absolute path; "" members are skipped.
type Paths struct {
	// Cwd is the session's working directory: writable in both
	// filesystem modes.
	Cwd    string
	Home   string // the provider's HOME
	TmpDir string // the provider's TMPDIR
	// PrivateHome is Home when it is the key's private HOME beneath a
	// state dir (<stateDir>/homes/<key>, docs/protocol.md §19): the one
	// writable path allowed inside a protected one.
	PrivateHome string
	// Install is the command's installation (Installation).
	Install []string
	// Protected are never writable from inside: the sidecar's state dirs,
	// a file:// state store's root, the cgroup filesystem (CgroupMounts)
	// and Install.
	Protected []string
	// Secrets are files no tree may read, write or replace, in any
	// filesystem mode: the state store's master key files. Each is
	// hidden in the tree's mount namespace (Plan.Mask).
	Secrets []string
	// SecretLinks are the symbolic links met on the way to a secret by
	// the name the sidecar was given for it: a tree that may write one
	// could point it at a key of its own, so none may lie where it
	// writes.
	SecretLinks []string
}

// Applied is what Build applied, for the open result's `sandbox`
// (protocol.SandboxResult): the writable and readable paths as applied,
// sorted, the protected paths kept read-only by bind mounts, and the
// secrets hidden (Plan.Mask).
type Applied struct {
	// Writable are the rule paths granted write access, sorted.
	Writable []string
	// Readable are the rule paths granted read access only, sorted.
	Readable []string
	// ReadOnly are the protected paths bound read-only inside a writable
	// one (Plan.ReadOnly).
	ReadOnly []string
	// Masked are the secrets hidden from the tree (Plan.Mask).
	Masked []string
}

// ConflictError is Build's refusal: a writable path is, or lies inside,
// a protected one (it can never be writable), or contains one and the
// caller cannot keep it read-only (no private mount namespace). Paths
// are the protected paths concerned (protocol data.paths).
type ConflictError struct {
	// Paths are the protected paths (or secrets) in conflict, sorted.
	Paths []string
	// Why is a human-readable sentence saying what the conflict is.
	Why string
}

// Error returns Why followed by the comma-separated Paths.
func (e *ConflictError) Error() string {
	return "sandbox: " + e.Why + ": " + strings.Join(e.Paths, ", ")
}

// ErrBadPolicy is returned (wrapped) by Build for a Policy whose modes
// are not among the constants above.
var ErrBadPolicy = errors.New("sandbox: bad policy")

// SystemReadable are the system paths strict mode reads (read-only).
var SystemReadable = []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys"}

// Devices are the character devices (and /dev/pts) a shell needs,
// readable and writable (with ioctl) in both filesystem modes.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/urandom", "/dev/random", "/dev/ptmx"}

// DevShm is the shared-memory directory, writable in both modes.
const DevShm = "/dev/shm"

// BuildOptions are what the caller can do besides Landlock.
type BuildOptions struct {
	// BindReadOnly: the launcher can make a private mount namespace
	// (CAP_SYS_ADMIN), so a protected path inside a writable one is kept
	// read-only by a bind mount instead of refusing the open, and a
	// seccomp plan also gets DenyUserNS.
	BindReadOnly bool
	// Exists reports whether a path exists and whether it is a
	// directory; nil = os.Stat, which also records each rule's identity
	// (Rule.Dev, Rule.Ino). Tests inject it (rules then carry none).
	Exists func(path string) (exists, dir bool)
}

// Build derives the Plan for pol from paths (docs/protocol.md §19). Every
// path in paths and pol must be absolute and already clean (callers
// resolve symlinks: EvalSymlinks); a path that does not exist is left
// out of the rules (Landlock cannot name it) and of Applied.
//
// Errors: ErrBadPolicy (wrapped) for unknown modes; *ConflictError when a
// writable path is or lies inside a protected one, or contains one and
// opt.BindReadOnly is false, or for a secret the tree could reach and
// the plan cannot hide (planSecrets).
func Build(pol Policy, paths Paths, opt BuildOptions) (Plan, Applied, error) {
	var plan Plan
	var ap Applied
	exists := opt.Exists
	identity := func(string) (uint64, uint64) { return 0, 0 }
	resolve := func(p string) string { return p }
	if exists == nil {
		exists, identity, resolve = statPath, statIdentity, resolvedPath
	}
	switch pol.Filesystem {
	case Workspace, Strict, Off:
	default:
		return plan, ap, errors.Join(ErrBadPolicy, errors.New("filesystem "+pol.Filesystem))
	}
	switch pol.Signals {
	case OwnTree:
		plan.Scoped = ScopeSignal | ScopeAbstractUnixSocket
	case AllSignals:
	default:
		return plan, ap, errors.Join(ErrBadPolicy, errors.New("signals "+pol.Signals))
	}
	switch pol.Network {
	case NetAll, NetAllow:
	case NetNone:
		plan.NewNetNS = true
	case NetConnectTCP:
		plan.HandledNet = AccessNetBindTCP | AccessNetConnectTCP
		plan.ConnectTCP = uniquePorts(pol.ConnectTCP)
	default:
		return plan, ap, errors.Join(ErrBadPolicy, errors.New("network "+pol.Network))
	}
	switch pol.Processes {
	case OwnTreeProcesses:
		plan.NewPIDNS = true // with an IPC namespace and a private /dev/shm (Start)
	case AllProcesses:
	default:
		return plan, ap, errors.Join(ErrBadPolicy, errors.New("processes "+pol.Processes))
	}
	switch pol.Capabilities {
	case CapsNone:
		plan.DropCaps = true
	case CapsKeep:
	default:
		return plan, ap, errors.Join(ErrBadPolicy, errors.New("capabilities "+pol.Capabilities))
	}
	if pol.Filesystem == Off {
		return plan, ap, nil
	}
	// Any filesystem sandbox carries the seccomp filter (docs/protocol.md
	// §19); where the launcher can make a mount namespace, new user
	// namespaces are refused by the kernel too (clone3 cannot be
	// filtered by its flags).
	plan.Seccomp, plan.DenyUserNS = true, opt.BindReadOnly
	writable := nonEmpty(append([]string{paths.Cwd, paths.Home, paths.TmpDir}, pol.Writable...))
	if !plan.NewPIDNS {
		// The host's /dev/shm, which the tree writes (its rule below): a
		// never-writable path or a secret there is guarded as in cwd. With
		// a PID namespace the tree gets a fresh tmpfs there instead.
		writable = append(writable, DevShm)
	}
	if err := checkConflicts(writable, nonEmpty(paths.Protected), paths.PrivateHome, opt.BindReadOnly, &plan, &ap); err != nil {
		return Plan{}, Applied{}, err
	}
	readable := []string{"/"}
	if pol.Filesystem == Strict {
		readable = nonEmpty(slices.Concat(SystemReadable, paths.Install, pol.Readable))
	}
	reach := make([]string, 0, len(readable)+len(writable))
	for _, p := range append(slices.Clone(readable), writable...) {
		reach = append(reach, resolve(p))
	}
	if err := planSecrets(paths, writable, reach, opt.BindReadOnly, pol.Capabilities == CapsKeep, exists, &plan, &ap); err != nil {
		return Plan{}, Applied{}, err
	}
	if h := paths.PrivateHome; h != "" {
		for _, ro := range plan.ReadOnly {
			if h != ro && Within(h, ro) {
				plan.ReadWrite = []string{h} // its state dir is read-only in a writable path; it is not
			}
		}
	}
	plan.HandledFS = HandledFS
	add := func(p string, access uint64) {
		// A rule path is opened without following links at launch: a
		// system path that is a link (/lib -> usr/lib) is named resolved.
		p = resolve(p)
		ok, dir := exists(p)
		if !ok {
			return
		}
		if !dir {
			access &= FileAccess
		}
		for _, have := range plan.FS {
			if have.Path == p && have.Access == access {
				return
			}
		}
		r := Rule{Path: p, Access: access}
		if !Within(p, "/proc") && !(plan.NewPIDNS && p == DevShm) {
			// A fresh /proc and /dev/shm (processes own-tree) are other
			// files than the host's.
			r.Dev, r.Ino = identity(p)
		}
		plan.FS = append(plan.FS, r)
	}
	for _, p := range uniqueSorted(readable) {
		add(p, ReadAccess)
	}
	for _, p := range uniqueSorted(writable) {
		add(p, ReadAccess|WriteAccess)
	}
	for _, d := range Devices {
		add(d, DeviceAccess)
	}
	add(DevShm, ReadAccess|WriteAccess)
	for _, r := range plan.FS {
		if r.Access&WriteAccess&^FileAccess != 0 || r.Access&AccessFSWriteFile != 0 {
			ap.Writable = append(ap.Writable, r.Path)
		} else {
			ap.Readable = append(ap.Readable, r.Path)
		}
	}
	ap.Writable, ap.Readable = uniqueSorted(ap.Writable), uniqueSorted(ap.Readable)
	return plan, ap, nil
}

// checkConflicts applies the "never writable" rule: a writable path that
// is or lies inside a protected one is a conflict (but for privateHome,
// the key's own HOME beneath its state dir); a protected path that lies
// inside a writable one becomes a read-only bind mount (bind), with
// every directory between it and the outermost writable root holding it
// pinned (bound onto itself: a mount point cannot be renamed, so no
// rename inside the writable root can move the protected path away from
// the name the sidecar uses), or a conflict.
func checkConflicts(writable, protected []string, privateHome string, bind bool, plan *Plan, ap *Applied) error {
	var inside, under []string
	for _, w := range writable {
		for _, p := range protected {
			switch {
			case w == privateHome && w != "" && w != p && Within(w, p):
			case Within(w, p):
				inside = append(inside, p)
			case Within(p, w):
				under = append(under, p)
			}
		}
	}
	if len(inside) > 0 {
		return &ConflictError{Paths: uniqueSorted(inside), Why: "a writable path is, or lies inside, a path that is never writable"}
	}
	under = uniqueSorted(under)
	if len(under) > 0 && !bind {
		return &ConflictError{Paths: under, Why: "a writable path holds a path that is never writable, and this sidecar cannot make a private mount namespace to keep it read-only"}
	}
	plan.ReadOnly, ap.ReadOnly = under, under
	plan.Pin = pins(writable, under)
	return nil
}

// pins are the directories strictly between each path of under and the
// outermost writable root holding it, outermost first: bound onto
// themselves they cannot be renamed (EBUSY), nor can any directory above
// them inside the root, so the path keeps its name.
func pins(writable, under []string) []string {
	var out []string
	for _, p := range under {
		root := ""
		for _, w := range writable {
			if Within(p, w) && p != w && (root == "" || len(w) < len(root)) {
				root = w
			}
		}
		if root == "" {
			continue
		}
		for d := filepath.Dir(p); d != root && Within(d, root); d = filepath.Dir(d) {
			out = append(out, d)
		}
	}
	out = uniqueSorted(out)
	// Outermost first: a shorter path is never beneath a longer one.
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") < strings.Count(out[j], "/") })
	return out
}

// Within reports whether path is dir or lies beneath it (both clean and
// absolute).
func Within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

func nonEmpty(ps []string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p != "" {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

func uniqueSorted(ps []string) []string {
	out := slices.Clone(ps)
	sort.Strings(out)
	return slices.Compact(out)
}

func uniquePorts(ps []uint16) []uint16 {
	out := slices.Clone(ps)
	slices.Sort(out)
	return slices.Compact(out)
}
