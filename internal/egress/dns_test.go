package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/acpx-sidecar/acpx-sidecar/internal/egress/allow"
)

func mustList(t *testing.T, entries ...string) allow.List {
	t.Helper()
	l, err := allow.ParseList(entries)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// query builds a DNS query for name and type.
func query(t *testing.T, id uint16, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	_ = b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestDNS_Answers: a listed name gets one A record (its synthetic address,
// the same every time; another name another one), AAAA is NODATA, a name
// not listed is NXDOMAIN and audited denied once per turn, a PTR query
// is NXDOMAIN and not audited (docs/protocol.md §19.1).
func TestDNS_Answers(t *testing.T) {
	aud := newAuditor(nil)
	d := newDNSServer(mustList(t, "model.test:8080", "*.test:9090"), newNames(MaxNames), aud)
	answer := func(name string, typ dnsmessage.Type) (dnsmessage.Header, []dnsmessage.Resource) {
		t.Helper()
		resp := d.answer(query(t, 77, name, typ))
		msg := dnsmessage.Message{}
		if err := msg.Unpack(resp); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if msg.ID != 77 || !msg.Response || len(msg.Questions) != 1 {
			t.Fatalf("%s: header %+v", name, msg.Header)
		}
		return msg.Header, msg.Answers
	}
	h, ans := answer("MODEL.test.", dnsmessage.TypeA)
	if h.RCode != dnsmessage.RCodeSuccess || len(ans) != 1 {
		t.Fatalf("model.test A: %v %d answers", h.RCode, len(ans))
	}
	a1 := netip.AddrFrom4(ans[0].Body.(*dnsmessage.AResource).A)
	if !SyntheticPrefix.Contains(a1) {
		t.Errorf("model.test is %v, outside %v", a1, SyntheticPrefix)
	}
	_, ans = answer("model.test.", dnsmessage.TypeA)
	if netip.AddrFrom4(ans[0].Body.(*dnsmessage.AResource).A) != a1 {
		t.Error("model.test changed address")
	}
	_, ans = answer("a.b.test.", dnsmessage.TypeA)
	if len(ans) != 1 || netip.AddrFrom4(ans[0].Body.(*dnsmessage.AResource).A) == a1 {
		t.Errorf("a.b.test: %+v", ans)
	}
	if h, ans = answer("model.test.", dnsmessage.TypeAAAA); h.RCode != dnsmessage.RCodeSuccess || len(ans) != 0 {
		t.Errorf("AAAA: %v, %d answers; want NODATA", h.RCode, len(ans))
	}
	if h, _ = answer("test.", dnsmessage.TypeA); h.RCode != dnsmessage.RCodeNameError {
		t.Errorf("test: %v, want NXDOMAIN", h.RCode)
	}
	if h, _ = answer("other.example.", dnsmessage.TypeA); h.RCode != dnsmessage.RCodeNameError {
		t.Errorf("other.example: %v", h.RCode)
	}
	answer("other.example.", dnsmessage.TypeAAAA) // the same name again: no second entry
	if h, _ = answer("1.0.0.127.in-addr.arpa.", dnsmessage.TypePTR); h.RCode != dnsmessage.RCodeNameError {
		t.Errorf("PTR: %v", h.RCode)
	}
	// A PTR query of a name that is no address's reverse name is a lookup
	// like any other (an exfiltration by query type): audited.
	if h, _ = answer("exfil-ptr.evil.example.", dnsmessage.TypePTR); h.RCode != dnsmessage.RCodeNameError {
		t.Errorf("PTR of a name: %v", h.RCode)
	}
	ev := aud.take()
	var dests []string
	for _, e := range ev {
		if e.Decision != Denied || e.Reason != ReasonNameNotListed {
			t.Errorf("entry %+v", e)
		}
		dests = append(dests, e.Destination)
	}
	if !slices.Equal(dests, []string{"test", "other.example", "exfil-ptr.evil.example"}) {
		t.Errorf("denied names %v, want [test other.example exfil-ptr.evil.example]", dests)
	}
	aud.setTurn("t2")
	answer("other.example.", dnsmessage.TypeA)
	if ev := aud.take(); len(ev) != 1 || ev[0].RequestID != "t2" {
		t.Errorf("next turn: %+v, want other.example again with t2", ev)
	}
	if d.answer([]byte{1, 2, 3}) != nil {
		t.Error("a 3-byte message was answered")
	}
	// A question whose label holds a dot does not parse: FORMERR, audited.
	bad := []byte{0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', '.', 'b', 0, 0, 1, 0, 1}
	var m dnsmessage.Message
	if err := m.Unpack(d.answer(bad)); err != nil || m.RCode != dnsmessage.RCodeFormatError {
		t.Errorf("a dotted label: %v %v, want FORMERR", m.RCode, err)
	}
	if ev := aud.take(); len(ev) != 1 || ev[0].Destination != MalformedQuery {
		t.Errorf("a dotted label: entries %+v, want one %q", ev, MalformedQuery)
	}
}

// TestDNS_NamesBounded: past MaxNames distinct names a new one is
// SERVFAIL and audited; names already given keep working.
func TestDNS_NamesBounded(t *testing.T) {
	aud := newAuditor(nil)
	d := newDNSServer(mustList(t, "*.test:1"), newNames(2), aud)
	for _, n := range []string{"a.test.", "b.test.", "a.test."} {
		var m dnsmessage.Message
		if err := m.Unpack(d.answer(query(t, 1, n, dnsmessage.TypeA))); err != nil || m.RCode != dnsmessage.RCodeSuccess {
			t.Fatalf("%s: %v %v", n, m.RCode, err)
		}
	}
	var m dnsmessage.Message
	if err := m.Unpack(d.answer(query(t, 1, "c.test.", dnsmessage.TypeA))); err != nil || m.RCode != dnsmessage.RCodeServerFailure {
		t.Errorf("third name: %v %v, want SERVFAIL", m.RCode, err)
	}
	if ev := aud.take(); len(ev) != 1 || ev[0].Reason != ReasonNames {
		t.Errorf("entries %+v", ev)
	}
}

// TestDNS_ServesUDPAndTCP: Go's own stub resolver, pointed at the server
// on loopback, resolves a listed name over UDP and over TCP, and gets
// "no such host" for another.
func TestDNS_ServesUDPAndTCP(t *testing.T) {
	d := newDNSServer(mustList(t, "model.test:8080"), newNames(MaxNames), newAuditor(nil))
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.serveUDP(pc)
	d.serveTCP(l)
	defer d.close()
	for _, network := range []string{"udp", "tcp"} {
		addr := pc.LocalAddr().String()
		if network == "tcp" {
			addr = l.Addr().String()
		}
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		got, err := r.LookupNetIP(context.Background(), "ip4", "model.test")
		if err != nil || len(got) != 1 || !SyntheticPrefix.Contains(got[0]) {
			t.Errorf("%s: model.test = %v, %v", network, got, err)
		}
		got, err = r.LookupNetIP(context.Background(), "ip", "model.test")
		if err != nil || len(got) != 1 {
			t.Errorf("%s: model.test (A and AAAA) = %v, %v", network, got, err)
		}
		_, err = r.LookupNetIP(context.Background(), "ip", "other.test")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("%s: other.test: %v, want not found", network, err)
		}
	}
}
