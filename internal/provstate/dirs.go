package provstate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Which directories are a session's provider state (docs/protocol.md §24):
// resolved from the open or the agent's profile, and refused where an
// archive must never read or a restore write. That one live session at a
// time holds them is the adapter's (Manager.claimStateDirs).

// Dirs is what Sources resolves and checks a session's provider-state
// directories against. Paths are absolute.
type Dirs struct {
	// Named are the open's stateDirs (name → directory); when any, the
	// profile's are not used.
	Named map[string]string
	// Profile is the agent's profile (its StateDirs, profiles.StateDir).
	Profile profiles.Profile
	// Env is the launch environment ("K=V" entries; the last of a name
	// wins) the profile's directories resolve in.
	Env []string
	// Cwd is the session's workspace.
	Cwd string
	// PrivateHome is the key's private HOME ("" when the session has
	// none; docs/protocol.md §19).
	PrivateHome string
	// StateDirs are this sidecar's state directories (--state-dir, the
	// open's stateDir, every open store's).
	StateDirs []string
	// Secrets are the state store's root and the master key files
	// (adapter Config.StateSecrets).
	Secrets []string
}

// Sources resolves the open's provider-state directories in the launch
// environment d.Env: the open's stateDirs, else the profile's
// (profiles.StateDir), each with the links of its existing part resolved
// now (before the agent runs) and published Strict: a publication refuses
// a directory that has become a link since (statestore.Source.Strict). A
// directory that is a system directory, is or holds the sidecar's own
// HOME, holds the workspace, or is, holds or lies inside a state dir of
// this sidecar, the state store's root or a master key file (d.Secrets)
// is refused STATE_CONFLICT with data.paths: an archive never carries
// them, and a restore never writes there (issue 29's trial) — but for the
// session's own private HOME (d.PrivateHome) and what lies in it, the one
// place under a state dir its tree writes (docs/protocol.md §19, §24).
func Sources(d Dirs) ([]statestore.Source, *protocol.Error) {
	var out []statestore.Source
	if len(d.Named) > 0 {
		for name, dir := range d.Named {
			out = append(out, statestore.Source{Name: name, Path: dir})
		}
	} else {
		get := func(k string) string { return envValue(d.Env, k) }
		for _, sd := range d.Profile.StateDirs {
			if p := sd.Resolve(get); p != "" {
				out = append(out, statestore.Source{Name: sd.Name, Path: p, Leave: sd.Leave})
			}
		}
	}
	home := ""
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		home = resolveExisting(h)
	}
	cwd := resolveExisting(d.Cwd)
	var own []string // the key's private HOME, when the session has one
	if d.PrivateHome != "" {
		own = []string{resolveExisting(d.PrivateHome)}
	}
	var protected []string
	for _, dir := range d.StateDirs {
		protected = append(protected, resolveExisting(dir))
	}
	var secrets []string
	for _, dir := range d.Secrets {
		secrets = append(secrets, resolveExisting(dir))
	}
	for i := range out {
		real := resolveExisting(out[i].Path)
		out[i].Path, out[i].Strict = real, true
		bad := ""
		switch {
		case systemDir(real):
			bad = "is a system directory"
		case home != "" && beneathAny(home, []string{real}):
			bad = "is or holds the sidecar's own HOME (give the agent a HOME of its own, or name stateDirs)"
		case beneathAny(cwd, []string{real}):
			bad = "holds the workspace (cwd), which is never archived"
		case !beneathAny(real, own) && (beneathAny(real, protected) || holdsAny(real, protected)):
			bad = "is, holds or lies inside a state directory of this sidecar"
		case beneathAny(real, secrets) || holdsAny(real, secrets):
			bad = "is, holds or lies inside the state store or a master key file of this sidecar"
		}
		if bad != "" {
			e := protocol.Domain(protocol.ErrStateConflict, "the provider-state directory "+out[i].Name+" "+bad, false)
			e.Data.Paths = []string{real}
			return nil, e
		}
	}
	return out, nil
}

// systemDirs are where no provider state may be published from or restored
// to: the root, the system's own directories, and the kernel's
// filesystems (and anything beneath the last).
var systemDirs = []string{"/", "/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/opt", "/root", "/run", "/sbin", "/srv", "/usr", "/var", "/home"}

func systemDir(p string) bool {
	return slices.Contains(systemDirs, p) || beneathAny(p, []string{"/proc", "/sys", "/dev", "/usr", "/etc", "/boot", "/bin", "/sbin", "/lib", "/lib64"})
}

// The path helpers below are copies of internal/adapter's (sandboxlive.go,
// sandbox.go), which this package may not import.

// envValue is the last value of name in env ("K=V" entries).
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// resolveExisting is dir with the symlinks of its longest existing prefix
// resolved: where dir is, or will be once created.
func resolveExisting(dir string) string {
	dir = filepath.Clean(dir)
	rest := ""
	for p := dir; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return dir
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// holdsAny reports whether some path of paths lies beneath dir.
func holdsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if p != dir && beneathAny(p, []string{dir}) {
			return true
		}
	}
	return false
}

// beneathAny reports whether p is one of roots or lies beneath one.
func beneathAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}
