package roce

import (
	"hash/crc32"
	"net/netip"
	"testing"
	"time"
)

// BenchmarkBuildICRC4096 measures building an RDMA WRITE Middle frame with a 4096-byte
// payload, ICRC included, against hash/crc32 alone over the same bytes in the same run.
// The ratio (CRC time / build time) is the figure: how close framing comes to the cost
// of the CRC it cannot avoid, whatever the machine. "inplace" is the transmit path's
// way (the payload is read from memory straight into the frame, see PayloadOffset);
// "copy" has Build copy the payload from elsewhere.
func BenchmarkBuildICRC4096(b *testing.B) {
	for _, inPlace := range []bool{true, false} {
		name := "copy"
		if inPlace {
			name = "inplace"
		}
		b.Run(name, func(b *testing.B) {
			bld := Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
				SrcPort: 0xC121, BTH: BTHFields{Opcode: OpRCWriteMiddle, PKey: DefaultPKey, DestQP: 0x11},
				Payload: make([]byte, 4096)}
			buf := make([]byte, 4200)
			if inPlace {
				off, err := bld.PayloadOffset()
				if err != nil {
					b.Fatal(err)
				}
				bld.Payload = buf[off : off+4096]
			}
			n, err := bld.Build(buf)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				bld.BTH.PSN = PSN(i) & PSNMask
				if _, err := bld.Build(buf); err != nil {
					b.Fatal(err)
				}
			}
			buildTime := time.Since(start)
			b.StopTimer()
			crcStart := time.Now()
			var sink uint32
			for i := 0; i < b.N; i++ {
				sink += crc32.ChecksumIEEE(buf[:n])
			}
			crcTime := time.Since(crcStart)
			_ = sink
			total := float64(n) * float64(b.N)
			b.ReportMetric(total/buildTime.Seconds()/1e9, "build-GB/s")
			b.ReportMetric(total/crcTime.Seconds()/1e9, "crc32-GB/s")
			b.ReportMetric(crcTime.Seconds()/buildTime.Seconds(), "ratio")
		})
	}
}

// BenchmarkDecodeWriteFirst measures parsing an RDMA WRITE First frame (1024-byte
// payload) into views.
func BenchmarkDecodeWriteFirst(b *testing.B) {
	frame := writeFirst(b, false, 1024)
	var p Packet
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := p.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyICRC4096 measures decoding plus ICRC verification of a 4096-byte
// payload frame, the receive path's per-packet cost.
func BenchmarkVerifyICRC4096(b *testing.B) {
	bld := Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		BTH: BTHFields{Opcode: OpRCWriteMiddle}, Payload: make([]byte, 4096)}
	buf := make([]byte, 4200)
	n, _ := bld.Build(buf)
	var p Packet
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if p.Decode(buf[:n]) != nil || p.VerifyICRC() != nil {
			b.Fatal("bad frame")
		}
	}
}
