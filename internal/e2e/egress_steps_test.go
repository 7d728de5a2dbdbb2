package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Steps of the egress tests (egress_test.go, docs/protocol.md §19.1).

// networkNote is a session/network notification as the tests read it.
type networkNote struct {
	Session     string  `json:"session"`
	SessionKey  string  `json:"sessionKey"`
	RequestID   *string `json:"requestId"`
	Destination string  `json:"destination"`
	Decision    string  `json:"decision"`
	Reason      string  `json:"reason"`
	BytesOut    int64   `json:"bytesOut"`
	BytesIn     int64   `json:"bytesIn"`
	Ms          int64   `json:"ms"`
}

// networkNotes are the session/network notifications of session so far.
func networkNotes(s *sidecar, session string) []networkNote {
	var out []networkNote
	for _, f := range s.notesOf("session/network") {
		var n networkNote
		if json.Unmarshal(f.Params, &n) == nil && n.Session == session {
			out = append(out, n)
		}
	}
	return out
}

// networkTotals is session/status and sidecar/stats `network`.
type networkTotals struct {
	Allowed  uint64 `json:"allowed"`
	Denied   uint64 `json:"denied"`
	BytesOut uint64 `json:"bytesOut"`
	BytesIn  uint64 `json:"bytesIn"`
}

// byteCounter counts what a loopback server's connections read and wrote,
// how many it accepted, and the most it had open at once: what a
// destination saw, for the audit to be compared with.
type byteCounter struct {
	in, out, accepted atomic.Int64
	mu                sync.Mutex
	open, peak        int
}

func (c *byteCounter) snapshot() (in, out, accepted int64, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in.Load(), c.out.Load(), c.accepted.Load(), c.peak
}

type countingListener struct {
	net.Listener
	c *byteCounter
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.c.accepted.Add(1)
	l.c.mu.Lock()
	l.c.open++
	l.c.peak = max(l.c.peak, l.c.open)
	l.c.mu.Unlock()
	return &countingConn{Conn: conn, c: l.c}, nil
}

type countingConn struct {
	net.Conn
	c    *byteCounter
	once sync.Once
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.c.out.Add(int64(n))
	return n, err
}

func (c *countingConn) Close() error {
	c.once.Do(func() {
		c.c.mu.Lock()
		c.c.open--
		c.c.mu.Unlock()
	})
	return c.Conn.Close()
}

// countingServer serves h on a loopback port of the host, counting bytes
// and connections; it returns the port.
func countingServer(t *testing.T, h http.Handler) (int, *byteCounter) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &byteCounter{}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = countingListener{Listener: l, c: c}
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port, c
}

// holdServer accepts connections on a loopback port and holds each open
// until its client closes it (or the test ends), counting them.
func holdServer(t *testing.T) (int, *byteCounter) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &byteCounter{}
	cl := countingListener{Listener: l, c: c}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := cl.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = conn.Read(make([]byte, 1)) // until the client's FIN or RST
				conn.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, conn := range conns {
			conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().(*net.TCPAddr).Port, c
}

// vmKiB reads a VmRSS or VmHWM line (kB) of pid's status.
func vmKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// allowSandbox is a sandbox.network allow list (filesystem left to the
// default).
func allowSandbox(entries ...string) map[string]any {
	if entries == nil {
		entries = []string{}
	}
	return map[string]any{"network": map[string]any{"allow": entries}}
}
