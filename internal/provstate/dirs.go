package provstate

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/acpx-sidecar/acpx-sidecar/internal/fspath"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Which directories are a session's provider state (docs/protocol.md §24):
// resolved from the open or the agent's profile, and refused where an
// archive must never read or a restore write. That one live session at a
// time holds them is registry.ProviderDirs' (Claim, called by the
// session's admission: internal/session/admitinput.go).

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
	// (config.Config.StateSecrets).
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
		get := func(k string) string { return profiles.EnvValue(d.Env, k) }
		for _, sd := range d.Profile.StateDirs {
			if p := sd.Resolve(get); p != "" {
				out = append(out, statestore.Source{Name: sd.Name, Path: p, Leave: sd.Leave})
			}
		}
	}
	home := ""
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		home = fspath.ResolveExisting(h)
	}
	cwd := fspath.ResolveExisting(d.Cwd)
	var own []string // the key's private HOME, when the session has one
	if d.PrivateHome != "" {
		own = []string{fspath.ResolveExisting(d.PrivateHome)}
	}
	var protected []string
	for _, dir := range d.StateDirs {
		protected = append(protected, fspath.ResolveExisting(dir))
	}
	var secrets []string
	for _, dir := range d.Secrets {
		secrets = append(secrets, fspath.ResolveExisting(dir))
	}
	for i := range out {
		real := fspath.ResolveExisting(out[i].Path)
		out[i].Path, out[i].Strict = real, true
		bad := ""
		switch {
		case systemDir(real):
			bad = "is a system directory"
		case home != "" && fspath.BeneathAny(home, []string{real}):
			bad = "is or holds the sidecar's own HOME (give the agent a HOME of its own, or name stateDirs)"
		case fspath.BeneathAny(cwd, []string{real}):
			bad = "holds the workspace (cwd), which is never archived"
		case !fspath.BeneathAny(real, own) && (fspath.BeneathAny(real, protected) || fspath.HoldsAny(real, protected)):
			bad = "is, holds or lies inside a state directory of this sidecar"
		case fspath.BeneathAny(real, secrets) || fspath.HoldsAny(real, secrets):
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
	return slices.Contains(systemDirs, p) || fspath.BeneathAny(p, []string{"/proc", "/sys", "/dev", "/usr", "/etc", "/boot", "/bin", "/sbin", "/lib", "/lib64"})
}
