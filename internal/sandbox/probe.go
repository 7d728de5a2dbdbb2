package sandbox

import (
	"fmt"
	"strconv"
	"strings"
)

// Caps is what this machine can enforce (initialize.capabilities.sandbox,
// `acpx-sidecar doctor`; docs/protocol.md §19): the Landlock ABI version
// (0 = none); whether the sidecar can make namespaces (CAP_SYS_ADMIN:
// network "none", read-only bind mounts, new user namespaces refused);
// whether it can give a tree its own PID namespace and /proc (processes
// "own-tree": namespaces, and a procfs that takes the "pidns" mount
// option, Linux 6.18); and whether the kernel has seccomp filters.
// (Capabilities "none" needs nothing probed: a tree of a sidecar that
// holds none has none to lose.)
type Caps struct {
	// LandlockABI is the kernel's Landlock ABI version; 0 when Landlock
	// is unavailable (Reason says why).
	LandlockABI int `json:"landlockAbi"`
	// Namespaces: this process holds CAP_SYS_ADMIN in its effective set,
	// so it can make mount and network namespaces.
	Namespaces bool `json:"namespaces"`
	// PIDNamespace: a tree can get its own PID namespace and a fresh
	// /proc (Namespaces, and a procfs with the "pidns" mount option);
	// ProcessesReason says why not when false.
	PIDNamespace bool `json:"pidNamespace"`
	// Seccomp: the kernel has seccomp (PR_GET_SECCOMP succeeded).
	Seccomp bool   `json:"seccomp"`
	Reason  string `json:"reason,omitempty"` // why Landlock is unavailable, if it is
	// ProcessesReason says why processes "own-tree" is unavailable.
	ProcessesReason string `json:"processesReason,omitempty"`
}

// Limit returns c with the Landlock ABI lowered to at most abi (a test
// simulates an older kernel, or none with 0: --assume-landlock-abi).
func (c Caps) Limit(abi int) Caps {
	if abi >= 0 && abi < c.LandlockABI {
		c.LandlockABI = abi
		c.Reason = "Landlock ABI limited to " + strconv.Itoa(abi) + " by --assume-landlock-abi"
	}
	return c
}

// Filesystem reports whether a filesystem sandbox is enforceable.
func (c Caps) Filesystem() bool { return c.LandlockABI >= FSMinABI }

// ConnectTCP reports whether TCP port rules are enforceable.
func (c Caps) ConnectTCP() bool { return c.LandlockABI >= NetMinABI }

// Scopes reports whether signals "own-tree" is enforceable.
func (c Caps) Scopes() bool { return c.LandlockABI >= ScopesMinABI }

// UnsupportedError names the parts of a Plan this machine cannot
// enforce (PLATFORM_UNSUPPORTED for an explicit request).
type UnsupportedError struct {
	// Missing holds one human-readable sentence per part that cannot be
	// enforced (what it needs and what this machine has).
	Missing []string
}

// Error lists every missing part, separated by "; ".
func (e *UnsupportedError) Error() string {
	return "the kernel cannot enforce this sandbox: " + strings.Join(e.Missing, "; ")
}

// Check returns nil if c can enforce all of p, else an *UnsupportedError
// naming every part it cannot (never a downgrade).
func (c Caps) Check(p *Plan) error {
	var miss []string
	need := func(ok bool, what string, abi int) {
		if !ok {
			miss = append(miss, fmt.Sprintf("%s needs Landlock ABI %d (this kernel: %d)", what, abi, c.LandlockABI))
		}
	}
	if p.HandledFS != 0 {
		need(c.Filesystem(), "a filesystem sandbox", FSMinABI)
	}
	if p.HandledNet != 0 {
		need(c.ConnectTCP(), "network connectTcp", NetMinABI)
	}
	if p.Scoped != 0 {
		need(c.Scopes(), "signals own-tree", ScopesMinABI)
	}
	if p.NewNetNS && !c.Namespaces {
		miss = append(miss, "network none needs a new network namespace (CAP_SYS_ADMIN)")
	}
	if p.JoinNetNS > 0 && !c.Namespaces {
		miss = append(miss, "network allow needs to join a network namespace (CAP_SYS_ADMIN)")
	}
	if (len(p.ReadOnly) > 0 || len(p.Mask) > 0 || len(p.Pin) > 0 || p.DenyUserNS) && !c.Namespaces {
		miss = append(miss, "read-only bind mounts need a private mount namespace (CAP_SYS_ADMIN)")
	}
	if p.NewPIDNS && !c.PIDNamespace {
		why := c.ProcessesReason
		if why == "" {
			why = "a PID namespace with its own /proc is unavailable"
		}
		miss = append(miss, "processes own-tree: "+why)
	}
	if p.Seccomp && !c.Seccomp {
		miss = append(miss, "the seccomp filter needs a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)")
	}
	if len(miss) > 0 {
		return &UnsupportedError{Missing: miss}
	}
	return nil
}
