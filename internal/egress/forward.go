package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConns is limits.connections when the open names none: the
// connections one session may have open at once (docs/protocol.md §18.2).
const DefaultMaxConns = 256

// DefaultDialTimeout bounds the sidecar's connect to a destination
// (resolution included).
const DefaultDialTimeout = 15 * time.Second

// target is where an accepted connection goes: a listed name (resolved
// on the host side when dialled) or an address, and its port.
type target struct {
	dest string     // the audit's destination ("name:port", "1.2.3.4:443")
	name string     // the name to resolve; "" for an address
	addr netip.Addr // the address when name is ""
	port uint16
}

// nameTarget and addrTarget build targets.
func nameTarget(name string, port uint16) target {
	return target{dest: name + ":" + strconv.Itoa(int(port)), name: name, port: port}
}

func addrTarget(a netip.Addr, port uint16) target {
	return target{dest: netip.AddrPortFrom(a, port).String(), addr: a, port: port}
}

// router says where a connection accepted on local (the address the
// tree dialled, from getsockname) goes; ok false denies it, with the
// destination to audit.
type router func(local netip.AddrPort) (t target, ok bool)

// forwarder accepts the tree's connections on listeners inside its
// network namespace and copies each, both ways, to a connection the
// sidecar makes on the host side. At most max are open at once; the
// copy is io.Copy between two *net.TCPConn, which Linux splices (no
// user-space buffer; elsewhere 32 KiB per direction).
type forwarder struct {
	max         int64
	budget      *Budget // the sidecar's, shared by its sessions; nil = none
	dialTimeout time.Duration
	route       router
	res         *resolver
	aud         *auditor
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)

	ctx    context.Context
	cancel context.CancelFunc
	active atomic.Int64
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
}

func newForwarder(max int, route router, res *resolver, aud *auditor) *forwarder {
	if max <= 0 {
		max = DefaultMaxConns
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &net.Dialer{KeepAlive: -1}
	return &forwarder{max: int64(max), dialTimeout: DefaultDialTimeout, route: route, res: res, aud: aud, dial: d.DialContext,
		ctx: ctx, cancel: cancel, listeners: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
}

// serve accepts on l until l or the forwarder is closed; it owns l.
func (f *forwarder) serve(l net.Listener) {
	if !f.track(l, true) {
		_ = l.Close()
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer f.track(l, false)
		backoff := time.Duration(0)
		for {
			c, err := l.Accept()
			if err != nil {
				if f.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				// EMFILE and the like: wait, as net/http does, rather
				// than spin; the kernel keeps the backlog bounded.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-f.ctx.Done():
					return
				}
				continue
			}
			backoff = 0
			f.accepted(c.(*net.TCPConn))
		}
	}()
}

// accepted routes one connection: denied, over the limit, or forwarded
// by a goroutine of its own.
func (f *forwarder) accepted(c *net.TCPConn) {
	start := time.Now()
	local := addrPortOf(c.LocalAddr())
	t, ok := f.route(local)
	if !ok {
		f.aud.refused(t.dest, ReasonNotListed)
		reset(c)
		return
	}
	if f.active.Add(1) > f.max {
		f.active.Add(-1)
		f.aud.refused(t.dest, ReasonLimit)
		reset(c)
		return
	}
	if !f.budget.take() {
		f.active.Add(-1)
		f.aud.refused(t.dest, ReasonSidecarLimit)
		reset(c)
		return
	}
	if !f.track(c, true) {
		f.active.Add(-1)
		f.budget.give()
		reset(c)
		return
	}
	turn := f.aud.currentTurn()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer f.active.Add(-1)
		defer f.budget.give()
		defer f.track(c, false)
		f.forward(c, t, turn, start)
	}()
}

// forward dials t and copies both ways until both directions ended;
// then audits the connection.
func (f *forwarder) forward(c *net.TCPConn, t target, turn string, start time.Time) {
	up, err := f.dialTarget(t)
	if err != nil {
		reset(c)
		f.aud.connected(t.dest, "connect: "+dialText(err), turn, 0, 0, time.Since(start))
		return
	}
	if !f.track(up, true) {
		reset(c)
		_ = up.Close()
		f.aud.connected(t.dest, "connect: the session is closing", turn, 0, 0, time.Since(start))
		return
	}
	defer f.track(up, false)
	out, in := splice(c, up)
	f.aud.connected(t.dest, "", turn, out, in, time.Since(start))
}

// splice copies a→b and b→a until both directions ended, half-closing
// each side after its peer's EOF and closing both on an error; it
// returns the bytes copied each way.
func splice(a, b *net.TCPConn) (aToB, bToA int64) {
	done := make(chan int64, 1)
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = a.Close()
			_ = b.Close()
		})
	}
	go func() {
		n, err := io.Copy(b, a)
		if err != nil {
			closeBoth()
		} else {
			_ = b.CloseWrite()
		}
		done <- n
	}()
	n, err := io.Copy(a, b)
	if err != nil {
		closeBoth()
	} else {
		_ = a.CloseWrite()
	}
	aToB = <-done
	closeBoth()
	return aToB, n
}

// dialTarget connects to t from the host side: a name is resolved now
// (pins first) and its addresses tried in order.
func (f *forwarder) dialTarget(t target) (*net.TCPConn, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.dialTimeout)
	defer cancel()
	addrs := []netip.Addr{t.addr}
	if t.name != "" {
		var err error
		if addrs, err = f.res.resolve(ctx, t.name); err != nil {
			return nil, err
		}
	}
	var first error
	for _, a := range addrs {
		c, err := f.dial(ctx, "tcp", netip.AddrPortFrom(a, t.port).String())
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// track adds (add) or removes x from what close ends; adding after close
// reports false.
func (f *forwarder) track(x any, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch v := x.(type) {
	case net.Listener:
		if !add {
			delete(f.listeners, v)
			return true
		}
		if f.closed {
			return false
		}
		f.listeners[v] = struct{}{}
	case net.Conn:
		if !add {
			delete(f.conns, v)
			return true
		}
		if f.closed {
			return false
		}
		f.conns[v] = struct{}{}
	}
	return true
}

// close stops every listener and connection and waits for the
// forwarder's goroutines (their audit entries are queued by then).
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	f.cancel()
	for l := range f.listeners {
		_ = l.Close()
	}
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// reset closes c with an RST (SO_LINGER 0): the tree's connect or next
// read fails at once, and no TIME_WAIT is kept.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// addrPortOf is a *net.TCPAddr as an unmapped netip.AddrPort.
func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// dialText is a dial error for the audit, without the sidecar's own
// addresses.
func dialText(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return "the name does not resolve"
		}
		return "the name could not be resolved"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}
