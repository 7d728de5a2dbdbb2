package egress

import (
	"strconv"
	"testing"
	"time"
)

// TestAudit_DeniedOncePerTurn: a denied destination is reported once per
// turn however often it is tried, and again in the next turn; every
// attempt is counted.
func TestAudit_DeniedOncePerTurn(t *testing.T) {
	a := newAuditor(nil)
	a.setTurn("t1")
	for i := 0; i < 100; i++ {
		a.refused("1.2.3.4:443", ReasonNotListed)
		a.refused("5.6.7.8:80", ReasonNotListed)
	}
	ev := a.take()
	if len(ev) != 2 || ev[0].Destination != "1.2.3.4:443" || ev[0].RequestID != "t1" || ev[1].Destination != "5.6.7.8:80" {
		t.Errorf("entries %+v", ev)
	}
	if a.totals().Denied != 200 {
		t.Errorf("denied %d, want 200", a.totals().Denied)
	}
	a.setTurn("t2")
	a.refused("1.2.3.4:443", ReasonNotListed)
	if ev := a.take(); len(ev) != 1 || ev[0].RequestID != "t2" {
		t.Errorf("next turn: %+v", ev)
	}
}

// TestAudit_Bounded: allowed entries past MaxPendingEvents are dropped
// and counted (never blocking), and wake fires once per
// empty-to-non-empty queue; past maxDeniedKeys destinations in one turn a
// further denied one is still reported (a flood of junk must not hide
// the probe after it).
func TestAudit_Bounded(t *testing.T) {
	wakes := 0
	a := newAuditor(func() { wakes++ })
	for i := 0; i < MaxPendingEvents+10; i++ {
		a.connected("x.test:1", "", "", 1, 2, time.Millisecond)
	}
	if wakes != 1 || a.dropped.Load() != 10 {
		t.Errorf("wakes %d, dropped %d", wakes, a.dropped.Load())
	}
	if ev := a.take(); len(ev) != MaxPendingEvents {
		t.Errorf("%d queued", len(ev))
	}
	if tot := a.totals(); tot.Allowed != MaxPendingEvents+10 || tot.BytesOut != MaxPendingEvents+10 || tot.BytesIn != 2*(MaxPendingEvents+10) {
		t.Errorf("totals %+v", tot)
	}
	for i := 0; i < maxDeniedKeys+5; i++ {
		a.refused("10.0.0.1:"+strconv.Itoa(i), ReasonNotListed)
	}
	if wakes != 2 || len(a.take()) != maxDeniedKeys || a.totals().Denied != maxDeniedKeys+5 {
		t.Errorf("wakes %d, denied %d", wakes, a.totals().Denied)
	}
	a.refused("169.254.169.254:80", ReasonNotListed)
	if ev := a.take(); len(ev) != 1 || ev[0].Destination != "169.254.169.254:80" {
		t.Errorf("the probe after %d junk destinations: %+v, want it reported", maxDeniedKeys, ev)
	}
}
