package decode

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

func TestDecodeCaptures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "rxe", "*.pcap"))
	if len(files) != 10 {
		t.Fatalf("%d captures, want 10", len(files))
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		var s Summary
		err = ReadFrames(f, func(fr *Frame) error {
			i, r := fr.Index, d.DecodeFrame(fr)
			s.Add(&r)
			if r.BTH != nil && (r.ICRCOK == nil || !*r.ICRCOK) {
				t.Errorf("%s frame %d: ICRC not ok", name, i)
			}
			return nil
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if s.Errors != 0 || s.ICRCFailed != 0 || s.RoCE == 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
}

// TestRecordKeys pins the JSON contract of one frame of each kind.
func TestRecordKeys(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "rxe", "atomic_bw.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d Decoder
	var got []string
	_ = ReadFrames(f, func(fr *Frame) error {
		if fr.Index == 37 || fr.Index == 36 {
			r := d.DecodeFrame(fr)
			b, _ := json.Marshal(&r)
			got = append(got, string(b))
		}
		return nil
	})
	want := []string{
		`{"frame":36,"roce":false,"ip":{"version":4,"src":"10.77.0.1","dst":"10.77.0.2","dscp":0,"ecn":0,"ttl":64}}`,
		`{"frame":37,"roce":true,"ip":{"version":4,"src":"10.77.0.2","dst":"10.77.0.1","dscp":0,"ecn":0,"ttl":64},"udp":{"src":49441,"dst":4791},"bth":{"opcode":20,"opcode_name":"RC_FETCH_ADD","se":false,"migreq":false,"pad":0,"tver":0,"pkey":65535,"fecn":false,"becn":false,"dest_qp":17,"ack_req":true,"psn":12665571},"atomic_eth":{"va":94585087533056,"rkey":594,"swap_add":1,"compare":0},"payload_len":0,"icrc":3106624785,"icrc_ok":true}`,
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("records:\n%s\nwant:\n%s", got, want)
	}
}

func TestMalformedRoCE(t *testing.T) {
	// An IPv4/UDP frame to port 4791 whose BTH is cut short.
	frame := []byte{
		0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00,
		0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
		0xC0, 0x00, 0x12, 0xB7, 0, 12, 0, 0,
		0x04, 0, 0xFF, 0xFF,
	}
	var d Decoder
	r := d.Decode(1, frame)
	if !r.RoCE || r.Error == "" || r.BTH != nil {
		t.Errorf("truncated BTH: %+v", r)
	}
}

// FuzzRecord runs arbitrary frames through the record decoder and JSON encoding.
func FuzzRecord(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x86, 0xdd})
	var d Decoder
	f.Fuzz(func(t *testing.T, frame []byte) {
		r := d.Decode(1, frame)
		if _, err := json.Marshal(&r); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzReadFrames feeds arbitrary bytes to the pcap/pcapng reader.
func FuzzReadFrames(f *testing.F) {
	for _, name := range []string{"ud_pingpong.pcap", "atomic_bw.pcap"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "rxe", name))
		if err == nil {
			f.Add(b[:min(len(b), 2000)])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Decoder
		_ = ReadFrames(bytes.NewReader(data), func(fr *Frame) error {
			d.DecodeFrame(fr)
			return nil
		})
	})
}

// rxeFrames returns the first n frames of an rxe capture.
func rxeFrames(t *testing.T, name string, n int) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "rxe", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	err = ReadFrames(f, func(fr *Frame) error {
		if len(out) < n {
			out = append(out, bytes.Clone(fr.Data))
		}
		return nil
	})
	if err != nil || len(out) < n {
		t.Fatalf("%s: %d frames, %v", name, len(out), err)
	}
	return out
}

// A pcapng capture mixing an Ethernet interface with a Linux cooked one: every packet
// gets a record under Wireshark's frame number; the cooked ones say why they were not
// decoded (they used to be skipped without a word, renumbering the rest).
func TestPcapngOtherLinkTypes(t *testing.T) {
	frames := rxeFrames(t, "send_lat.pcap", 4)
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	sll, err := w.AddInterface(pcapgo.NgInterface{LinkType: layers.LinkTypeLinuxSLL, SnapLength: 65535})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		ci := gopacket.CaptureInfo{CaptureLength: len(f), Length: len(f)}
		if i == 1 {
			ci.InterfaceIndex = sll
		}
		if err := w.WritePacket(ci, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var d Decoder
	var s Summary
	var got []Record
	if err := ReadFrames(&buf, func(fr *Frame) error {
		r := d.DecodeFrame(fr)
		s.Add(&r)
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[1].Frame != 2 || got[1].LinkType != layers.LinkTypeLinuxSLL.String() || got[1].Note == "" || got[1].IP != nil {
		t.Fatalf("records %+v", got)
	}
	for _, i := range []int{0, 2, 3} {
		if got[i].Frame != i+1 || got[i].LinkType != "" || got[i].IP == nil {
			t.Errorf("frame %d: %+v", i+1, got[i])
		}
	}
	if s.NotEthernet != 1 || s.Frames != 4 {
		t.Errorf("summary %+v", s)
	}
}

// A capture that ends inside a packet record fails with ErrCutShort after the frames
// before it, as tshark reports it ("cut short in the middle of a packet", exit 2):
// also when the cut falls right after a complete record header, which pcapgo reads as
// a clean end of file.
func TestCutShort(t *testing.T) {
	whole, err := os.ReadFile(filepath.Join("..", "testdata", "rxe", "send_lat.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	// pcap: 24-byte file header, then per packet a 16-byte record header and the data.
	var records []int
	for off := 24; off+16 <= len(whole); off += 16 + int(binary.LittleEndian.Uint32(whole[off+8:])) {
		records = append(records, off)
	}
	fourth := records[3]
	ng := func(b []byte) []byte {
		var buf bytes.Buffer
		w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
		if err != nil {
			t.Fatal(err)
		}
		_ = ReadFrames(bytes.NewReader(b), func(fr *Frame) error { return w.WritePacket(fr.Info, fr.Data) })
		w.Flush()
		return buf.Bytes()
	}
	ngWhole := ng(whole[:fourth+16+int(binary.LittleEndian.Uint32(whole[fourth+8:]))])
	for _, c := range []struct {
		name string
		file []byte
	}{
		{"pcap cut after a record header", whole[:fourth+16]},
		{"pcap cut inside a record header", whole[:fourth+8]},
		{"pcap cut inside the data", whole[:fourth+30]},
		{"pcapng cut inside the last block", ngWhole[:len(ngWhole)-10]},
	} {
		n := 0
		err := ReadFrames(bytes.NewReader(c.file), func(*Frame) error { n++; return nil })
		if !errors.Is(err, ErrCutShort) || n != 3 {
			t.Errorf("%s: %d frames, %v", c.name, n, err)
		}
	}
	n := 0
	if err := ReadFrames(bytes.NewReader(whole[:fourth]), func(*Frame) error { n++; return nil }); err != nil || n != 3 {
		t.Errorf("pcap ending after a record: %d frames, %v", n, err)
	}
}

// TestNonIPFramesCarryNoSignal decodes frames that are not IP — ARP, ARP behind a VLAN
// tag, a MAC control frame, an Ethernet header cut off — with every signal set to the
// byte that sits where an IPv4 header's DSCP would: with no IP header there is no
// DSCP, protocol or option, so no telemetry and no note (the kernel's ARP frames once
// decoded with "DSCP 23 signals INT telemetry").
func TestNonIPFramesCarryNoSignal(t *testing.T) {
	arp := rxeFrames(t, "write_bw.pcap", 16)[14] // frame 15: rxe's ARP request
	if et := binary.BigEndian.Uint16(arp[12:]); et != 0x0806 {
		t.Fatalf("write_bw.pcap frame 15 has EtherType %#04x, want ARP", et)
	}
	tagged := append(append(append([]byte{}, arp[:12]...), 0x81, 0x00, 0x00, 0x05), arp[12:]...)
	pause := append(append([]byte{}, arp[:12]...), 0x88, 0x08, 0x00, 0x01, 0xFF, 0xFF)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{{"arp", arp}, {"vlan arp", tagged}, {"pause", pause}, {"cut off", arp[:10]}} {
		// What an IPv4 header would hold at these offsets: the TOS byte and protocol.
		tos, proto := tc.frame[min(15, len(tc.frame)-1)], tc.frame[min(23, len(tc.frame)-1)]
		var d Decoder
		d.SetSignals(Signals{INTDSCP: tos >> 2, HPCCDSCP: tos >> 2, IFAProtocol: proto})
		r := d.Decode(1, tc.frame)
		if r.Note != "" || r.Telemetry != nil || r.IP != nil || r.RoCE {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}
