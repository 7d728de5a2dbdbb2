package adapter

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Which directories are a session's provider state (docs/protocol.md §24):
// resolved from the open or the agent's profile, refused where an archive
// must never read or a restore write, and held by one live session at a
// time. provstate.go publishes and restores them.

// stateSources resolves the open's provider-state directories in the
// launch environment env: the open's stateDirs, else the profile's
// (profiles.StateDir), each with the links of its existing part resolved
// now (before the agent runs) and published Strict: a publication refuses
// a directory that has become a link since (statestore.Source.Strict). With
// a store, a directory that is a system directory, is or holds the
// sidecar's own HOME, holds the workspace, or is, holds or lies inside a
// state dir of this sidecar, the state store's root or a master key file
// (Config.StateSecrets) is refused STATE_CONFLICT with data.paths: an
// archive never carries them, and a restore never writes there (issue 29's
// trial) — but for the session's own private HOME (s.end.home, set by
// setupSandbox first) and what lies in it, the one place under a state dir
// its tree writes (docs/protocol.md §19, §24). One another live session of
// this sidecar uses is refused too (Manager.provDirs.Claim).
func (s *session) stateSources(env []string) ([]statestore.Source, *protocol.Error) {
	var out []statestore.Source
	if len(s.open.StateDirs) > 0 {
		for name, dir := range s.open.StateDirs {
			out = append(out, statestore.Source{Name: name, Path: dir})
		}
	} else {
		get := func(k string) string { return envValue(env, k) }
		for _, sd := range s.prof.StateDirs {
			if p := sd.Resolve(get); p != "" {
				out = append(out, statestore.Source{Name: sd.Name, Path: p, Leave: sd.Leave})
			}
		}
	}
	home := ""
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		home = resolveExisting(h)
	}
	cwd := resolveExisting(s.open.Cwd)
	var own []string // the key's private HOME, when the session has one
	if s.end.home != "" {
		own = []string{resolveExisting(s.end.home)}
	}
	var protected []string
	for _, d := range s.m.stateDirs(s.stateDir) {
		protected = append(protected, resolveExisting(d))
	}
	var secrets []string
	for _, d := range s.m.cfg.StateSecrets {
		secrets = append(secrets, resolveExisting(d))
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
