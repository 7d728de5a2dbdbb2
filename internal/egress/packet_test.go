package egress

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// TestChecksum_RFC1071 is the worked example of RFC 1071 section 3.
func TestChecksum_RFC1071(t *testing.T) {
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := checksum(b, 0); got != ^uint16(0xddf2) {
		t.Errorf("checksum %#04x, want %#04x", got, ^uint16(0xddf2))
	}
	if got := checksum([]byte{0xff}, 0); got != ^uint16(0xff00) {
		t.Errorf("odd length: %#04x", got)
	}
}

// syn4 is an IPv4 TCP SYN from 198.19.0.1:40000 to dst:port with
// sequence number seq, an MSS option and an optional payload, written out
// field by field.
func syn4(dst [4]byte, port uint16, seq uint32, payload int) []byte {
	tcpLen := 24 + payload
	b := make([]byte, 20+tcpLen)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[8], b[9] = 64, 6
	copy(b[12:], []byte{198, 19, 0, 1})
	copy(b[16:], dst[:])
	tcp := b[20:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], port)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 6 << 4 // 24 bytes
	tcp[13] = tcpSYN
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	copy(tcp[20:], []byte{2, 4, 0x05, 0xb4}) // MSS 1460
	return b
}

// syn6 is syn4 over IPv6 from 2001:2::1, behind a hop-by-hop header.
func syn6(dst netip.Addr, port uint16, seq uint32) []byte {
	b := make([]byte, 40+8+20)
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], 8+20)
	b[6], b[7] = 0, 64 // next: hop-by-hop
	src := netip.MustParseAddr("2001:2::1").As16()
	d := dst.As16()
	copy(b[8:], src[:])
	copy(b[24:], d[:])
	b[40], b[41] = 6, 0 // hop-by-hop: next TCP, 8 bytes
	tcp := b[48:]
	binary.BigEndian.PutUint16(tcp[0:], 40001)
	binary.BigEndian.PutUint16(tcp[2:], port)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	tcp[13] = tcpSYN
	return b
}

// TestParsePacket_SYN: IPv4 and IPv6 (with an extension header) SYNs
// give their addresses, ports, sequence and the audit's destination.
func TestParsePacket_SYN(t *testing.T) {
	p, err := parsePacket(syn4([4]byte{1, 2, 3, 4}, 443, 1000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if p.v6 || p.src != netip.MustParseAddr("198.19.0.1") || p.dst != netip.MustParseAddr("1.2.3.4") ||
		p.srcPort != 40000 || p.dstPort != 443 || p.seq != 1000 || !p.isSYN() || p.payload != 0 || p.ipHdr != 20 {
		t.Errorf("parsed %+v", p)
	}
	if d := p.destination(); d != "1.2.3.4:443" {
		t.Errorf("destination %q", d)
	}
	v6 := netip.MustParseAddr("2001:db8::7")
	p, err = parsePacket(syn6(v6, 8443, 7))
	if err != nil {
		t.Fatal(err)
	}
	if !p.v6 || p.dst != v6 || p.dstPort != 8443 || p.srcPort != 40001 || !p.isSYN() || p.ipHdr != 48 {
		t.Errorf("parsed %+v", p)
	}
	if d := p.destination(); d != "[2001:db8::7]:8443" {
		t.Errorf("destination %q", d)
	}
}

// TestParsePacket_Malformed: truncations and bad lengths are errors,
// never panics.
func TestParsePacket_Malformed(t *testing.T) {
	good := syn4([4]byte{1, 2, 3, 4}, 443, 1, 0)
	for n := 0; n < len(good); n++ {
		if _, err := parsePacket(good[:n]); err == nil {
			t.Errorf("%d of %d bytes parsed", n, len(good))
		}
	}
	bad := append([]byte(nil), good...)
	bad[0] = 0x44 // IHL 16
	if _, err := parsePacket(bad); err == nil {
		t.Error("IHL 4 parsed")
	}
	bad = append([]byte(nil), good...)
	bad[20+12] = 15 << 4 // data offset past the segment
	if _, err := parsePacket(bad); err == nil {
		t.Error("TCP offset past the end parsed")
	}
	g6 := syn6(netip.MustParseAddr("2001:db8::1"), 1, 1)
	for n := 0; n < len(g6); n++ {
		if _, err := parsePacket(g6[:n]); err == nil {
			t.Errorf("IPv6: %d of %d bytes parsed", n, len(g6))
		}
	}
	bad = append([]byte(nil), g6...)
	bad[41] = 200 // hop-by-hop header far longer than the packet
	if _, err := parsePacket(bad); err == nil {
		t.Error("IPv6 extension header past the end parsed")
	}
	if _, err := parsePacket([]byte{0x70}); err == nil {
		t.Error("version 7 parsed")
	}
}

// TestTCPReset_AnswersSYN: the RST|ACK swaps addresses and ports, acks
// the SYN's sequence plus one plus its payload, and carries valid IP and
// TCP checksums (recomputed over the whole header they come to zero).
func TestTCPReset_AnswersSYN(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		ack  uint32
	}{
		{"ipv4", syn4([4]byte{93, 184, 216, 34}, 80, 0xfffffffe, 0), 0xffffffff},
		{"ipv4 syn with data", syn4([4]byte{10, 0, 0, 1}, 80, 100, 5), 106},
		{"ipv6", syn6(netip.MustParseAddr("2001:db8::1"), 443, 41), 42},
	} {
		p, err := parsePacket(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rst := tcpReset(&p)
		r, err := parsePacket(rst)
		if err != nil {
			t.Fatalf("%s: the reset does not parse: %v", tc.name, err)
		}
		if r.src != p.dst || r.dst != p.src || r.srcPort != p.dstPort || r.dstPort != p.srcPort {
			t.Errorf("%s: reset %+v does not answer %+v", tc.name, r, p)
		}
		if r.flags != tcpRST|tcpACK || r.seq != 0 {
			t.Errorf("%s: flags %#x seq %d", tc.name, r.flags, r.seq)
		}
		tcp := rst[r.ipHdr:]
		if got := binary.BigEndian.Uint32(tcp[8:12]); got != tc.ack {
			t.Errorf("%s: ack %d, want %d", tc.name, got, tc.ack)
		}
		if s := transportChecksum(r.src, r.dst, protoTCP, tcp); s != 0 {
			t.Errorf("%s: TCP checksum does not verify (%#x)", tc.name, s)
		}
		if !r.v6 {
			if s := checksum(rst[:20], 0); s != 0 {
				t.Errorf("%s: IPv4 header checksum does not verify (%#x)", tc.name, s)
			}
		}
	}
}

// TestICMPProhibited_QuotesDatagram: a UDP datagram is answered ICMP
// administratively prohibited (3/13, ICMPv6 1/1) quoting its header, with
// a valid checksum.
func TestICMPProhibited_QuotesDatagram(t *testing.T) {
	udp := make([]byte, 20+8+30)
	udp[0] = 0x45
	binary.BigEndian.PutUint16(udp[2:], uint16(len(udp)))
	udp[8], udp[9] = 64, protoUDP
	copy(udp[12:], []byte{198, 19, 0, 1})
	copy(udp[16:], []byte{8, 8, 8, 8})
	binary.BigEndian.PutUint16(udp[20:], 5353)
	binary.BigEndian.PutUint16(udp[22:], 53)
	p, err := parsePacket(udp)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.destination(); d != "udp 8.8.8.8:53" {
		t.Errorf("destination %q", d)
	}
	r := icmpProhibited(&p, udp)
	q, err := parsePacket(r)
	if err != nil {
		t.Fatal(err)
	}
	if q.proto != protoICMP || q.icmpType != 3 || r[21] != 13 || q.dst != p.src || q.src != p.dst {
		t.Errorf("reply %+v code %d", q, r[21])
	}
	if len(r) != 20+8+28 {
		t.Errorf("ICMPv4 quotes %d bytes, want the IP header and 8", len(r)-28)
	}
	if checksum(r[20:], 0) != 0 || checksum(r[:20], 0) != 0 {
		t.Error("ICMPv4 checksums do not verify")
	}

	u6 := make([]byte, 40+8+10)
	u6[0] = 0x60
	binary.BigEndian.PutUint16(u6[4:], 18)
	u6[6], u6[7] = protoUDP, 64
	s6, d6 := netip.MustParseAddr("2001:2::1").As16(), netip.MustParseAddr("2001:4860::8888").As16()
	copy(u6[8:], s6[:])
	copy(u6[24:], d6[:])
	binary.BigEndian.PutUint16(u6[42:], 53)
	p, err = parsePacket(u6)
	if err != nil {
		t.Fatal(err)
	}
	r = icmpProhibited(&p, u6)
	q, err = parsePacket(r)
	if err != nil {
		t.Fatal(err)
	}
	if q.proto != protoICMPv6 || q.icmpType != 1 || r[41] != 1 || q.housekeeping() {
		t.Errorf("ICMPv6 reply %+v", q)
	}
	if transportChecksum(q.src, q.dst, protoICMPv6, r[40:]) != 0 {
		t.Error("ICMPv6 checksum does not verify")
	}
}

// TestHousekeeping: what the kernel sends by itself on the TUN device is
// never audited as the tree's attempt.
func TestHousekeeping(t *testing.T) {
	for _, c := range []struct {
		p    packet
		want bool
	}{
		{packet{src: netip.MustParseAddr("2001:2::1"), dst: netip.MustParseAddr("ff02::2"), proto: protoICMPv6, icmpType: 133}, true},
		{packet{src: netip.MustParseAddr("::"), dst: netip.MustParseAddr("2001:db8::1"), proto: protoICMPv6, icmpType: 135}, true},
		{packet{src: netip.MustParseAddr("2001:2::1"), dst: netip.MustParseAddr("2001:db8::1"), proto: protoICMPv6, icmpType: 143}, true},
		{packet{src: netip.MustParseAddr("198.19.0.1"), dst: netip.MustParseAddr("224.0.0.22"), proto: 2}, true},
		{packet{src: netip.MustParseAddr("2001:2::1"), dst: netip.MustParseAddr("fe80::1"), proto: protoTCP}, true},
		{packet{src: netip.MustParseAddr("2001:2::1"), dst: netip.MustParseAddr("2001:db8::1"), proto: protoICMPv6, icmpType: 128}, false},
		{packet{src: netip.MustParseAddr("198.19.0.1"), dst: netip.MustParseAddr("1.1.1.1"), proto: protoTCP}, false},
		// A cloud's metadata service is an attempt, not housekeeping.
		{packet{src: netip.MustParseAddr("198.19.0.1"), dst: netip.MustParseAddr("169.254.169.254"), proto: protoTCP}, false},
	} {
		if got := c.p.housekeeping(); got != c.want {
			t.Errorf("housekeeping(%v -> %v proto %d type %d) = %v", c.p.src, c.p.dst, c.p.proto, c.p.icmpType, got)
		}
	}
}
