package egress

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/acpx-sidecar/acpx-sidecar/internal/egress/allow"
)

// The tree's DNS (docs/protocol.md §19.1): a server the sidecar runs
// inside the namespace, on the addresses /etc/resolv.conf names, over UDP
// and TCP. It answers A for a listed name with the name's synthetic
// address (names.assign), NODATA for its other types (AAAA included: the
// names are reached over IPv4 inside the tree), and NXDOMAIN for a name
// no entry admits, audited denied (ReasonNameNotListed) unless it is a
// reverse lookup of an address (PTR under in-addr.arpa or ip6.arpa, which
// resolvers and tools make on their own); a query whose name does not
// parse is FORMERR, audited as MalformedQuery.

// dnsTTL is the TTL of an answer, in seconds: a name keeps its address
// for the session's life, so any TTL is right; short enough that a
// caching stub does not outlive a session's namespace.
const dnsTTL = 60

// Bounds of the DNS server.
const (
	maxDNSMessage  = 4096 // bytes of a query read (UDP datagram or TCP message)
	maxDNSTCPConns = 16   // concurrent TCP clients; more are closed
	dnsTCPIdle     = 10 * time.Second
)

// dnsServer answers the tree's queries for one session.
type dnsServer struct {
	list  allow.List
	names *names
	aud   *auditor

	tcpConns chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	closers  []io.Closer
	closed   bool
}

func newDNSServer(list allow.List, n *names, aud *auditor) *dnsServer {
	return &dnsServer{list: list, names: n, aud: aud, tcpConns: make(chan struct{}, maxDNSTCPConns)}
}

// answer builds the response to one query message; nil for a message
// that is not worth an answer (not a query, unparseable header).
func (d *dnsServer) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, Authoritative: true}
	q, err := p.Question()
	if h.OpCode != 0 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return build(rh, nil, nil)
	}
	if err != nil {
		rh.RCode = dnsmessage.RCodeFormatError
		d.aud.refused(MalformedQuery, ReasonNameNotListed)
		return build(rh, nil, nil)
	}
	name, ok := allow.CanonicalName(q.Name.String())
	if !ok || !d.list.AllowsName(name) {
		rh.RCode = dnsmessage.RCodeNameError
		if q.Type != dnsmessage.TypePTR || !reverseName(name) {
			shown := name
			if !ok {
				shown = q.Name.String()
				if len(shown) > 255 {
					shown = shown[:255]
				}
			}
			d.aud.refused(shown, ReasonNameNotListed)
		}
		return build(rh, &q, nil)
	}
	if q.Type != dnsmessage.TypeA && q.Type != dnsmessage.TypeALL {
		return build(rh, &q, nil) // NODATA
	}
	a, err := d.names.assign(name)
	if err != nil {
		rh.RCode = dnsmessage.RCodeServerFailure
		d.aud.refused(name, ReasonNames)
		return build(rh, &q, nil)
	}
	ans := &dnsmessage.AResource{A: a.As4()}
	return build(rh, &q, ans)
}

// build encodes a response: the question q (if any) and one A answer.
func build(h dnsmessage.Header, q *dnsmessage.Question, a *dnsmessage.AResource) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 128), h)
	b.EnableCompression()
	if q != nil {
		_ = b.StartQuestions()
		_ = b.Question(*q)
		if a != nil {
			_ = b.StartAnswers()
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}, *a)
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// serveUDP answers datagrams on pc until it is closed; it owns pc.
func (d *dnsServer) serveUDP(pc net.PacketConn) {
	if !d.own(pc) {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		buf := make([]byte, maxDNSMessage)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			if resp := d.answer(buf[:n]); resp != nil {
				if len(resp) > 512 {
					resp = truncated(resp)
				}
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
}

// truncated is a response cut to its header with TC set (never happens
// with one A answer; kept for a long question).
func truncated(resp []byte) []byte {
	out := append([]byte(nil), resp[:12]...)
	out[2] |= 0x02 // TC
	for i := 4; i < 12; i++ {
		out[i] = 0
	}
	return out
}

// serveTCP answers length-prefixed queries on l's connections until l
// is closed; it owns l.
func (d *dnsServer) serveTCP(l net.Listener) {
	if !d.own(l) {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(5 * time.Millisecond)
				continue
			}
			select {
			case d.tcpConns <- struct{}{}:
			default:
				_ = c.Close() // bounded: the client retries or falls back
				continue
			}
			if !d.own(c) {
				<-d.tcpConns
				continue
			}
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer func() { <-d.tcpConns }()
				defer c.Close()
				d.serveConn(c)
			}()
		}
	}()
}

// serveConn answers one TCP client's queries until EOF or idle.
func (d *dnsServer) serveConn(c net.Conn) {
	buf := make([]byte, 2+maxDNSMessage)
	for {
		_ = c.SetDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := io.ReadFull(c, buf[:2]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(buf[:2]))
		if n > maxDNSMessage {
			return
		}
		if _, err := io.ReadFull(c, buf[2:2+n]); err != nil {
			return
		}
		resp := d.answer(buf[2 : 2+n])
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// own registers x to be closed by close; false (and x closed) after it.
func (d *dnsServer) own(x io.Closer) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = x.Close()
		return false
	}
	d.closers = append(d.closers, x)
	return true
}

// close ends every socket and waits for the server's goroutines.
func (d *dnsServer) close() {
	d.mu.Lock()
	d.closed = true
	for _, x := range d.closers {
		_ = x.Close()
	}
	d.closers = nil
	d.mu.Unlock()
	d.wg.Wait()
}

// MalformedQuery is the audit destination of a DNS query whose name does
// not parse (a label holding a dot, say): what it asked cannot be shown.
const MalformedQuery = "(malformed DNS query)"

// reverseName reports whether name is an address's reverse-lookup name.
func reverseName(name string) bool {
	return strings.HasSuffix(name, ".in-addr.arpa") || strings.HasSuffix(name, ".ip6.arpa")
}
