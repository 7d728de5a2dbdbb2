package rpc

import (
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// TestMethods_TableAdmission pins each row's lifecycle flags: only
// initialize before initialize; only the notifications exit and
// $/cancelRequest (either spelling) after shutdown (session/extNotification
// is the one notification that is not); a request never finds a notification's
// row nor the other way round.
func TestMethods_TableAdmission(t *testing.T) {
	for name, m := range methods {
		if m.run == nil {
			t.Errorf("%s: no run", name)
		}
		notif := m.flags&notification != 0
		if _, ok := lookup(name, notif); !ok {
			t.Errorf("%s: lookup(notif=%v) misses its own row", name, notif)
		}
		if _, ok := lookup(name, !notif); ok {
			t.Errorf("%s: lookup(notif=%v) finds a row of the other kind", name, !notif)
		}
		wantBefore := name == protocol.MethodInitialize
		wantAfter := name == protocol.MethodExit || name == protocol.MethodCancelRequest || name == protocol.MethodCancelRequestACP
		if m.admits(phaseNew) != wantBefore || m.admits(phaseShutdown) != wantAfter || !m.admits(phaseReady) {
			t.Errorf("%s: admits new=%v ready=%v shutdown=%v", name, m.admits(phaseNew), m.admits(phaseReady), m.admits(phaseShutdown))
		}
		// session/extNotification (ext.go) is a notification a session
		// needs, so not admitted after shutdown.
		if notif != (wantAfter || name == protocol.NotifySessionExtNotification) {
			t.Errorf("%s: notification=%v", name, notif)
		}
	}
	if _, ok := lookup("nope", false); ok {
		t.Error("lookup found an unknown method")
	}
}

// TestConnState_PhaseOnlyMovesForward: an initialize that lands after
// shutdown began leaves the connection shutting down.
func TestConnState_PhaseOnlyMovesForward(t *testing.T) {
	st := newConnState()
	st.advance(phaseReady)
	st.advance(phaseShutdown)
	st.advance(phaseReady)
	if st.phase != phaseShutdown {
		t.Fatalf("phase = %d, want shutdown", st.phase)
	}
}
