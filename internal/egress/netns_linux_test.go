//go:build linux

package egress

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the bytes its connections read and wrote: what
// a destination saw, to compare with the audit.
type countingListener struct {
	net.Listener
	in, out atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.l.out.Add(int64(n))
	return n, err
}

// stubServer is an HTTP server on the host's loopback answering body to
// every request, counting bytes.
func stubServer(t *testing.T, body string) (*httptest.Server, *countingListener, uint16) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cl, uint16(l.Addr().(*net.TCPAddr).Port)
}

// newTestNetwork is New, skipped where this machine cannot make the
// namespace (not root, no /dev/net/tun) unless ACPX_REQUIRE_EGRESS is set.
func newTestNetwork(t *testing.T, cfg Config) *Network {
	t.Helper()
	n, err := New(cfg)
	if errors.Is(err, ErrUnsupported) && os.Getenv("ACPX_REQUIRE_EGRESS") == "" && os.Geteuid() != 0 {
		t.Skipf("no egress namespace here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// eventsUntil takes n's audit entries until have says enough (or 10 s).
func eventsUntil(t *testing.T, n *Network, have func([]Event) bool) []Event {
	t.Helper()
	var got []Event
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = append(got, n.TakeEvents()...)
		if have(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit entries so far: %+v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNetwork_ExactlyTheListedDestinations is the whole rule of
// docs/protocol.md §19.1 from inside a real namespace: a listed loopback
// address and a listed name (pinned, --resolve) reach the host's server;
// a wildcard admits a name below it and not the domain itself; another
// loopback port, another address, another name and UDP do not, each
// failing fast; every allowed connection is audited with the bytes the
// server saw, and the denied ones once each.
func TestNetwork_ExactlyTheListedDestinations(t *testing.T) {
	_, seen, port := stubServer(t, "hello from the host")
	_, other, otherPort := stubServer(t, "never reached")
	ps := itoa(port)
	list := mustList(t, "127.0.0.1:"+ps, "model.test:"+ps, "*.wild.test:"+ps)
	pins := Pins{}
	for _, p := range []string{"model.test=127.0.0.1", "a.b.wild.test=127.0.0.1"} {
		if err := pins.ParsePin(p); err != nil {
			t.Fatal(err)
		}
	}
	var wakes atomic.Int64
	n := newTestNetwork(t, Config{Allow: list, Pins: pins, Wake: func() { wakes.Add(1) }})
	n.SetTurn("t1")
	res, _ := inTree(t, n, nil,
		"get http://127.0.0.1:"+ps+"/",
		"get http://model.test:"+ps+"/",
		"get http://a.b.wild.test:"+ps+"/",
		"resolve model.test",
		"resolve other.test",
		"resolve wild.test",
		"dial 127.0.0.1:"+itoa(otherPort),
		"dial 93.184.216.34:443",
		"dial [2001:db8::1]:443",
		"dial model.test:9",
		"udp 8.8.8.8:53",
	)
	for i, want := range []bool{true, true, true, true, false, false, false, false, false, false, false} {
		if res[i].OK != want {
			t.Errorf("%s: ok %v (%s), want %v", res[i].Op, res[i].OK, res[i].Err, want)
		}
	}
	for _, r := range res[:3] {
		if r.Body != len("hello from the host") {
			t.Errorf("%s: body %d bytes", r.Op, r.Body)
		}
	}
	if a := res[3].Addrs; len(a) != 1 || !SyntheticPrefix.Contains(netip.MustParseAddr(a[0])) {
		t.Errorf("model.test resolves to %v inside, want one synthetic address", a)
	}
	for _, r := range res[4:6] {
		if !strings.Contains(r.Err, "no such host") {
			t.Errorf("%s: %s, want no such host", r.Op, r.Err)
		}
	}
	for _, r := range res[6:10] {
		if !strings.Contains(r.Err, "connection refused") {
			t.Errorf("%s: %q, want connection refused (fast)", r.Op, r.Err)
		}
	}
	if r := res[10]; !strings.Contains(r.Err, "no route to host") && !strings.Contains(r.Err, "permission denied") {
		t.Errorf("%s: %q, want the ICMP refusal", r.Op, r.Err)
	}
	if other.in.Load() != 0 {
		t.Error("the unlisted loopback server was reached")
	}
	ev := eventsUntil(t, n, func(ev []Event) bool {
		a := 0
		for _, e := range ev {
			if e.Decision == Allowed {
				a++
			}
		}
		return a >= 3 && len(ev) >= 8
	})
	var allowed, denied []string
	var out, in int64
	for _, e := range ev {
		if e.Decision == Allowed {
			allowed = append(allowed, e.Destination)
			out, in = out+e.BytesOut, in+e.BytesIn
			if e.RequestID != "t1" || e.Reason != "" {
				t.Errorf("allowed entry %+v", e)
			}
		} else {
			denied = append(denied, e.Destination)
		}
	}
	slices.Sort(allowed)
	slices.Sort(denied)
	if want := []string{"127.0.0.1:" + ps, "a.b.wild.test:" + ps, "model.test:" + ps}; !slices.Equal(allowed, want) {
		t.Errorf("allowed %v, want %v", allowed, want)
	}
	if want := []string{"93.184.216.34:443", "[2001:db8::1]:443", "other.test", "udp 8.8.8.8:53", "wild.test"}; !slices.Equal(denied, want) {
		t.Errorf("denied %v, want %v", denied, want)
	}
	if out != seen.in.Load() || in != seen.out.Load() {
		t.Errorf("audit counts %d out, %d in; the server read %d and wrote %d", out, in, seen.in.Load(), seen.out.Load())
	}
	tot := n.Totals()
	if tot.Allowed != 3 || tot.Denied < 5 || tot.BytesOut != uint64(out) || tot.BytesIn != uint64(in) || wakes.Load() == 0 {
		t.Errorf("totals %+v, wakes %d", tot, wakes.Load())
	}
}

// TestNetwork_SystemResolverAndCurl: the C library's resolver (getent)
// and curl, programs that know nothing of proxies, reach a listed name
// and fail fast on any other destination (skipped where they are not
// installed).
func TestNetwork_SystemResolverAndCurl(t *testing.T) {
	_, _, port := stubServer(t, "via curl")
	ps := itoa(port)
	n := newTestNetwork(t, Config{Allow: mustList(t, "model.test:"+ps), Pins: Pins{"model.test": {netip.MustParseAddr("127.0.0.1")}}})
	if _, err := exec.LookPath("getent"); err == nil {
		if _, out := inTree(t, n, []string{"getent", "ahostsv4", "model.test"}, ""); !strings.Contains(out, "198.18.") {
			t.Errorf("getent ahostsv4 model.test: %q", out)
		}
		if _, out := inTree(t, n, []string{"getent", "hosts", "other.test"}, ""); !strings.HasPrefix(out, "error") {
			t.Errorf("getent hosts other.test: %q, want not found", out)
		}
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl here")
	}
	if _, out := inTree(t, n, []string{"curl", "-sS", "-m", "10", "http://model.test:" + ps + "/"}, ""); out != "via curl" {
		t.Errorf("curl model.test: %q", out)
	}
	start := time.Now()
	_, out := inTree(t, n, []string{"curl", "-sS", "-m", "20", "http://1.1.1.1/"}, "")
	if !strings.HasPrefix(out, "error") || time.Since(start) > 10*time.Second {
		t.Errorf("curl 1.1.1.1: %q after %v, want a fast refusal", out, time.Since(start))
	}
}

// TestNetwork_CloseFreesEverything: after Close no goroutine of the
// network is left (goleak, TestMain), its descriptor is closed, and a
// second Close is harmless.
func TestNetwork_CloseFreesEverything(t *testing.T) {
	n := newTestNetwork(t, Config{Allow: mustList(t, "10.9.8.7:80", "[2001:db8::5]:80", "x.test:80")})
	fd := n.NetNSFD()
	target, err := os.Readlink(filepath.Join("/proc/self/fd", itoa(uint16(fd))))
	if err != nil || !strings.HasPrefix(target, "net:") {
		t.Fatalf("namespace fd %d is %q (%v)", fd, target, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.Close()
	}()
	wg.Wait()
	n.Close()
	if now, err := os.Readlink(filepath.Join("/proc/self/fd", itoa(uint16(fd)))); err == nil && now == target {
		t.Errorf("the namespace descriptor %d is still open after Close", fd)
	}
}

// TestProbe: a machine that made the namespaces above probes as able.
func TestProbe(t *testing.T) {
	err := Probe()
	if err != nil && os.Geteuid() == 0 && os.Getenv("ACPX_REQUIRE_EGRESS") != "" {
		t.Fatal(err)
	}
	n, nerr := New(Config{})
	if (nerr == nil) != (err == nil) {
		t.Errorf("Probe says %v, New says %v", err, nerr)
	}
	n.Close()
}
