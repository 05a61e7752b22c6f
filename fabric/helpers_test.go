package fabric

import (
	"encoding/binary"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/roce"
)

// putRoCE writes an Ethernet/IPv4/UDP frame of size bytes to UDP port 4791 (RoCEv2)
// with a valid IPv4 header checksum; the payload starts with seq.
func putRoCE(b []byte, src, dst MAC, sip, dip [4]byte, sport uint16, dscp, ecn uint8, seq uint32) {
	clear(b)
	copy(b[0:], dst[:])
	copy(b[6:], src[:])
	binary.BigEndian.PutUint16(b[12:], roce.EtherTypeIPv4)
	ip := b[14:]
	ip[0] = 0x45
	ip[1] = dscp<<2 | ecn
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-14))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[8], ip[9] = 64, 17
	copy(ip[12:], sip[:])
	copy(ip[16:], dip[:])
	binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip[:20]))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], 4791)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(b)-34))
	binary.BigEndian.PutUint32(udp[8:], seq)
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		if i != 10 {
			sum += uint32(binary.BigEndian.Uint16(h[i:]))
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func hostMAC(i int) MAC    { return MAC{0x02, 0, 0, 0, byte(i >> 8), byte(i)} }
func hostIP(i int) [4]byte { return [4]byte{10, 0, byte(i >> 8), byte(i)} }

// testHost is a minimal NIC for tests and benchmarks: it sends count frames back to
// back at its link's rate (honouring PFC pauses, as a lossless NIC must) and counts
// what it receives.
type testHost struct {
	loop   clock.Loop
	ep     link.Endpoint
	pool   *link.Pool
	id     int
	dst    int
	size   int
	count  int
	sport  func(seq int) uint16
	dscp   uint8
	ecn    uint8
	sent   int
	busy   clock.Time
	paused clock.Time
	timer  *clock.Timer
	batch  [1]*link.Frame

	rxFrames, rxBytes int
	rxPauses          int
	onRx              func(f *link.Frame)
	hdr               Headers
}

func newTestHost(loop clock.Loop, ep link.Endpoint, pool *link.Pool, id int) *testHost {
	h := &testHost{loop: loop, ep: ep, pool: pool, id: id, dscp: 26, size: 1000}
	h.sport = func(int) uint16 { return uint16(49152 + id) }
	h.timer = loop.NewTimer(h.send)
	ep.Attach(loop, h)
	return h
}

// start sends count frames to host dst from at on.
func (h *testHost) start(dst, count int, at clock.Time) {
	h.dst, h.count = dst, count
	h.timer.Reset(at)
}

func (h *testHost) send() {
	now := h.loop.Now()
	if t := max(h.busy, h.paused); t > now {
		h.timer.Reset(t)
		return
	}
	f := h.pool.Get()
	b, _ := f.SetLen(h.size)
	putRoCE(b, hostMAC(h.id), hostMAC(h.dst), hostIP(h.id), hostIP(h.dst), h.sport(h.sent), h.dscp, h.ecn, uint32(h.sent))
	h.busy = now.Add(link.Serialization(h.size, h.ep.Rate()))
	f.Time = h.busy
	h.batch[0] = f
	h.ep.Send(h.batch[:])
	if h.sent++; h.sent < h.count {
		h.timer.Reset(h.busy)
	}
}

func (h *testHost) Receive(frames []*link.Frame) {
	for _, f := range frames {
		if h.hdr.Parse(f.Bytes()) == nil && h.hdr.PFC {
			h.rxPauses++
			if h.hdr.PFCEnable>>3&1 != 0 {
				h.paused = f.Time.Add(pauseDuration(h.hdr.PFCQuanta[3], h.ep.Rate()))
			}
		} else {
			h.rxFrames++
			h.rxBytes += f.Len()
			if h.onRx != nil {
				h.onRx(f)
			}
		}
		f.Release()
	}
}

// star builds n senders and one receiver (host n) around one switch, every link at
// rate with delay. The receiver's port is the switch's port n.
func star(v *clock.Virtual, n int, rate, rxRate uint64, delay time.Duration, cfg Config) (*Switch, []*testHost) {
	return starWith(v, n, link.Config{Rate: rate, Delay: delay}, rxRate, cfg, nil)
}

// starWith is star with every link configured as lc (the receiver's at rxRate), and
// each switch port's endpoint passed through wrap when it is not nil.
func starWith(v *clock.Virtual, n int, lc link.Config, rxRate uint64, cfg Config, wrap func(int, link.Endpoint) link.Endpoint) (*Switch, []*testHost) {
	pool := link.NewPool(1518)
	cfg.Pool = pool
	sw, err := New(v.NewLoop("s1"), cfg)
	if err != nil {
		panic(err)
	}
	var hosts []*testHost
	for i := 0; i <= n; i++ {
		c := lc
		if i == n {
			c.Rate = rxRate
		}
		a, b, err := link.New(c)
		if err != nil {
			panic(err)
		}
		hosts = append(hosts, newTestHost(v.NewLoop("h"), a, pool, i))
		var ep link.Endpoint = b
		if wrap != nil {
			ep = wrap(i, b)
		}
		sw.AddPort(ep, MAC{0x02, 0xff, 0, 0, 0, byte(i)})
		sw.SetRoute(hostMAC(i), []uint16{uint16(i)})
	}
	return sw, hosts
}
