//go:build linux

package egress

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The tree's network namespace, made and configured by the sidecar
// (docs/architecture.md, "Egress by name"). A socket keeps the namespace
// it was created in, so every socket the sidecar opens for the tree — the
// forwarders' listeners, the DNS server's — is created on an OS thread
// that has joined the namespace for just that call (inNetNS) and then
// serves from any thread; the sidecar's connections to destinations are
// made from its own namespace, the host's.

// tunName is the namespace's TUN device: its default route, through which
// the sidecar sees (and refuses) every packet for a destination that is
// not the namespace's own.
const tunName = "egress0"

// Addresses of the TUN device: the source address the kernel gives a
// connection routed to it (a packet needs one), from the benchmarking
// ranges next to SyntheticPrefix (RFC 2544, RFC 5180).
var (
	tunAddr4 = netip.MustParseAddr("198.19.0.1")
	tunAddr6 = netip.MustParseAddr("2001:2::1")
)

// newNetNS makes a network namespace and returns a descriptor of it
// (close-on-exec); nothing is left running in it.
func newNetNS() (int, error) {
	var fd int
	err := onLockedThread(func() error {
		host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(host)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if serr := unix.Setns(host, unix.CLONE_NEWNET); serr != nil {
			if err == nil {
				unix.Close(fd)
			}
			return errThreadLost{serr}
		}
		return err
	})
	return fd, err
}

// errThreadLost is an error after which the thread could not return to
// the sidecar's own namespace: onLockedThread leaves it locked, so the
// runtime ends it with its goroutine.
type errThreadLost struct{ err error }

func (e errThreadLost) Error() string {
	return "setns back to the sidecar's namespace: " + e.err.Error()
}

// onLockedThread runs fn on a goroutine locked to its OS thread and
// waits; unless fn returns errThreadLost, the thread is unlocked after
// (it is in the namespace it started in).
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := fn()
		if _, lost := err.(errThreadLost); !lost {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// inNetNS runs fn on an OS thread that has joined the namespace ns, then
// returns the thread to the sidecar's namespace. Sockets fn creates stay
// in ns.
func inNetNS(ns int, fn func() error) error {
	return onLockedThread(func() error {
		host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(host)
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		ferr := fn()
		if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
			return errThreadLost{err}
		}
		return ferr
	})
}

// configure sets the namespace up, from inside it: lo up with addrs (the
// address entries and the DNS server's addresses outside 127/8 and ::1),
// SyntheticPrefix routed locally, and returns the TUN device, up, with
// the default routes (IPv4 and, where the namespace has IPv6, IPv6).
func configure(addrs []netip.Addr) (*os.File, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return nil, fmt.Errorf("lo up: %w", err)
	}
	v6 := ipv6Enabled()
	for _, a := range addrs {
		if a.IsLoopback() || a.Is6() && !v6 {
			continue
		}
		if err := h.AddrAdd(lo, hostAddr(a)); err != nil && err != unix.EEXIST {
			return nil, fmt.Errorf("address %s on lo: %w", a, err)
		}
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Dst: prefixNet(SyntheticPrefix),
		Type: unix.RTN_LOCAL, Table: unix.RT_TABLE_LOCAL, Scope: netlink.SCOPE_HOST}); err != nil {
		return nil, fmt.Errorf("local route %s: %w", SyntheticPrefix, err)
	}
	tun, err := openTUN(tunName)
	if err != nil {
		return nil, fmt.Errorf("tun: %w", err)
	}
	fail := func(step string, err error) (*os.File, error) {
		tun.Close()
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	link, err := h.LinkByName(tunName)
	if err != nil {
		return fail("tun link", err)
	}
	if err := h.AddrAdd(link, hostAddr(tunAddr4)); err != nil {
		return fail("tun address", err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fail("tun up", err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(netip.MustParsePrefix("0.0.0.0/0")),
		Scope: netlink.SCOPE_LINK}); err != nil {
		return fail("default route", err)
	}
	if v6 {
		if err := h.AddrAdd(link, hostAddr(tunAddr6)); err != nil {
			return fail("tun IPv6 address", err)
		}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(netip.MustParsePrefix("::/0"))}); err != nil {
			return fail("IPv6 default route", err)
		}
	}
	return tun, nil
}

// ipv6Enabled reports whether the current namespace has IPv6.
func ipv6Enabled() bool {
	b, err := os.ReadFile("/proc/sys/net/ipv6/conf/lo/disable_ipv6")
	return err == nil && len(b) > 0 && b[0] == '0'
}

// hostAddr is a as a /32 or /128 address (IPv6 without duplicate
// address detection, usable at once).
func hostAddr(a netip.Addr) *netlink.Addr {
	na := &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(a, a.BitLen()))}
	if a.Is6() {
		na.Flags = unix.IFA_F_NODAD
	}
	return na
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// openTUN creates the TUN device name (IFF_TUN, no packet information)
// in the current namespace and returns its descriptor, non-blocking (read
// through the runtime's poller) and close-on-exec. The device goes when
// the descriptor is closed.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun"), nil
}
