package admission

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/sandbox"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// SandboxConfig is the sidecar's kernel sandbox (docs/protocol.md §19).
// The zero value sandboxes nothing by default (tests' Config).
type SandboxConfig struct {
	// Default is the filesystem mode of an open that names none
	// (--default-sandbox): sandbox.Workspace, Strict, Off or "" (Off).
	Default string
	// Caps is what this machine enforces (sandbox.Probe, possibly
	// limited by --assume-landlock-abi).
	Caps sandbox.Caps
	// Protected are never writable from inside besides every state dir
	// and the command's installation: the cgroup filesystem
	// (sandbox.CgroupMounts). nil = none.
	Protected []string
	// StoreDir is the root of a file:// state store (--state-store):
	// never writable from inside, exactly as a state dir, since a tree
	// that could write it could end or rewrite every key's published
	// state. "" = none (or an s3:// store).
	StoreDir string
	// Secrets are the sidecar's secret files, which no tree with a
	// filesystem sandbox may read, write or replace: the state store's
	// master key files (--state-key-file, --state-old-key-file). nil =
	// none.
	Secrets []string
}

// defaultFS is the filesystem mode an open gets when it names none
// (sandbox.Workspace, Strict or Off).
func (c SandboxConfig) defaultFS() string {
	if c.Default == "" {
		return sandbox.Off
	}
	return c.Default
}

// SandboxCaps is initialize.capabilities.sandbox (and doctor's): what
// caps enforces and the default filesystem mode in force: def ("" =
// off), or "off" when caps cannot enforce it (a filesystem sandbox with
// signals own-tree) or mode cannot carry a sandbox. egress is
// egress.Probe's result: nil, allow lists are enforceable (networkAllow)
// where mode carries a sandbox.
func SandboxCaps(caps sandbox.Caps, def string, mode reaper.Mode, egress error) *protocol.SandboxCaps {
	reason := caps.Reason
	if def == "" || !caps.Filesystem() || !caps.Scopes() || !reaper.SandboxSupported(mode) {
		def = sandbox.Off
	}
	if !reaper.SandboxSupported(mode) && mode != "" {
		reason = "containment " + string(mode) + " cannot apply a sandbox"
	}
	supported := reaper.SandboxSupported(mode) || mode == ""
	return &protocol.SandboxCaps{LandlockABI: caps.LandlockABI, Filesystem: caps.Filesystem(), ConnectTCP: caps.ConnectTCP(),
		Signals: caps.Scopes(), NetworkNone: caps.Namespaces, NetworkAllow: egress == nil && supported, ReadOnlyBinds: caps.Namespaces,
		Processes: caps.PIDNamespace && supported, Capabilities: supported, Seccomp: caps.Seccomp && supported,
		UserNamespacesRefused: caps.Namespaces && caps.Seccomp && supported,
		Default:               def, Reason: reason, ProcessesReason: caps.ProcessesReason}
}

// Policy resolves the open's sandbox over the default: filesystem from
// the open or the default, network "all" unless given, signals and
// processes "own-tree" and capabilities "none" whenever a filesystem
// sandbox is on unless given (else "all", "all", "keep"). A processes
// "own-tree" only defaulted on a machine that cannot enforce it becomes
// "all", with why in defaulted (docs/protocol.md §19: a default that
// cannot be enforced is reported, not fatal).
func (c SandboxConfig) Policy(p protocol.OpenParams) (pol sandbox.Policy, defaulted string) {
	pol = c.basePolicy(p)
	named := p.Sandbox != nil && p.Sandbox.Processes != ""
	if pol.Processes == sandbox.OwnTreeProcesses && !named && !c.Caps.PIDNamespace {
		pol.Processes = sandbox.AllProcesses
		why := c.Caps.ProcessesReason
		if why == "" {
			why = "no PID namespace"
		}
		defaulted = "processes all: own-tree is not enforceable here (" + why + ")"
	}
	return pol, defaulted
}

// basePolicy is Policy before the machine's capabilities are looked at.
func (c SandboxConfig) basePolicy(p protocol.OpenParams) sandbox.Policy {
	pol := sandbox.Policy{Filesystem: c.defaultFS(), Network: sandbox.NetAll}
	if sb := p.Sandbox; sb != nil {
		if sb.Filesystem != "" {
			pol.Filesystem = sb.Filesystem
		}
		// Copies: the launch resolves them in place.
		pol.Writable, pol.Readable = slices.Clone(sb.Writable), slices.Clone(sb.Readable)
		if n := sb.Network; n != nil {
			pol.Network = n.Mode
			for _, port := range n.ConnectTCP {
				pol.ConnectTCP = append(pol.ConnectTCP, uint16(port))
			}
		}
		pol.Signals = sb.Signals
		pol.Processes, pol.Capabilities = sb.Processes, sb.Capabilities
	}
	// The open's additionalDirectories are the agent's workspace too
	// (docs/protocol.md §23): writable like cwd.
	pol.Writable = append(pol.Writable, p.AdditionalDirectories...)
	on := pol.Filesystem != sandbox.Off
	pick := func(v *string, whenOn, whenOff string) {
		if *v == "" {
			*v = whenOff
			if on {
				*v = whenOn
			}
		}
	}
	pick(&pol.Signals, sandbox.OwnTree, sandbox.AllSignals)
	pick(&pol.Processes, sandbox.OwnTreeProcesses, sandbox.AllProcesses)
	pick(&pol.Capabilities, sandbox.CapsNone, sandbox.CapsKeep)
	return pol
}

// HostHome reports whether the open names its HOME itself: in env, or in
// inheritEnv. A HOME that only --inherit-env passes is the sidecar's own,
// which under a filesystem sandbox is replaced by the key's private one
// (docs/protocol.md §19: the sidecar's HOME never reaches a sandboxed
// agent).
func HostHome(p protocol.OpenParams) bool {
	if _, ok := p.Env["HOME"]; ok {
		return true
	}
	return slices.Contains(p.InheritEnv, "HOME")
}

// hostTmpDir reports whether the open names its TMPDIR itself: in env,
// or in inheritEnv. A TMPDIR that only --inherit-env passes is the
// sidecar's own, which every session would share — and beneath which the
// sidecar makes other sessions' private TMPDIRs — so under a filesystem
// sandbox it is replaced by a private one like no TMPDIR at all
// (docs/protocol.md §19, "HOME and TMPDIR"; found by a fresh-user trial).
func hostTmpDir(p protocol.OpenParams) bool {
	if _, ok := p.Env["TMPDIR"]; ok {
		return true
	}
	return slices.Contains(p.InheritEnv, "TMPDIR")
}

// NonNil is s, or an empty list for nil (a JSON [] rather than null).
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SandboxPaths are the open's places for sandbox.Build: cwd, the launch
// environment env's HOME and TMPDIR (each made, 0700, if it does not
// exist and a filesystem sandbox is on), the command's installation,
// what is never writable: protected (the cgroup filesystem,
// SandboxConfig.Protected), the installation, stateDirs (every state
// dir of this sidecar) and the file:// store's root (StoreDir), and what
// is never readable: Secrets, with the links on the way to each.
// Symlinks are resolved.
func (c SandboxConfig) SandboxPaths(p protocol.OpenParams, pol sandbox.Policy, env []string, stateDirs []string) sandbox.Paths {
	real := func(d string) string {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return r
		}
		return ""
	}
	var paths sandbox.Paths
	paths.Cwd = real(p.Cwd)
	if home := profiles.EnvValue(env, "HOME"); filepath.IsAbs(home) {
		if pol.Filesystem != sandbox.Off {
			_ = os.MkdirAll(home, 0o700)
		}
		paths.Home = real(home)
	}
	if tmp := profiles.EnvValue(env, "TMPDIR"); filepath.IsAbs(tmp) && (pol.Filesystem == sandbox.Off || hostTmpDir(p)) {
		if pol.Filesystem != sandbox.Off {
			_ = os.MkdirAll(tmp, 0o700)
		}
		paths.TmpDir = real(tmp)
	}
	paths.Install = sandbox.Installation(p.Command.Path, p.Command.Args, profiles.EnvValue(env, "PATH"))
	paths.Protected = append(slices.Clone(c.Protected), paths.Install...)
	for _, d := range append(slices.Clone(stateDirs), c.StoreDir) {
		if d == "" {
			continue
		}
		if r := real(d); r != "" {
			paths.Protected = append(paths.Protected, r)
		} else {
			paths.Protected = append(paths.Protected, filepath.Clean(d))
		}
	}
	for _, k := range c.Secrets {
		if !filepath.IsAbs(k) {
			continue
		}
		if r := real(k); r != "" {
			paths.Secrets = append(paths.Secrets, r)
		} else {
			paths.Secrets = append(paths.Secrets, filepath.Clean(k))
		}
		paths.SecretLinks = append(paths.SecretLinks, linksOn(k)...)
	}
	return paths
}

// linksOn are the symbolic links met when absolute path p is resolved
// as the kernel does — a ".." after a link leaves the link's target, so p
// is not cleaned first — (a chain of links included), each named by where
// it lies (its directory resolved): the places an agent that could write
// them could point p elsewhere. It stops at a missing name or after 40
// links.
func linksOn(p string) []string {
	var out []string
	cur, rest := "/", strings.Split(p, "/")
	for len(rest) > 0 && len(out) < 40 {
		part := rest[0]
		rest = rest[1:]
		if part == "" || part == "." {
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return out
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		out = append(out, next)
		target, err := os.Readlink(next)
		if err != nil {
			return out
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return out
}
