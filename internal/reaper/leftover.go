package reaper

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// MarkerEnv names the environment entry every process of a provider tree
// inherits, MarkerEnv=<session id>.<unguessable token> (internal/session sets
// it). Recovery trusts only this name, never one a ledger entry gives: an
// entry that could name the marker could name `HOME=/root`, which every
// root process carries.
const MarkerEnv = "ACPX_SIDECAR_SESSION"

// MarkerDigest is the hex SHA-256 of a marker entry "MarkerEnv=value": what
// the ledger keeps of it, so reading the ledger does not reveal a token.
func MarkerDigest(entry string) string {
	sum := sha256.Sum256([]byte(entry))
	return hex.EncodeToString(sum[:])
}

// Leftover identifies a provider tree that an earlier sidecar owned, as its
// ownership ledger claims — a claim recovery trusts only as far as it can
// prove it (docs/operations.md, "The ownership ledger"): the leader's pid
// and start time (field 22 of /proc/<pid>/stat, clock ticks; 0 when the
// entry was written before the launch), the dead owner's pid, the session
// id, the cgroup (or, before the launch, the parent it would be made in),
// the MarkerDigest of the tree's marker entry, and this sidecar's own
// configured cgroup parent (OwnParent, "" for the default layout). Pgid is
// the leader's process group as the entry claims it: only tablemode.Recover
// uses it, and only while the leader is proven (its start time matches and
// it carries the marker); Recover never signals a group.
type Leftover struct {
	// Pid is the leader's pid as the entry claims it (0: the entry was
	// written before the launch).
	Pid int
	// StartTicks is the leader's start time in the process table's units;
	// the pid counts as the provider only while it matches.
	StartTicks uint64
	// Pgid is the leader's process group as the entry claims it.
	Pgid int
	// SidecarPid is the dead owner's pid: its default cgroup parent,
	// <cgroup2 mount>/acpx-sidecar-<SidecarPid>, is one a trusted cgroup
	// may lie in.
	SidecarPid int
	// Session is the owner's session id ("s-" and hex digits; another
	// shape makes the entry ErrUnprovable); a trusted cgroup is named
	// acpx-<Session>-<n>.
	Session string
	// Cgroup is the tree's cgroup directory as the entry claims it (""
	// outside cgroup mode, or before the launch).
	Cgroup string
	// CgroupParent is the directory the tree's cgroup is (or would be)
	// made in, searched when Cgroup is "" ("": none).
	CgroupParent string
	// MarkerSHA256 is the MarkerDigest of the tree's marker entry, 64 hex
	// digits (another length makes the entry ErrUnprovable).
	MarkerSHA256 string
	// OwnParent is this sidecar's own cgroup parent ("" outside cgroup
	// mode); when it is a configured one, not this sidecar's default, a
	// trusted cgroup may lie in it too.
	OwnParent string
}

// ErrUnprovable is Recover's answer for a leftover it has no way to prove
// anything of, or whose claims are evidence of a forgery: no marker digest
// or a malformed session id; a pid that is alive with the entry's start
// time but does not carry the tree's marker (a provider always does).
// Nothing is killed and no proof can be made; the caller reports and
// drops the entry.
var ErrUnprovable = errors.New("reaper: the ledger entry names nothing recovery can prove")

// IsSessionID reports whether s has the shape of a sidecar session id,
// ^s-[0-9a-f]{1,64}$ (checked by hand: a compiled regexp of that bound
// costs every start of the binary — the sidecar, its launch entries —
// about a thousand allocations).
func IsSessionID(s string) bool {
	hex, ok := strings.CutPrefix(s, "s-")
	if !ok || len(hex) == 0 || len(hex) > 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
