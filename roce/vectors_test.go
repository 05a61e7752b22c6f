package roce

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"
)

// readPcap returns every frame of a classic pcap file.
func readPcap(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var frames [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		frames = append(frames, data)
	}
	return frames
}

// rxeCaptures lists the reference captures with the number of RoCE packets SUMMARY.txt
// reports for each.
var rxeCaptures = map[string]int{
	"rc_pingpong": 50, "rc_pingpong_ipv6": 20, "ud_pingpong": 10, "write_bw": 90,
	"read_bw": 50, "send_lat": 40, "atomic_bw": 20, "write_bw_rdmacm": 99, "rping": 41, "udaddy": 8,
}

// TestRxeVectors decodes every RoCE packet of the kernel's captures, verifies its ICRC,
// and rebuilds it byte for byte from the decoded fields and payload.
func TestRxeVectors(t *testing.T) {
	for name, want := range rxeCaptures {
		t.Run(name, func(t *testing.T) {
			frames := readPcap(t, filepath.Join("testdata", "rxe", name+".pcap"))
			var p Packet
			var b Builder
			buf := make([]byte, 10000)
			n := 0
			for i, f := range frames {
				err := p.Decode(f)
				if errors.Is(err, ErrNotRoCE) {
					continue
				}
				if err != nil {
					t.Fatalf("frame %d: %v", i+1, err)
				}
				n++
				if err := p.VerifyICRC(); err != nil {
					t.Errorf("frame %d (%s): %v", i+1, p.BTH.Opcode(), err)
				}
				b.From(&p)
				m, err := b.Build(buf)
				if err != nil {
					t.Fatalf("frame %d: rebuild: %v", i+1, err)
				}
				// Ethernet pads short frames to 60 bytes; the IP packet ends before.
				if !bytes.Equal(buf[:m], f[:m]) || !allZero(f[m:]) {
					t.Errorf("frame %d (%s): rebuilt frame differs\n got %x\nwant %x", i+1, p.BTH.Opcode(), buf[:m], f)
				}
			}
			if n != want {
				t.Errorf("%d RoCE packets, SUMMARY.txt says %d", n, want)
			}
		})
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestConnectX4LxCNP decodes the hardware CNP vector:
//
//	e41d2dab2bc2 7cfe90643b32 0800                    Ethernet
//	45c2 003c 718c 4000 4011 9161 0a001101 0a001201   IPv4, DSCP 48, ECN 2
//	0000 12b7 0028 0000                               UDP 0 -> 4791
//	81 00 ffff 40 000118 00 000000                    BTH: CNP, BECN, DestQP 0x118
//	00 x 16                                           reserved
//	82fd002a                                          ICRC
func TestConnectX4LxCNP(t *testing.T) {
	frame := loadHex(t, filepath.Join("testdata", "cnp-connectx4lx.hex"))
	var p Packet
	if err := p.Decode(frame); err != nil {
		t.Fatal(err)
	}
	if p.BTH.Opcode() != OpCNP || p.BTH.Opcode().String() != "CNP" {
		t.Errorf("opcode %v, want CNP", p.BTH.Opcode())
	}
	if !p.BTH.BECN() || p.BTH.DestQP() != 0x118 || p.BTH.PKey() != DefaultPKey || p.BTH.PSN() != 0 {
		t.Errorf("BTH %+v", p.BTH.Fields())
	}
	if p.CNP == nil || !allZero(p.CNP) || len(p.Payload) != 0 {
		t.Errorf("CNP body %x payload %x", p.CNP, p.Payload)
	}
	if err := p.VerifyICRC(); err != nil {
		t.Error(err)
	}
	var b Builder
	b.From(&p)
	buf := make([]byte, len(frame))
	n, err := b.Build(buf)
	if err != nil || !bytes.Equal(buf[:n], frame) {
		t.Errorf("rebuild: %v\n got %x\nwant %x", err, buf[:n], frame)
	}
}

func loadHex(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			s.WriteString(line)
		}
	}
	b, err := hex.DecodeString(s.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}
