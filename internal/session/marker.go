package session

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/proctable"
	"github.com/acpx-sidecar/acpx-sidecar/internal/reaper"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
)

// SessionMarkerEnv names the environment entry every provider process
// (and every descendant that keeps its environment) carries:
// ACPX_SIDECAR_SESSION=<session id>.<token>, the token 128 random bits
// made for the session. The ledger keeps only its SHA-256, and the next
// sidecar kills a dead one's leftover only when its environment has the
// entry of that digest (docs/operations.md, "The ownership ledger").
const SessionMarkerEnv = reaper.MarkerEnv

// newToken is a session's marker token: 128 random bits, hex.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// marker is this session's SessionMarkerEnv entry.
func (s *Actor) marker() string { return SessionMarkerEnv + "=" + s.id + "." + s.end.token }

// writeLedger writes the ownership-ledger entry into st, durably, with the
// tree's identity (after the launch, and again when a failed write is
// retried). The error is the store's.
func (s *Actor) writeLedger(st *store.Store, tree launch.Tree) error {
	return st.WriteOwned(s.ledgerEntry(tree))
}

// writeLedgerBeforeLaunch writes the entry the launch waits for (pid 0,
// the marker and the cgroup parent), in place but not yet fsynced: a
// sidecar killed from here on leaves it for the next one, and the
// durable entry with the tree's identity follows while the agent starts
// (a machine crash ends the tree too). The admission worker calls it;
// its error launches nothing (docs/protocol.md §18.5).
func (s *Actor) writeLedgerBeforeLaunch(st *store.Store) (*store.Pending, error) {
	return st.WriteOwnedDeferred(s.ledgerEntry(nil))
}

// ledgerEntry is this session's ledger entry (tree nil: before the launch).
func (s *Actor) ledgerEntry(tree launch.Tree) store.Owned {
	o := store.Owned{ID: s.id, SidecarPid: os.Getpid(), SidecarStartTime: selfStart, Session: s.id, SessionKey: s.key,
		MarkerSHA256: reaper.MarkerDigest(s.marker()), CgroupParent: s.m.Config.Launcher.CgroupParent(),
		Containment: string(s.m.Config.Launcher.Mode()), CreatedAt: store.FormatTime(time.Now())}
	if tree != nil {
		info := tree.Info()
		o.Pid, o.StartTime, o.Pgid, o.Cgroup, o.Containment = info.Pid, info.StartTicks, info.Pgid, info.CgroupPath, string(info.Containment)
	}
	return o
}

// selfStart is this sidecar's start time (proctable.StartTime), recorded
// in every ledger entry so a later sidecar can tell a live owner from a
// recycled pid.
var selfStart, _ = proctable.StartTime(os.Getpid())
