package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream is a loopback server for the forwarder to reach: it echoes
// (mode "echo"), or reads everything and answers a fixed reply after the
// client half-closes ("reply"), or holds connections open ("hold"); it
// counts the bytes it saw and the most connections it had at once.
type upstream struct {
	l    net.Listener
	mode string
	mu   sync.Mutex
	in   int64 // bytes read from clients
	out  int64 // bytes written to them
	open int
	peak int
	held []net.Conn
	wg   sync.WaitGroup
}

var reply = bytes.Repeat([]byte("response "), 1000)

func newUpstream(t *testing.T, mode string) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{l: l, mode: mode}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.open++
			u.peak = max(u.peak, u.open)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				u.serve(c)
			}()
		}
	}()
	t.Cleanup(u.close)
	return u
}

func (u *upstream) serve(c net.Conn) {
	defer func() {
		u.mu.Lock()
		u.open--
		u.mu.Unlock()
	}()
	switch u.mode {
	case "echo":
		n, _ := io.Copy(c, c)
		u.count(n, n)
		c.Close()
	case "reply":
		n, _ := io.Copy(io.Discard, c)
		m, _ := c.Write(reply)
		u.count(n, int64(m))
		c.Close()
	case "hold":
		u.mu.Lock()
		u.held = append(u.held, c)
		u.mu.Unlock()
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}
}

func (u *upstream) count(in, out int64) {
	u.mu.Lock()
	u.in += in
	u.out += out
	u.mu.Unlock()
}

func (u *upstream) port() uint16 { return uint16(u.l.Addr().(*net.TCPAddr).Port) }

func (u *upstream) close() {
	u.l.Close()
	u.mu.Lock()
	for _, c := range u.held {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// hostForwarder is a forwarder whose listener is on the host's loopback
// (no namespace): every connection to it goes to dst.
func hostForwarder(t *testing.T, max int, dst target, pins Pins) (*forwarder, *auditor, string) {
	return hostForwarderIn(t, max, dst, pins, nil)
}

// hostForwarderIn is hostForwarder whose connections also take from the
// sidecar budget b (nil: none).
func hostForwarderIn(t *testing.T, max int, dst target, pins Pins, b *Budget) (*forwarder, *auditor, string) {
	t.Helper()
	aud := newAuditor(nil)
	f := newForwarder(max, func(netip.AddrPort) (target, bool) { return dst, dst.dest != "" }, newResolver(pins), aud)
	f.budget = b
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.serve(l)
	t.Cleanup(f.close)
	return f, aud, l.Addr().String()
}

// waitEvents waits until aud holds n events (or the deadline) and takes
// them.
func waitEvents(t *testing.T, aud *auditor, n int) []Event {
	t.Helper()
	var got []Event
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, aud.take()...)
		if len(got) < n {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if len(got) < n {
		t.Fatalf("%d audit entries, want %d: %+v", len(got), n, got)
	}
	return got
}

// TestForwarder_CopiesBothWaysAndCounts: a request half-closed by the
// client reaches the destination whole, the reply comes back whole, and
// the one allowed entry counts exactly the payload each way.
func TestForwarder_CopiesBothWaysAndCounts(t *testing.T) {
	up := newUpstream(t, "reply")
	_, aud, addr := hostForwarder(t, 4, addrTarget(netip.MustParseAddr("127.0.0.1"), up.port()), nil)
	aud.setTurn("t1")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	req := make([]byte, 300_000)
	_, _ = rand.Read(req)
	go func() {
		_, _ = c.Write(req)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || !bytes.Equal(got, reply) {
		t.Fatalf("reply %d bytes (%v), want %d", len(got), err, len(reply))
	}
	ev := waitEvents(t, aud, 1)[0]
	if ev.Decision != Allowed || ev.BytesOut != int64(len(req)) || ev.BytesIn != int64(len(reply)) ||
		ev.Destination != "127.0.0.1:"+itoa(up.port()) || ev.RequestID != "t1" || ev.Reason != "" {
		t.Errorf("audit %+v", ev)
	}
	up.mu.Lock()
	in := up.in
	up.mu.Unlock()
	if in != int64(len(req)) {
		t.Errorf("upstream read %d bytes, want %d", in, len(req))
	}
	if tot := aud.totals(); tot.Allowed != 1 || tot.BytesOut != uint64(len(req)) || tot.BytesIn != uint64(len(reply)) {
		t.Errorf("totals %+v", tot)
	}
}

// TestForwarder_LimitHolds: with max 3, holding connections open, the
// destination never sees more than 3 at once; the rest are reset and
// audited denied once (ReasonLimit), and a slot freed is usable again.
func TestForwarder_LimitHolds(t *testing.T) {
	up := newUpstream(t, "hold")
	f, aud, addr := hostForwarder(t, 3, addrTarget(netip.MustParseAddr("127.0.0.1"), up.port()), nil)
	var conns []net.Conn
	refused := 0
	for i := 0; i < 10; i++ {
		// A connection past the limit is accepted and reset at once: its
		// connect or its first read fails.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			refused++
			continue
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			refused++
		}
	}
	if refused != 7 {
		t.Errorf("%d connections refused, want 7 (limit 3 of 10)", refused)
	}
	up.mu.Lock()
	peak := up.peak
	up.mu.Unlock()
	if peak > 3 || f.active.Load() != 3 {
		t.Errorf("upstream saw %d at once, forwarder has %d open; limit 3", peak, f.active.Load())
	}
	ev := waitEvents(t, aud, 1)
	if len(ev) != 1 || ev[0].Decision != Denied || ev[0].Reason != ReasonLimit {
		t.Errorf("denied entries %+v, want one (rate-limited) for the limit", ev)
	}
	if aud.totals().Denied != 7 {
		t.Errorf("denied total %d, want 7", aud.totals().Denied)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.active.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if f.active.Load() != 0 {
		t.Fatalf("%d still open after the clients closed", f.active.Load())
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("a connection after the slots freed was refused: %v", err)
	}
}

// TestForwarder_SidecarBudgetIsShared: two sessions' forwarders share a
// sidecar Budget of 2: with two connections held through the first, the
// second's is reset at once and audited denied (ReasonSidecarLimit) though
// its own limit is far off; once one is closed, the second's goes through.
func TestForwarder_SidecarBudgetIsShared(t *testing.T) {
	up := newUpstream(t, "hold")
	budget := NewBudget(2)
	mk := func() (*forwarder, *auditor, string) {
		return hostForwarderIn(t, 64, addrTarget(netip.MustParseAddr("127.0.0.1"), up.port()), nil, budget)
	}
	fa, _, addrA := mk()
	_, audB, addrB := mk()
	held := func(addr string) (net.Conn, bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, false
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = c.Read(make([]byte, 1))
		return c, isTimeout(err)
	}
	var a []net.Conn
	for i := 0; i < 2; i++ {
		c, ok := held(addrA)
		if !ok {
			t.Fatalf("connection %d of the first session was refused", i)
		}
		a = append(a, c)
	}
	if c, ok := held(addrB); ok {
		c.Close()
		t.Fatalf("the second session's connection went through with the budget spent (%d in use)", budget.InUse())
	}
	if ev := waitEvents(t, audB, 1); len(ev) != 1 || ev[0].Reason != ReasonSidecarLimit {
		t.Errorf("the second session's entries %+v, want one %q", ev, ReasonSidecarLimit)
	}
	a[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for fa.active.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	c, ok := held(addrB)
	if !ok {
		t.Fatalf("the second session's connection was refused after a slot freed (%d in use)", budget.InUse())
	}
	c.Close()
	a[1].Close()
}

// TestForwarder_DeniedAndUnreachable: an unrouted connection is reset
// and audited denied; a listed destination nobody serves is audited
// allowed with the connect error, nothing counted.
func TestForwarder_DeniedAndUnreachable(t *testing.T) {
	_, aud, addr := hostForwarder(t, 4, target{}, nil)
	c, err := net.Dial("tcp", addr)
	if err == nil {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a denied connection was not ended")
		}
		c.Close()
	}
	if ev := waitEvents(t, aud, 1)[0]; ev.Decision != Denied || ev.Reason != ReasonNotListed {
		t.Errorf("audit %+v", ev)
	}

	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	port := uint16(dead.Addr().(*net.TCPAddr).Port)
	dead.Close()
	_, aud, addr = hostForwarder(t, 4, nameTarget("gone.test", port), Pins{"gone.test": {netip.MustParseAddr("127.0.0.1")}})
	if c, err = net.Dial("tcp", addr); err == nil {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a connection whose destination refused was not ended")
		}
		c.Close()
	}
	ev := waitEvents(t, aud, 1)[0]
	if ev.Decision != Allowed || ev.Destination != "gone.test:"+itoa(port) || ev.BytesIn != 0 || ev.Reason == "" {
		t.Errorf("audit %+v", ev)
	}
}

// TestForwarder_NamesByPin: a listed name is dialled at the pinned
// address, and an echo round-trips.
func TestForwarder_NamesByPin(t *testing.T) {
	up := newUpstream(t, "echo")
	_, aud, addr := hostForwarder(t, 4, nameTarget("model.test", up.port()), Pins{"model.test": {netip.MustParseAddr("127.0.0.1")}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("ping through the forwarder")
	_, _ = c.Write(msg)
	_ = c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	c.Close()
	if !bytes.Equal(got, msg) {
		t.Errorf("echo %q", got)
	}
	ev := waitEvents(t, aud, 1)[0]
	if ev.Destination != "model.test:"+itoa(up.port()) || ev.BytesOut != int64(len(msg)) || ev.BytesIn != int64(len(msg)) {
		t.Errorf("audit %+v", ev)
	}
}

// TestForwarder_CloseEndsConnections: close returns only after every
// forwarded connection ended and its entry was queued.
func TestForwarder_CloseEndsConnections(t *testing.T) {
	up := newUpstream(t, "hold")
	f, aud, addr := hostForwarder(t, 8, addrTarget(netip.MustParseAddr("127.0.0.1"), up.port()), nil)
	var conns []net.Conn
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.active.Load() != 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	f.close()
	if f.active.Load() != 0 {
		t.Errorf("%d open after close", f.active.Load())
	}
	if ev := aud.take(); len(ev) != 5 {
		t.Errorf("%d entries after close, want 5", len(ev))
	}
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("a client connection outlived close: %v", err)
		}
		c.Close()
	}
}

// TestResolver_PinsAndRebinding: pins answer without the host resolver;
// an unpinned answer of only loopback or link-local addresses is
// refused, and such addresses are dropped from a mixed answer.
func TestResolver_PinsAndRebinding(t *testing.T) {
	pins := Pins{}
	for _, s := range []string{"model.test=127.0.0.1", "Model.Test.=[::1]", "v6.test=2001:db8::1"} {
		if err := pins.ParsePin(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"model.test", "=1.2.3.4", "*.test=1.2.3.4", "a.test=localhost", "a.test=0.0.0.0", "a.test=fe80::1%eth0",
		"localhost=127.0.0.1", "a.test=1.2.3.4:443"} {
		if err := (Pins{}).ParsePin(bad); err == nil {
			t.Errorf("--resolve %q accepted", bad)
		}
	}
	if err := (Pins{}).ParsePin("a.test=1.2.3.4:443"); err == nil || !strings.Contains(err.Error(), "without a port") {
		t.Errorf("--resolve with a port: %v, want it to say the port is the problem", err)
	}
	r := newResolver(pins)
	asked := 0
	r.lookup = func(_ context.Context, name string) ([]netip.Addr, error) {
		asked++
		switch name {
		case "rebind.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")}, nil
		case "mixed.test":
			return []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("93.184.216.34")}, nil
		}
		return nil, errors.New("no such host")
	}
	got, err := r.resolve(context.Background(), "model.test")
	if err != nil || len(got) != 2 || got[0] != netip.MustParseAddr("127.0.0.1") || got[1] != netip.MustParseAddr("::1") || asked != 0 {
		t.Errorf("pinned: %v %v (asked %d)", got, err, asked)
	}
	if _, err := r.resolve(context.Background(), "rebind.test"); !errors.Is(err, ErrResolvedInternal) {
		t.Errorf("rebind: %v", err)
	}
	if got, err := r.resolve(context.Background(), "mixed.test"); err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("93.184.216.34") {
		t.Errorf("mixed: %v %v", got, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func itoa(p uint16) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), p).String()[len("0.0.0.0:"):]
}
