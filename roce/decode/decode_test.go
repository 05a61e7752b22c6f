package decode

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
)

func TestDecodeCaptures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "rxe", "*.pcap"))
	if len(files) != 9 {
		t.Fatalf("%d captures, want 9", len(files))
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		var s Summary
		err = ReadFrames(f, func(i int, frame []byte, _ gopacket.CaptureInfo) error {
			r := d.Decode(i, frame)
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
	_ = ReadFrames(f, func(i int, frame []byte, _ gopacket.CaptureInfo) error {
		if i == 37 || i == 36 {
			r := d.Decode(i, frame)
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
		_ = ReadFrames(bytes.NewReader(data), func(i int, frame []byte, _ gopacket.CaptureInfo) error {
			d.Decode(i, frame)
			return nil
		})
	})
}
