package sandbox

// Rule is one Landlock path-beneath rule: Access (landlock/syscall
// AccessFS* bits) on everything beneath Path. Dev and Ino, when not both
// zero, are the identity Path had when the plan was built: at launch the
// path is opened without following any link and must still be that
// file, else the launch fails (docs/protocol.md §19: no rule is granted
// through a path the agent made).
type Rule struct {
	// Path is the absolute, link-free path the rule is granted beneath.
	Path string `json:"path"`
	// Access is the set of Landlock AccessFS* rights granted (only
	// FileAccess rights when Path is not a directory).
	Access uint64 `json:"access"`
	// Dev is Path's device number when the plan was built (see Ino).
	Dev uint64 `json:"dev,omitempty"`
	// Ino is Path's inode number when the plan was built; Dev and Ino
	// both zero means no identity is checked at launch.
	Ino uint64 `json:"ino,omitempty"`
}

// Not shared: Plan's field list only looks like other structs' (protocol.Proof's).

// Plan is what Start applies, in this order: the namespaces — a private
// mount namespace (NewMountNS), a PID namespace (NewPIDNS) with a System
// V IPC namespace, a new network namespace (NewNetNS) or an existing one
// joined (JoinNetNS) —; the PID namespace's init, a fresh /proc and a
// fresh tmpfs on /dev/shm (NewPIDNS: a tree that sees only its own
// processes shares no message queue, semaphore or shared memory with the
// host or another tree either); every Pin directory bound onto itself,
// every ReadOnly path bound read-only (mount points cannot be renamed or
// removed) and every ReadWrite path read-write again; /dev opening only
// Devices (NoDev); every Mask path hidden (a secret: an empty read-only
// mount over it); a mount over / (DenyUserNS: the kernel refuses a new
// user namespace to a process whose root is not its namespace's root);
// the loopback up (NewNetNS); then no_new_privs, the capabilities dropped
// (DropCaps), the seccomp filter (Seccomp), and one Landlock ruleset
// handling HandledFS, HandledNet and Scoped, with FS and ConnectTCP as
// its rules. A zero Plan restricts nothing (Empty). It travels as JSON
// (to the guardian).
type Plan struct {
	// HandledFS is the set of Landlock filesystem rights the ruleset
	// restricts (the HandledFS constant for any filesystem sandbox; 0:
	// no filesystem rules).
	HandledFS uint64 `json:"handledFs,omitempty"`
	// FS are the path-beneath rules granting rights out of HandledFS.
	FS []Rule `json:"fs,omitempty"`
	// HandledNet is the set of Landlock network rights restricted
	// (TCP bind and connect for network "connectTcp"; 0: none).
	HandledNet uint64 `json:"handledNet,omitempty"`
	// ConnectTCP are the TCP ports the tree may connect to, sorted and
	// unique (with HandledNet).
	ConnectTCP []uint16 `json:"connectTcp,omitempty"`
	// Scoped is the set of Landlock scopes (ScopeSignal and
	// ScopeAbstractUnixSocket for signals "own-tree"; 0: none).
	Scoped uint64 `json:"scoped,omitempty"`
	// NewNetNS: the tree gets a new network namespace with only its own
	// loopback, brought up (network "none").
	NewNetNS bool `json:"newNetns,omitempty"`
	// JoinNetNS, when positive, is a descriptor (in the launcher's
	// process) of a network namespace the tree joins instead: the one
	// internal/egress made for an allow list (docs/protocol.md §19.1).
	// Not set by Build: the caller sets it.
	JoinNetNS int `json:"joinNetns,omitempty"`
	// ReadOnly are the protected paths lying inside a writable one, each
	// bound read-only onto itself in the tree's mount namespace.
	ReadOnly []string `json:"readOnly,omitempty"`
	// ReadWrite are bound read-write again inside a ReadOnly one: the
	// key's private HOME in a state dir kept read-only because a writable
	// path holds it.
	ReadWrite []string `json:"readWrite,omitempty"`
	// Mask are secrets (Paths.Secrets) hidden from the tree: a file gets
	// a read-only, nodev bind of /dev/null over it (opening it is
	// EACCES), a directory an empty read-only tmpfs. Either is a mount
	// point, so it cannot be renamed, removed or replaced from inside.
	Mask []string `json:"mask,omitempty"`
	// NoDev (set with Mask) makes the tree's /dev open no device but
	// Devices: /dev is bound onto itself, each of Devices bound onto
	// itself, then /dev's mount set nodev, so a disk's node (which a root
	// tree owns, capabilities or not) is EACCES — its raw blocks would
	// hold a masked key's bytes (found in review).
	NoDev bool `json:"noDev,omitempty"`
	// Pin are the directories between each ReadOnly path and the
	// writable root holding it, outermost first, each bound onto itself
	// so that no rename can move the protected path.
	Pin []string `json:"pin,omitempty"`
	// NewPIDNS: the tree gets a PID namespace with an init of its own, a
	// fresh /proc, an IPC namespace and a fresh /dev/shm (processes
	// "own-tree").
	NewPIDNS bool `json:"newPidns,omitempty"`
	// DropCaps: every capability set is emptied and securebits locked
	// (capabilities "none").
	DropCaps bool `json:"dropCaps,omitempty"`
	// Seccomp: the sandbox's seccomp filter is loaded (any filesystem
	// sandbox).
	Seccomp bool `json:"seccomp,omitempty"`
	// DenyUserNS: / is bound over itself so the kernel refuses the tree
	// new user namespaces (a filesystem sandbox where the launcher can
	// make a mount namespace).
	DenyUserNS bool `json:"denyUserns,omitempty"`
}

// Empty reports whether p restricts nothing.
func (p *Plan) Empty() bool {
	return p == nil || p.HandledFS == 0 && p.HandledNet == 0 && p.Scoped == 0 && !p.NewNetNS && p.JoinNetNS <= 0 && len(p.ReadOnly) == 0 &&
		len(p.ReadWrite) == 0 && len(p.Mask) == 0 && len(p.Pin) == 0 && !p.NewPIDNS && !p.DropCaps && !p.Seccomp && !p.DenyUserNS
}

// NewMountNS reports whether p needs a private mount namespace: bind
// mounts, masks, a fresh /proc or the mount over /.
func (p *Plan) NewMountNS() bool {
	return p != nil && (len(p.ReadOnly) > 0 || len(p.ReadWrite) > 0 || len(p.Mask) > 0 || len(p.Pin) > 0 || p.NewPIDNS || p.DenyUserNS)
}

// Landlocks reports whether p needs a Landlock ruleset.
func (p *Plan) Landlocks() bool {
	return p != nil && (p.HandledFS != 0 || p.HandledNet != 0 || p.Scoped != 0)
}
