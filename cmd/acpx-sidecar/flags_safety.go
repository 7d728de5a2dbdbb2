package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper/cgroup"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// inheritEnvFlag is --inherit-env (docs/protocol.md §2, §18.1): minimal,
// all or none. The old boolean spellings keep the meaning they had:
// true/1 = all, false/0 = none (old is set to the spelling given, so the
// sidecar logs a warning). A bare --inherit-env (the old bool form without
// a value) is not accepted: it is a flag error, exit status 2, so that
// `--inherit-env minimal` works as a normal string flag.
type inheritEnvFlag struct{ policy, old *string }

// String is the policy set; "" for the zero flag the flag package makes to
// tell a default from its zero value (so -h prints "(default minimal)").
func (f *inheritEnvFlag) String() string {
	if f == nil || f.policy == nil {
		return ""
	}
	return *f.policy
}

func (f *inheritEnvFlag) Set(v string) error {
	switch strings.ToLower(v) {
	case protocol.InheritMinimal, protocol.InheritAll, protocol.InheritNone:
		*f.policy, *f.old = strings.ToLower(v), ""
	case "true", "1", "t":
		*f.policy, *f.old = protocol.InheritAll, v
	case "false", "0", "f":
		*f.policy, *f.old = protocol.InheritNone, v
	default:
		return fmt.Errorf("must be minimal, all or none")
	}
	return nil
}

// limitFlags are --default-memory-bytes, --default-pids and
// --default-cpu-percent: the limits of an open that gives none of that
// kind (docs/protocol.md §18.2); 0 = no limit.
type limitFlags struct{ memoryBytes, pids, cpuPercent int64 }

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&l.memoryBytes, "default-memory-bytes", 0, "memory.max of each provider cgroup when the open gives no limits.memoryBytes, bytes (0 = none)")
	fs.Int64Var(&l.pids, "default-pids", 0, "pids.max of each provider cgroup when the open gives no limits.pids (0 = none)")
	fs.Int64Var(&l.cpuPercent, "default-cpu-percent", 0, "cpu.max of each provider cgroup when the open gives no limits.cpuPercent, percent of one CPU (0 = none)")
}

// check validates the defaults with the open's own rules.
func (l *limitFlags) check() error {
	for _, c := range []struct {
		flag string
		v    int64
		min  int64
		max  int64
	}{{"--default-memory-bytes", l.memoryBytes, protocol.MinMemoryBytes, protocol.MaxMemoryBytes},
		{"--default-pids", l.pids, protocol.MinPids, protocol.MaxPids},
		{"--default-cpu-percent", l.cpuPercent, protocol.MinCPUPercent, protocol.MaxCPUPercent}} {
		if c.v != 0 && (c.v < c.min || c.v > c.max) {
			return fmt.Errorf("%s must be 0 (none) or %d-%d", c.flag, c.min, c.max)
		}
	}
	return nil
}

// defaults is the flags as protocol.Limits (nil members for 0).
func (l *limitFlags) defaults() protocol.Limits {
	var d protocol.Limits
	if l.memoryBytes != 0 {
		v := l.memoryBytes
		d.MemoryBytes = &v
	}
	if l.pids != 0 {
		v := l.pids
		d.Pids = &v
	}
	if l.cpuPercent != 0 {
		v := l.cpuPercent
		d.CPUPercent = &v
	}
	return d
}

// doctorEnv reports the --inherit-env policy and the names of the
// sidecar's environment it would pass to providers (never the values),
// without withheld (the state store's credential variables,
// statestore.CredentialEnv), of which those this environment defines are
// listed as "withheld".
func doctorEnv(policy string, withheld []string) map[string]any {
	names, held := []string{}, []string{}
	for _, kv := range admission.InheritedEnv(policy, os.Environ()) {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(withheld, k) {
			held = append(held, k)
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	out := map[string]any{"policy": policy, "passes": names}
	if len(held) > 0 {
		sort.Strings(held)
		out["withheld"] = held
	}
	return out
}

// doctorLimits reports, per kind of limit, whether this machine's
// containment can enforce it, with what ("mechanism": "cgroup v2 memory"
// or, on a hybrid host, "cgroup v1 memory"; cgroup.LimitsMechanism), and
// why not (docs/operations.md, "Per-session limits").
func doctorLimits(containment string) map[string]any {
	out := map[string]any{}
	for kind, l := range map[string]reaper.Limits{"memoryBytes": {MemoryBytes: 1 << 30}, "pids": {Pids: 64}, "cpuPercent": {CPUPercent: 100}} {
		ok, why := cgroup.LimitsSupported(l)
		if containment != string(reaper.ModeCgroup) {
			ok, why = false, "limits need cgroup containment"
		}
		e := map[string]any{"enforceable": ok}
		if !ok {
			e["reason"] = why
		} else {
			e["mechanism"] = cgroup.LimitsMechanism(l)
		}
		out[kind] = e
	}
	return out
}

// checkDefaultLimits refuses --default-* limits that the containment in
// force (mode; "" = none) cannot enforce (docs/protocol.md §18.2).
func checkDefaultLimits(l limitFlags, mode reaper.Mode) error {
	rl := reaper.Limits{MemoryBytes: l.memoryBytes, Pids: l.pids, CPUPercent: l.cpuPercent}
	if !rl.Any() {
		return nil
	}
	names := []string{}
	for _, f := range []struct {
		n string
		v int64
	}{{"--default-memory-bytes", l.memoryBytes}, {"--default-pids", l.pids}, {"--default-cpu-percent", l.cpuPercent}} {
		if f.v != 0 {
			names = append(names, f.n)
		}
	}
	flags := strings.Join(names, ", ")
	if !mode.EnforcesLimits() {
		verb := "need"
		if len(names) == 1 {
			verb = "needs"
		}
		return fmt.Errorf("%s %s cgroup containment", flags, verb)
	}
	if ok, why := cgroup.LimitsSupported(rl); !ok {
		return fmt.Errorf("%s cannot be enforced: %s", flags, why)
	}
	return nil
}
