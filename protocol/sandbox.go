package protocol

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrSandboxConflict: a writable path of the open's sandbox is, lies
// inside, or holds a path that is never writable (the sidecar's state
// dirs, the cgroup filesystem, the command's installation) and the
// sidecar cannot keep that path read-only; data.paths names them
// (docs/protocol.md §19, Sandbox).
const ErrSandboxConflict DataCode = "SANDBOX_CONFLICT"

// Sandbox filesystem modes, network modes and signal scopes
// (docs/protocol.md §19).
const (
	SandboxWorkspace  = "workspace"
	SandboxStrict     = "strict"
	SandboxOff        = "off"
	NetworkAll        = "all"
	NetworkNone       = "none"
	NetworkConnectTCP = "connectTcp"
	SignalsOwnTree    = "own-tree"
	SignalsAll        = "all"
	// ProcessesOwnTree and ProcessesAll are `sandbox.processes`;
	// CapabilitiesNone and CapabilitiesKeep `sandbox.capabilities`
	// (docs/protocol.md §19).
	ProcessesOwnTree = "own-tree"
	ProcessesAll     = "all"
	CapabilitiesNone = "none"
	CapabilitiesKeep = "keep"
)

// Sandbox is session/open `sandbox` (docs/protocol.md §19): the kernel
// sandbox the provider tree runs in. Members left out take the sidecar's
// default (--default-sandbox; signals, processes: "own-tree", and
// capabilities: "none", whenever a filesystem sandbox is on, else "all",
// "all" and "keep"; network: "all"). Paths are absolute.
type Sandbox struct {
	// Filesystem is SandboxWorkspace, SandboxStrict or SandboxOff; empty
	// takes --default-sandbox.
	Filesystem string `json:"filesystem,omitempty"`
	// Writable are extra writable directories (absolute, existing).
	Writable []string `json:"writable,omitempty"`
	// Readable are extra readable directories under SandboxStrict
	// (absolute, existing).
	Readable []string `json:"readable,omitempty"`
	// Network is the tree's network; nil means NetworkAll.
	Network *SandboxNetwork `json:"network,omitempty"`
	// Signals is SignalsOwnTree or SignalsAll: whether the tree may
	// signal processes outside it; empty takes the default above.
	Signals string `json:"signals,omitempty"`
	// Processes is ProcessesOwnTree (a PID namespace and /proc of the
	// tree's own) or ProcessesAll; empty takes the default above.
	Processes string `json:"processes,omitempty"`
	// Capabilities is CapabilitiesNone (every capability dropped) or
	// CapabilitiesKeep; empty takes the default above.
	Capabilities string `json:"capabilities,omitempty"`
	// unknown is a member the host sent that a sandbox has not (say
	// `connectTcp` beside `network`): validate refuses it, -32602
	// sandbox.<member>, rather than silently running without it.
	unknown string
}

// UnmarshalJSON reads `sandbox`, noting the first member it does not know
// (validate refuses it).
func (s *Sandbox) UnmarshalJSON(b []byte) error {
	type plain Sandbox
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = Sandbox(p)
	for k := range members {
		switch k {
		case "filesystem", "writable", "readable", "network", "signals", "processes", "capabilities":
		default:
			if s.unknown == "" || k < s.unknown {
				s.unknown = k
			}
		}
	}
	return nil
}

// SandboxNetwork is `sandbox.network`: on the wire the string "all" or
// "none", the object {"connectTcp": [ports]} (Mode NetworkConnectTCP) or
// the object {"allow": [entries]} (Mode NetworkAllow, docs/protocol.md
// §19.1; in an open result the entries in canonical form).
type SandboxNetwork struct {
	// Mode is NetworkAll, NetworkNone, NetworkConnectTCP or NetworkAllow.
	Mode string
	// ConnectTCP are the TCP ports (1–65535) the tree may connect to, for
	// Mode NetworkConnectTCP.
	ConnectTCP []int
	// Allow are the destinations the tree may reach ("name:port",
	// "*.domain:port", "IP:port", "[IPv6]:port"), for Mode NetworkAllow.
	Allow []string
	// badField and badWhy: the wire form was none of these; validate
	// refuses it -32602 naming badField (the decoder's own error would
	// name no field).
	badField, badWhy string
}

// MarshalJSON writes the wire form.
func (n SandboxNetwork) MarshalJSON() ([]byte, error) {
	if n.Mode == NetworkAllow {
		entries := n.Allow
		if entries == nil {
			entries = []string{}
		}
		return json.Marshal(map[string][]string{"allow": entries})
	}
	if n.Mode == NetworkConnectTCP {
		ports := n.ConnectTCP
		if ports == nil {
			ports = []int{}
		}
		return json.Marshal(map[string][]int{"connectTcp": ports})
	}
	return json.Marshal(n.Mode)
}

// networkShapes names the wire forms of sandbox.network.
const networkShapes = `sandbox.network must be "all", "none", {"connectTcp": [ports]} or {"allow": ["name:port", "*.domain:port", "IP:port", "[IPv6]:port"]}`

// UnmarshalJSON reads the wire form; any other shape is refused by
// validation (session/open answers -32602 naming the member at fault:
// sandbox.network, sandbox.network.<unknown member>, .allow or
// .connectTcp).
func (n *SandboxNetwork) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*n = SandboxNetwork{Mode: s}
		if s == NetworkAllow || s == NetworkConnectTCP {
			// The object modes are not strings on the wire.
			n.badField, n.badWhy = "sandbox.network", networkShapes
		}
		return nil
	}
	bad := func(field, why string) error {
		*n = SandboxNetwork{badField: field, badWhy: why}
		return nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil || members == nil {
		return bad("sandbox.network", networkShapes)
	}
	for k := range members {
		if k != "allow" && k != "connectTcp" {
			return bad("sandbox.network."+k, "sandbox.network has no member "+strconv.Quote(k)+"; "+networkShapes)
		}
	}
	if len(members) != 1 {
		return bad("sandbox.network", "sandbox.network takes exactly one of connectTcp or allow; "+networkShapes)
	}
	if raw, ok := members["allow"]; ok {
		var entries []string
		if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
			return bad("sandbox.network.allow", `sandbox.network.allow must be an array of strings: ["name:port", "*.domain:port", "IP:port", "[IPv6]:port"]`)
		}
		*n = SandboxNetwork{Mode: NetworkAllow, Allow: entries}
		return nil
	}
	var ports []int
	if err := json.Unmarshal(members["connectTcp"], &ports); err != nil || ports == nil {
		return bad("sandbox.network.connectTcp", "sandbox.network.connectTcp must be an array of ports (1-65535)")
	}
	*n = SandboxNetwork{Mode: NetworkConnectTCP, ConnectTCP: ports}
	return nil
}

// SandboxResult is the open result's `sandbox` (docs/protocol.md §19):
// what was applied. Enforced is false when nothing is enforced (every
// part off, or a default this machine cannot enforce: Reason says why;
// Reason also names a defaulted layer this machine lacks, e.g.
// processes "all" where there is no PID namespace to give). Writable and
// Readable are the paths as applied; ReadOnly the protected paths kept
// read-only inside writable ones; TmpDir the private TMPDIR the sidecar
// made for the session, if it made one; Home the key's private HOME it
// gave the agent, if it gave one. Processes ("own-tree" | "all"),
// Capabilities ("none" | "keep") and Seccomp (the filter loaded) are the
// layers against root as applied.
type SandboxResult struct {
	// Enforced is false when no part of the sandbox is enforced.
	Enforced bool `json:"enforced"`
	// Filesystem is the filesystem mode resolved for the session
	// ("workspace", "strict" or "off"); Enforced says whether it holds.
	Filesystem string `json:"filesystem"`
	// Network is the network mode applied; an allow list in canonical form.
	Network SandboxNetwork `json:"network"`
	// Signals is the signal scope: "own-tree" or "all".
	Signals string `json:"signals"`
	// Processes is the PID layer applied: "own-tree" or "all".
	Processes string `json:"processes"`
	// Capabilities is the capability layer applied: "none" or "keep".
	Capabilities string `json:"capabilities"`
	// Seccomp says whether the seccomp filter was loaded.
	Seccomp bool `json:"seccomp"`
	// LandlockABI is the kernel's Landlock ABI version, at most
	// --assume-landlock-abi (0: none).
	LandlockABI int `json:"landlockAbi"`
	// Writable are the writable paths as applied (symlinks resolved,
	// missing ones left out); never null.
	Writable []string `json:"writable"`
	// Readable are the readable paths as applied; never null.
	Readable []string `json:"readable"`
	// ReadOnly are the protected paths kept read-only by bind mounts
	// inside writable ones (masked key files are not listed); omitted
	// when none.
	ReadOnly []string `json:"readOnly,omitempty"`
	// TmpDir is the private TMPDIR the sidecar made for the session;
	// omitted when it made none.
	TmpDir string `json:"tmpDir,omitempty"`
	// Home is the key's private HOME the sidecar gave the agent; omitted
	// when it gave none.
	Home string `json:"home,omitempty"`
	// Reason says why a default sandbox, or a defaulted layer, is not
	// enforced; omitted when everything asked for is.
	Reason string `json:"reason,omitempty"`
}

// SandboxCaps is initialize.capabilities.sandbox and `doctor`'s
// `sandbox`: what this machine enforces (docs/protocol.md §19). Default
// is the filesystem mode opens get when they name none (--default-sandbox
// as in force: "off" when the default asked for cannot be enforced).
//
// Processes: processes "own-tree" is enforceable (a PID namespace with
// its own /proc); Capabilities: capabilities "none" is (always: a tree
// can lose what the sidecar holds); Seccomp: the seccomp filter is;
// UserNamespacesRefused: new user namespaces are refused to a tree even through
// clone3 (the sidecar can make mount namespaces). ProcessesReason says
// why Processes is false.
type SandboxCaps struct {
	// LandlockABI is the kernel's Landlock ABI version, at most
	// --assume-landlock-abi; 0 when Landlock is unavailable (Reason says
	// why).
	LandlockABI int `json:"landlockAbi"`
	// Filesystem: filesystem sandboxes are enforceable (Landlock ABI ≥ 5).
	Filesystem bool `json:"filesystem"`
	// ConnectTCP: network {"connectTcp": [ports]} is enforceable
	// (Landlock ABI ≥ 4).
	ConnectTCP bool `json:"connectTcp"`
	// Signals: signals "own-tree" is enforceable (Landlock ABI ≥ 6).
	Signals bool `json:"signals"`
	// NetworkNone: network "none" is enforceable (a new network
	// namespace: CAP_SYS_ADMIN).
	NetworkNone bool `json:"networkNone"`
	// NetworkAllow: network {"allow": [...]} is enforceable (a network
	// namespace with a TUN device the sidecar makes; docs/protocol.md
	// §19.1).
	NetworkAllow bool `json:"networkAllow"`
	// ReadOnlyBinds: protected paths inside writable ones can be kept
	// read-only by bind mounts (CAP_SYS_ADMIN).
	ReadOnlyBinds bool `json:"readOnlyBinds"`
	// Processes: processes "own-tree" is enforceable.
	Processes bool `json:"processes"`
	// Capabilities: capabilities "none" is enforceable.
	Capabilities bool `json:"capabilities"`
	// Seccomp: the seccomp filter can be loaded.
	Seccomp bool `json:"seccomp"`
	// UserNamespacesRefused: new user namespaces are refused to a tree.
	UserNamespacesRefused bool `json:"userNamespacesRefused"`
	// Default is the filesystem mode of opens that name none: "workspace",
	// "strict" or "off".
	Default string `json:"default"`
	// Reason says why Landlock is unavailable, or that the containment
	// mode cannot apply a sandbox; omitted otherwise.
	Reason string `json:"reason,omitempty"`
	// ProcessesReason says why Processes is false; omitted otherwise.
	ProcessesReason string `json:"processesReason,omitempty"`
}

// validate checks s's shape (modes, absolute paths, ports 1-65535).
func (s *Sandbox) validate() *Error {
	if s == nil {
		return nil
	}
	if s.unknown != "" {
		return InvalidParams("sandbox."+s.unknown, "sandbox has no member "+strconv.Quote(s.unknown)+
			" (filesystem, writable, readable, network, signals, processes, capabilities; ports go in network: {\"connectTcp\": [ports]})")
	}
	switch s.Filesystem {
	case "", SandboxWorkspace, SandboxStrict, SandboxOff:
	default:
		return InvalidParams("sandbox.filesystem", "sandbox.filesystem must be workspace, strict or off")
	}
	for _, l := range []struct {
		name  string
		paths []string
	}{{"writable", s.Writable}, {"readable", s.Readable}} {
		for i, p := range l.paths {
			if !filepath.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
				return InvalidParams("sandbox."+l.name+"."+strconv.Itoa(i), "sandbox paths must be absolute")
			}
		}
	}
	if n := s.Network; n != nil {
		if n.badField != "" {
			return InvalidParams(n.badField, n.badWhy)
		}
		switch n.Mode {
		case NetworkAll, NetworkNone:
		case NetworkConnectTCP:
			for i, p := range n.ConnectTCP {
				if p < 1 || p > 65535 {
					return InvalidParams("sandbox.network.connectTcp."+strconv.Itoa(i), "ports must be 1-65535")
				}
			}
		case NetworkAllow:
			if e := validateAllow(n.Allow); e != nil {
				return e
			}
		default:
			return InvalidParams("sandbox.network", networkShapes)
		}
	}
	switch s.Signals {
	case "", SignalsOwnTree, SignalsAll:
	default:
		return InvalidParams("sandbox.signals", "sandbox.signals must be own-tree or all")
	}
	switch s.Processes {
	case "", ProcessesOwnTree, ProcessesAll:
	default:
		return InvalidParams("sandbox.processes", "sandbox.processes must be own-tree or all")
	}
	switch s.Capabilities {
	case "", CapabilitiesNone, CapabilitiesKeep:
	default:
		return InvalidParams("sandbox.capabilities", "sandbox.capabilities must be none or keep")
	}
	return nil
}
