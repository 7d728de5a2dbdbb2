// Package admission derives one session/open's admission plan before
// anything is made, and holds the checks every launch of that open repeats
// (docs/protocol.md §8 session/open, §18, §19; docs/rules.md#r2, #r4,
// #r13). Manager.Open (internal/adapter) derives a Plan once — the agent
// profile, the profile's and the permission binding's rules, the platform,
// the effective limits, the stateDir, the sessionKey, the base environment
// and the secrets errors are redacted against — and the session actor
// carries it out: CheckLaunch, the sandbox policy (SandboxConfig.Policy)
// and the launch environment at the open's launch and at every revive.
//
// It decides; what it touches is read-only but for two things it says
// where they happen: verifyCommand opens the command's file to hash it
// (the caller executes that descriptor), and SandboxConfig.SandboxPaths
// makes a missing HOME or TMPDIR (0700) the sandbox names. It starts no
// process and writes no record, ledger or lock, and it imports nothing of
// the session actor, the host side or the reaper's processes
// (internal/reaper for its Limits and Mode types and SandboxSupported,
// internal/store for ValidateKey, internal/controls for the binding's
// checks).
package admission

import (
	"os"
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/controls"
	"github.com/acpx-sidecar/acpx-sidecar/internal/profiles"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// Settings is the sidecar's side of every open's admission: what the
// Manager's configuration contributes, fixed when the Manager is made.
type Settings struct {
	// StateDir is the default stateDir (absolute) of an open that names
	// none (--state-dir); "" = none: such an open is refused.
	StateDir string
	// Mode is the containment in force (the launcher's); "" = no
	// containment: every open is refused PLATFORM_UNSUPPORTED.
	Mode reaper.Mode
	// DefaultLimits are the limits of an open that gives none of a kind
	// (--default-memory-bytes, --default-pids, --default-cpu-percent).
	DefaultLimits protocol.Limits
	// LimitsSupported says whether the machine can enforce limits l
	// (cgroup.LimitsSupported in production); nil = assume it can and
	// let the launch decide.
	LimitsSupported func(l reaper.Limits) (bool, string)
	// Env is where providers' environment comes from.
	Env ProviderEnv
	// Sandbox is the kernel sandbox's default and what the machine
	// enforces.
	Sandbox SandboxConfig
}

// Plan is one open's admission, derived once by Derive before anything
// is made; the session carries it out at its launch and at every revive.
type Plan struct {
	// Params are the open's params, StateDir defaulted to
	// Settings.StateDir.
	Params protocol.OpenParams
	// Profile is the agent's profile (internal/profiles).
	Profile profiles.Profile
	// Limits are the effective limits (Settings.Limits).
	Limits reaper.Limits
	// BaseEnv is the provider's base environment ("K=V" entries,
	// ProviderEnv.For): the launch environment is made of it.
	BaseEnv []string
	// Secrets are the values every error text of the session is redacted
	// against (ProviderEnv.Secrets; docs/protocol.md §13). Never logged.
	Secrets map[string]string
}

// CheckLaunch runs the checks every launch of an open repeats, the
// open's and each revive's (a revive launches exactly what the open did,
// checked again; docs/protocol.md §24): cwd is an existing directory
// (INVALID_PARAMS cwd), so is each additionalDirectories entry
// (checkAdditionalDirs), and the command is an executable
// (verifyCommand). It returns the opened command file to execute, nil
// when the open gave no sha256; the caller closes it.
func CheckLaunch(p protocol.OpenParams) (*os.File, *protocol.Error) {
	if fi, err := os.Stat(p.Cwd); err != nil || !fi.IsDir() {
		return nil, protocol.InvalidParams("cwd", "cwd must be an existing directory")
	}
	if e := checkAdditionalDirs(p); e != nil {
		return nil, e
	}
	return verifyCommand(p.Command)
}

// StateDir is the stateDir a request works in: given, or def
// (--state-dir) when it gives none; INVALID_PARAMS stateDir when both are
// "".
func StateDir(given, def string) (string, *protocol.Error) {
	if given == "" {
		given = def
	}
	if given == "" {
		return "", protocol.InvalidParams("stateDir", "stateDir is required (no --state-dir default)")
	}
	return given, nil
}

// CheckKey refuses a sessionKey too long for a record file name once
// encoded: INVALID_PARAMS sessionKey (store.ValidateKey).
func CheckKey(key string) *protocol.Error {
	if err := store.ValidateKey(key); err != nil {
		return protocol.InvalidParams("sessionKey", "sessionKey is too long for a record file name once encoded ("+
			strconv.Itoa(store.MaxEncodedKeyLen)+" bytes of encodeURIComponent)")
	}
	return nil
}

// Derive derives p's plan, or the first refusal, each before anything is
// made or launched, in this order: UNKNOWN_AGENT for an agent without a
// profile (docs/rules.md#r13); the profile's and the permission
// binding's rules (internal/controls: CheckSeedOpen — a mode never
// selected, an agent that cannot ask, effort or thinking the profile has
// no option for —, CheckHostMode, CheckWorkspace, CheckRetire;
// docs/agents.md); PLATFORM_UNSUPPORTED when goos is not linux or
// st.Mode is "" (docs/rules.md#r2); limits the containment cannot
// enforce (checkLimits); INVALID_PARAMS stateDir (none and no default)
// and sessionKey (CheckKey).
func (st Settings) Derive(p protocol.OpenParams, goos string) (Plan, *protocol.Error) {
	prof, ok := profiles.Lookup(p.Agent)
	if !ok {
		return Plan{}, protocol.Domain(protocol.ErrUnknownAgent, "unknown agent profile "+protocol.QuoteShort(p.Agent), false)
	}
	for _, check := range []func(profiles.Profile, protocol.OpenParams) *protocol.Error{
		controls.CheckSeedOpen,
		func(prof profiles.Profile, p protocol.OpenParams) *protocol.Error {
			return controls.CheckHostMode(prof, p, p.Mode)
		},
		controls.CheckWorkspace, controls.CheckRetire,
	} {
		if e := check(prof, p); e != nil {
			return Plan{}, e
		}
	}
	if goos != "linux" || st.Mode == "" {
		return Plan{}, protocol.Domain(protocol.ErrPlatformUnsupported, "this platform cannot contain a provider tree", false)
	}
	limits := st.Limits(p)
	if e := st.checkLimits(limits); e != nil {
		return Plan{}, e
	}
	dir, e := StateDir(p.StateDir, st.StateDir)
	if e == nil {
		e = CheckKey(p.SessionKey)
	}
	if e != nil {
		return Plan{}, e
	}
	p.StateDir = dir
	return Plan{Params: p, Profile: prof, Limits: limits, BaseEnv: st.Env.For(p), Secrets: st.Env.Secrets(p)}, nil
}
