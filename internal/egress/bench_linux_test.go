//go:build linux

package egress

import (
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/acpx-sidecar/acpx-sidecar/internal/egress/allow"
)

// benchServer is the destination of BenchmarkForwarder on the host's
// loopback: a connection whose first byte is 'D' gets downloadBytes
// bytes; one whose first byte is 'R' gets a reply of smallBytes per
// request of smallBytes, until EOF.
func benchServer(b *testing.B, downloadBytes int64) (uint16, func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req := make([]byte, smallBytes)
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				if req[0] == 'D' {
					for left := downloadBytes; left > 0; {
						n, err := c.Write(chunk[:min(int64(len(chunk)), left)])
						if err != nil {
							return
						}
						left -= int64(n)
					}
					return
				}
				for {
					if _, err := c.Write(req); err != nil {
						return
					}
					if _, err := io.ReadFull(c, req); err != nil {
						return
					}
				}
			}()
		}
	}()
	return uint16(l.Addr().(*net.TCPAddr).Port), func() { l.Close() }
}

// smallBytes is the size of one small request and of its reply.
const smallBytes = 100

// download reads the whole download from c and returns its rate in MB/s.
func download(b *testing.B, c net.Conn) float64 {
	b.Helper()
	req := make([]byte, smallBytes)
	req[0] = 'D'
	start := time.Now()
	if _, err := c.Write(req); err != nil {
		b.Fatal(err)
	}
	n, err := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	return float64(n) / 1e6 / time.Since(start).Seconds()
}

// roundTrips runs k connections, each a connect, one small request and
// its reply, and a close, with dial, and returns each one's time.
func roundTrips(b *testing.B, k int, dial func() (net.Conn, error)) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, k)
	req := make([]byte, smallBytes)
	req[0] = 'R'
	for i := 0; i < k; i++ {
		start := time.Now()
		c, err := dial()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, req); err != nil {
			b.Fatal(err)
		}
		c.Close()
		out = append(out, time.Since(start))
	}
	return out
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkForwarder measures the forwarder against a direct loopback
// connection (docs/architecture.md, "Egress by name"): a download
// (ACPX_EGRESS_BENCH_BYTES, default 1 GiB) from inside the tree's
// namespace through a listed 127.0.0.1 entry vs. straight from the host,
// and ACPX_EGRESS_BENCH_CONNS (default 10,000) connections of one small
// request each, both ways, interleaved in rounds. It reports
// direct-MB/s, forwarded-MB/s, throughput-ratio, and p50 per connection
// direct-p50-us, forwarded-p50-us and added-p50-us. The tree's side runs
// on an OS thread inside the namespace (inNetNS), the direct side on a
// locked thread of the host's, so both pay the same scheduling.
func BenchmarkForwarder(b *testing.B) {
	size := int64(1 << 30)
	if v, err := strconv.ParseInt(os.Getenv("ACPX_EGRESS_BENCH_BYTES"), 10, 64); err == nil && v > 0 {
		size = v
	}
	conns := 10000
	if v, err := strconv.Atoi(os.Getenv("ACPX_EGRESS_BENCH_CONNS")); err == nil && v > 0 {
		conns = v
	}
	port, stop := benchServer(b, size)
	defer stop()
	ap := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String()
	list, err := allow.ParseList([]string{ap})
	if err != nil {
		b.Fatal(err)
	}
	n, err := New(Config{Allow: list, MaxConns: 64})
	if err != nil {
		b.Skipf("no egress namespace here: %v", err)
	}
	defer n.Close()
	done := make(chan struct{})
	defer close(done)
	go func() { // the audit's entries are taken, as a session does
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				n.TakeEvents()
			case <-done:
				return
			}
		}
	}()
	direct := func() (net.Conn, error) { return net.Dial("tcp", ap) }
	var directMBs, fwdMBs float64
	var directRT, fwdRT []time.Duration
	const rounds = 4
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			c, err := direct()
			if err != nil {
				b.Fatal(err)
			}
			directMBs += download(b, c) / rounds
			var fc net.Conn
			if err := inNetNS(n.NetNSFD(), func() (err error) { fc, err = direct(); return err }); err != nil {
				b.Fatal(err)
			}
			fwdMBs += download(b, fc) / rounds
			_ = onLockedThread(func() error {
				directRT = append(directRT, roundTrips(b, conns/rounds, direct)...)
				return nil
			})
			_ = inNetNS(n.NetNSFD(), func() error {
				fwdRT = append(fwdRT, roundTrips(b, conns/rounds, direct)...)
				return nil
			})
		}
	}
	directMBs /= float64(b.N)
	fwdMBs /= float64(b.N)
	b.ReportMetric(directMBs, "direct-MB/s")
	b.ReportMetric(fwdMBs, "forwarded-MB/s")
	b.ReportMetric(fwdMBs/directMBs, "throughput-ratio")
	dp, fp := p50(directRT), p50(fwdRT)
	b.ReportMetric(float64(dp.Microseconds()), "direct-p50-us")
	b.ReportMetric(float64(fp.Microseconds()), "forwarded-p50-us")
	b.ReportMetric(float64((fp - dp).Microseconds()), "added-p50-us")
}
