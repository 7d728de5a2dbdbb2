package session

import (
	"errors"
	"strconv"

	"github.com/acpx-sidecar/acpx-sidecar/internal/admission"
	"github.com/acpx-sidecar/acpx-sidecar/internal/launch"
	"github.com/acpx-sidecar/acpx-sidecar/internal/store"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// A session key is held in two ways (docs/protocol.md §8 session/open,
// SESSION_KEY_IN_USE): within this sidecar by Manager.keys, and across
// sidecars sharing a stateDir by the key's flock (store.KeyLock, held
// through internal/registry's KeyLocks, Shared.KeyLocks). The
// flock is taken in admission before the record, journal or ledger are
// touched, and kept until the session's last write to the key's files —
// its journal closed after the final proof, or a retained cleanup's final
// proof journaled. Within this process the flock is shared by reference
// count: an earlier session of the key finishing its journal must not
// make a new session of this sidecar look like another sidecar's.

// takeKeyHold takes the session's hold of its key's flock on the actor,
// before admission touches the key's record, journal or ledger entry. On
// refusal it answers the open and ends the session (false): another
// sidecar's hold is SESSION_KEY_IN_USE, nothing launched, no cleanup
// proof, as for a key this sidecar holds.
func (s *Actor) takeKeyHold(st *store.Store, reply Reply) bool {
	release, err := s.m.KeyLocks.Hold(st, s.key)
	if err == nil {
		s.end.keyHold = release
		return true
	}
	if !errors.Is(err, store.ErrKeyHeld) {
		s.failBeforeLaunchWhy(reply, admission.OrExhausted("the session key's lock file could not be opened", err,
			protocol.Domain(protocol.ErrStoreUnavailable, "the session key's lock file cannot be used: "+launch.ErrText(err), true)),
			"admission failed before launch: the session key's lock could not be taken (STORE_UNAVAILABLE)")
		return false
	}
	msg := "sessionKey is held by another sidecar on this stateDir"
	var held *store.KeyHeldError
	if errors.As(err, &held) && held.Pid > 0 {
		msg += " (pid " + strconv.Itoa(held.Pid) + ")"
	}
	e := protocol.Domain(protocol.ErrSessionKeyInUse, msg, true)
	e.Data.HeldBy = protocol.HeldByOtherSidecar
	s.moveTo(protocol.StateClosed)
	s.m.Router.Forget(s, false)
	reply(nil, e)
	s.end.finished = true
	return false
}

// dropKeyHold releases the session's hold of its key's flock (idempotent):
// when its cleanup is over and its journal closed (release), and when its
// actor stops.
func (s *Actor) dropKeyHold() {
	if s.end.keyHold != nil {
		s.end.keyHold()
		s.end.keyHold = nil
	}
}

// errRecordTaken aborts a record update of a session whose key was
// reopened since (the record names another ACP session): a closed or dead
// session never writes over its successor's record.
var errRecordTaken = errors.New("the record names another ACP session")

// recordIsOurs reports whether the key's record still names this
// session's ACP session (or is gone), so that a discarding close of a
// session whose key was reopened since — by this sidecar or another —
// leaves the successor's record and journal alone.
func (s *Actor) recordIsOurs() bool {
	r, err := s.rec.st.Load(s.key)
	if err != nil || r.BackendSessionID == s.rec.identity.BackendSessionID {
		return true
	}
	s.log.Info("record and journal not discarded: the key was reopened since")
	return false
}
