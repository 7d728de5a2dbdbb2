//go:build linux

package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// New makes the tree's network namespace for cfg and starts serving it
// (see the package doc). Errors: ErrUnsupported (wrapped) when the
// namespace or its TUN device cannot be made (no privilege, no
// /dev/net/tun); otherwise the step that failed (a listener that could
// not bind, say); nothing is left behind either way.
func New(cfg Config) (*Network, error) {
	ns, err := newNetNS()
	if err != nil {
		return nil, fmt.Errorf("%w: network namespace: %w", ErrUnsupported, err)
	}
	aud := newAuditor(cfg.Wake)
	if cfg.Shared != nil {
		aud.shared = cfg.Shared
	}
	n := &Network{list: cfg.Allow, ns: ns, aud: aud, names: newNames(MaxNames), done: make(chan struct{})}
	n.fwd = newForwarder(cfg.MaxConns, n.route, newResolver(cfg.Pins), aud)
	n.fwd.budget = cfg.Budget
	n.dns = newDNSServer(cfg.Allow, n.names, aud)
	var dnsAddrs []netip.Addr
	for _, s := range nameservers(cfg.ResolvConf) {
		s, _, _ = strings.Cut(s, "%") // a zone names a host interface
		if a, err := netip.ParseAddr(s); err == nil {
			dnsAddrs = append(dnsAddrs, a.Unmap())
		}
	}
	err = inNetNS(ns, func() error {
		tun, err := configure(append(cfg.Allow.Addrs(), dnsAddrs...))
		if err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
				return fmt.Errorf("%w: %w", ErrUnsupported, err)
			}
			return err
		}
		n.tun = tun
		return n.listen(dnsAddrs)
	})
	if err != nil {
		n.fwd.close()
		n.dns.close()
		if n.tun != nil {
			_ = n.tun.Close()
		}
		closeFD(ns)
		return nil, err
	}
	go n.readTUN()
	return n, nil
}

// listen creates, inside the namespace, a listener per listed port and
// the DNS server's sockets, and starts serving them.
func (n *Network) listen(dnsAddrs []netip.Addr) error {
	var lc net.ListenConfig
	ctx := context.Background()
	ports := n.list.Ports()
	has53 := false
	for _, p := range ports {
		l, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(int(p)))
		if err != nil {
			return fmt.Errorf("listen on port %d: %w", p, err)
		}
		n.fwd.serve(l)
		has53 = has53 || p == 53
	}
	v6 := ipv6Enabled()
	for _, a := range dnsAddrs {
		if a.Is6() && !v6 {
			continue
		}
		ap := netip.AddrPortFrom(a, 53).String()
		pc, err := lc.ListenPacket(ctx, "udp", ap)
		if err != nil {
			return fmt.Errorf("DNS on %s: %w", ap, err)
		}
		n.dns.serveUDP(pc)
		if has53 {
			// The port's forwarder listens on every address already: DNS
			// over TCP is not offered (the stub resolvers ask over UDP).
			continue
		}
		l, err := lc.Listen(ctx, "tcp", ap)
		if err != nil {
			return fmt.Errorf("DNS over TCP on %s: %w", ap, err)
		}
		n.dns.serveTCP(l)
	}
	return nil
}

// route is the forwarders' router: a listed address on its port, or a
// name's synthetic address on a port listed for the name.
func (n *Network) route(local netip.AddrPort) (target, bool) {
	a, port := local.Addr().Unmap(), local.Port()
	if n.list.AllowsAddr(a, port) {
		return addrTarget(a, port), true
	}
	if SyntheticPrefix.Contains(a) {
		if name, ok := n.names.lookup(a); ok {
			return nameTarget(name, port), n.list.AllowsNamePort(name, port)
		}
	}
	return addrTarget(a, port), false
}

// readTUN reads the packets routed to the TUN device until it is
// closed: a TCP SYN is answered RST, a UDP datagram ICMP-prohibited,
// and each attempt is audited denied; the kernel's own housekeeping is
// ignored. One 64 KiB buffer, whatever the flood.
func (n *Network) readTUN() {
	defer close(n.done)
	buf := make([]byte, 1<<16)
	for {
		k, err := n.tun.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EBADF) {
				return
			}
			if errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN) {
				continue
			}
			return
		}
		pkt := buf[:k]
		p, perr := parsePacket(pkt)
		if !p.dst.IsValid() || p.housekeeping() {
			continue
		}
		switch {
		case perr != nil:
			// A fragment or truncated packet: nothing to answer.
		case p.proto == protoTCP:
			if !p.isSYN() {
				continue // a stray segment of no connection
			}
			_, _ = n.tun.Write(tcpReset(&p))
			n.aud.refused(p.destination(), ReasonNotListed)
			continue
		case p.proto == protoUDP:
			_, _ = n.tun.Write(icmpProhibited(&p, pkt))
		}
		n.aud.refused(p.destination(), ReasonNotTCP)
	}
}

// closeFD closes a descriptor this package opened.
func closeFD(fd int) { _ = unix.Close(fd) }

// Probe reports whether New can work on this machine, by making (and
// dropping at once) a network namespace with a TUN device in it; the
// error says why not (initialize.capabilities.sandbox.networkAllow,
// docs/protocol.md §19.1).
func Probe() error {
	ns, err := newNetNS()
	if err != nil {
		return fmt.Errorf("%w: network namespace: %w", ErrUnsupported, err)
	}
	defer closeFD(ns)
	return inNetNS(ns, func() error {
		tun, err := openTUN(tunName)
		if err != nil {
			return fmt.Errorf("%w: tun: %w", ErrUnsupported, err)
		}
		return tun.Close()
	})
}
