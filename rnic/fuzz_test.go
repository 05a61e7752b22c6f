package rnic

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/roce"
)

// FuzzReceive runs arbitrary frames through the Rx pipeline of a device with a QP in
// RTS, through the port's link entry point as a lab delivers them: nothing may panic
// (a contained panic counts as a failure here), and every frame is accounted for.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{})
	f.Add(append(make([]byte, 12), 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1))
	f.Add(append(make([]byte, 12), 0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255))
	f.Add(kernelMAD(f, "rping"))
	f.Add(kernelMAD(f, "udaddy")) // a SIDR_REQ
	f.Fuzz(func(t *testing.T, b []byte) {
		_, d, _ := pair(t)
		pool := link.NewPool(1518)
		fr := pool.Get()
		if fr.SetBytes(b) != nil {
			return
		}
		d.port.Receive([]*link.Frame{fr})
		if st := d.Stats(); st.Panics != 0 || st.RxFrames != 1 {
			t.Fatalf("frame counted %d times, %d panics", st.RxFrames, st.Panics)
		}
	})
}

// kernelMAD is the first CM MAD of one of the kernel's captures (roce/testdata/rxe:
// rping's REQ, udaddy's SIDR_REQ) readdressed from 10.0.0.2 to the fuzzed device
// (10.0.0.1), ICRC recomputed: a seed that reaches the CM agent.
func kernelMAD(f *testing.F, capture string) []byte {
	file, err := os.Open(filepath.Join("..", "roce", "testdata", "rxe", capture+".pcap"))
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	r, err := pcapgo.NewReader(file)
	if err != nil {
		f.Fatal(err)
	}
	for {
		frame, _, err := r.ReadPacketData()
		if err != nil {
			f.Fatalf("%s.pcap has no CM MAD", capture)
		}
		var p roce.Packet
		if p.Decode(frame) != nil || p.BTH.DestQP() != roce.GSIQPN {
			continue
		}
		var b roce.Builder
		b.From(&p)
		b.Src, b.Dst = netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
		b.DstMAC, b.SrcMAC = [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
		out := make([]byte, 1500)
		n, err := b.Build(out)
		if err != nil {
			f.Fatal(err)
		}
		return out[:n]
	}
}
