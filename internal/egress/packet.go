package egress

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
)

// What the tree sends past its own addresses reaches the sidecar as raw
// IP packets from the namespace's TUN device (its default route). This
// file reads just enough of them — the IPv4 or IPv6 header (IPv6
// extension headers skipped), then the TCP or UDP ports — to audit the
// destination, and builds the one reply that makes a refused attempt fail
// fast: a TCP RST|ACK to a SYN (the tree's connect gets ECONNREFUSED), an
// ICMP "administratively prohibited" to a UDP datagram (EHOSTUNREACH /
// EACCES on a connected socket). Nothing else is ever answered.

// IP protocol numbers this file knows.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// packet is a parsed IP packet: addresses, the transport protocol and
// (TCP, UDP) its ports; for TCP its flags, sequence number and payload
// length; for ICMPv6 its type.
type packet struct {
	v6       bool
	src, dst netip.Addr
	proto    uint8
	srcPort  uint16
	dstPort  uint16
	flags    uint8  // TCP
	seq      uint32 // TCP
	payload  int    // TCP payload bytes
	icmpType uint8  // ICMP, ICMPv6
	ipHdr    int    // bytes of IP header (with IPv6 extension headers)
}

var errShort = errors.New("egress: short or malformed packet")

// parsePacket reads b, one IP packet as a TUN device without packet
// information delivers it.
func parsePacket(b []byte) (packet, error) {
	var p packet
	if len(b) < 1 {
		return p, errShort
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return p, errShort
		}
		ihl := int(b[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(b[2:4]))
		if ihl < 20 || total < ihl || len(b) < total {
			return p, errShort
		}
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
			// A later fragment carries no transport header.
			p.src, p.dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
			p.proto, p.ipHdr = b[9], ihl
			return p, errShort
		}
		p.src, p.dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
		p.proto, p.ipHdr = b[9], ihl
		return p, p.transport(b[ihl:total])
	case 6:
		if len(b) < 40 {
			return p, errShort
		}
		total := 40 + int(binary.BigEndian.Uint16(b[4:6]))
		if len(b) < total {
			return p, errShort
		}
		p.v6 = true
		p.src, p.dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
		next, off := b[6], 40
		for {
			switch next {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if total < off+8 {
					return p, errShort
				}
				next, off = b[off], off+8+int(b[off+1])*8
				continue
			case 44: // fragment
				if total < off+8 {
					return p, errShort
				}
				if binary.BigEndian.Uint16(b[off+2:off+4])&0xfff8 != 0 {
					p.proto, p.ipHdr = b[off], off+8
					return p, errShort
				}
				next, off = b[off], off+8
				continue
			}
			break
		}
		if off > total {
			return p, errShort
		}
		p.proto, p.ipHdr = next, off
		return p, p.transport(b[off:total])
	}
	return p, errShort
}

// transport reads the ports (TCP, UDP), TCP's flags, sequence number and
// payload length, or the ICMP type.
func (p *packet) transport(t []byte) error {
	switch p.proto {
	case protoTCP:
		if len(t) < 20 {
			return errShort
		}
		off := int(t[12]>>4) * 4
		if off < 20 || off > len(t) {
			return errShort
		}
		p.srcPort, p.dstPort = binary.BigEndian.Uint16(t[0:2]), binary.BigEndian.Uint16(t[2:4])
		p.seq, p.flags, p.payload = binary.BigEndian.Uint32(t[4:8]), t[13], len(t)-off
	case protoUDP:
		if len(t) < 8 {
			return errShort
		}
		p.srcPort, p.dstPort = binary.BigEndian.Uint16(t[0:2]), binary.BigEndian.Uint16(t[2:4])
	case protoICMP, protoICMPv6:
		if len(t) < 4 {
			return errShort
		}
		p.icmpType = t[0]
	}
	return nil
}

// isSYN reports a TCP connection attempt (SYN without ACK).
func (p *packet) isSYN() bool {
	return p.proto == protoTCP && p.flags&tcpSYN != 0 && p.flags&tcpACK == 0 && p.flags&tcpRST == 0
}

// destination is the audit's name for where p was going: "1.2.3.4:443"
// (TCP), "udp 1.2.3.4:53", "icmp 1.2.3.4", "ip proto N 1.2.3.4".
func (p *packet) destination() string {
	switch p.proto {
	case protoTCP:
		return netip.AddrPortFrom(p.dst, p.dstPort).String()
	case protoUDP:
		return "udp " + netip.AddrPortFrom(p.dst, p.dstPort).String()
	case protoICMP, protoICMPv6:
		return "icmp " + p.dst.String()
	}
	return "ip proto " + strconv.Itoa(int(p.proto)) + " " + p.dst.String()
}

// housekeeping reports a packet the kernel sends by itself on an
// interface (IPv6 neighbour discovery and multicast listener reports,
// anything to a multicast address or from an unspecified one): never
// the tree's attempt to reach a destination.
func (p *packet) housekeeping() bool {
	// IPv6 link-local traffic is the namespace's own neighbour discovery;
	// an IPv4 link-local destination (169.254.169.254, a cloud's metadata
	// service) is a connection attempt like any other: refused and audited
	// (it was dropped unaudited; adversarial trial).
	if p.dst.IsMulticast() || p.src.IsUnspecified() || (p.dst.Is6() && p.dst.IsLinkLocalUnicast()) {
		return true
	}
	return p.proto == protoICMPv6 && p.icmpType >= 130 && p.icmpType <= 143
}

// tcpReset builds the RST|ACK that refuses p, a SYN (RFC 9293 3.10.7.1:
// SEQ 0, ACK the SYN's sequence plus its length).
func tcpReset(p *packet) []byte {
	ack := p.seq + 1 + uint32(p.payload)
	var b []byte
	var tcp []byte
	if p.v6 {
		b = make([]byte, 40+20)
		b[0] = 0x60
		binary.BigEndian.PutUint16(b[4:6], 20)
		b[6], b[7] = protoTCP, 64
		s, d := p.dst.As16(), p.src.As16()
		copy(b[8:24], s[:])
		copy(b[24:40], d[:])
		tcp = b[40:]
	} else {
		b = make([]byte, 20+20)
		ipv4Header(b, 40, protoTCP, p.dst, p.src)
		tcp = b[20:]
	}
	binary.BigEndian.PutUint16(tcp[0:2], p.dstPort)
	binary.BigEndian.PutUint16(tcp[2:4], p.srcPort)
	binary.BigEndian.PutUint32(tcp[8:12], ack)
	tcp[12] = 5 << 4
	tcp[13] = tcpRST | tcpACK
	binary.BigEndian.PutUint16(tcp[16:18], transportChecksum(p.dst, p.src, protoTCP, tcp))
	return b
}

// icmpProhibited builds the ICMP error that refuses orig (the packet p
// was parsed from): ICMPv4 destination unreachable, communication
// administratively prohibited (3/13), quoting the IP header and 8 bytes;
// ICMPv6 destination unreachable, administratively prohibited (1/1),
// quoting as much as keeps the reply within the IPv6 minimum MTU.
func icmpProhibited(p *packet, orig []byte) []byte {
	if p.v6 {
		quote := orig[:min(len(orig), 1280-40-8)]
		b := make([]byte, 40+8+len(quote))
		b[0] = 0x60
		binary.BigEndian.PutUint16(b[4:6], uint16(8+len(quote)))
		b[6], b[7] = protoICMPv6, 64
		s, d := p.dst.As16(), p.src.As16()
		copy(b[8:24], s[:])
		copy(b[24:40], d[:])
		m := b[40:]
		m[0], m[1] = 1, 1
		copy(m[8:], quote)
		binary.BigEndian.PutUint16(m[2:4], transportChecksum(p.dst, p.src, protoICMPv6, m))
		return b
	}
	quote := orig[:min(len(orig), p.ipHdr+8)]
	b := make([]byte, 20+8+len(quote))
	ipv4Header(b, len(b), protoICMP, p.dst, p.src)
	m := b[20:]
	m[0], m[1] = 3, 13
	copy(m[8:], quote)
	binary.BigEndian.PutUint16(m[2:4], checksum(m, 0))
	return b
}

// ipv4Header writes a 20-byte IPv4 header (DF, TTL 64) with its checksum.
func ipv4Header(b []byte, total int, proto uint8, src, dst netip.Addr) {
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:4], uint16(total))
	binary.BigEndian.PutUint16(b[6:8], 0x4000)
	b[8], b[9] = 64, proto
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[10:12], checksum(b[:20], 0))
}

// transportChecksum is the TCP/UDP/ICMPv6 checksum of seg (its checksum
// field zero) with the pseudo-header of src, dst and proto.
func transportChecksum(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		add(s[:])
		add(d[:])
		sum += uint32(proto) + uint32(len(seg))
	} else {
		s, d := src.As16(), dst.As16()
		add(s[:])
		add(d[:])
		sum += uint32(len(seg)>>16) + uint32(len(seg)&0xffff) + uint32(proto)
	}
	return checksum(seg, sum)
}

// checksum is the Internet checksum (RFC 1071) of b over an initial sum.
func checksum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
