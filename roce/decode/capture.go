package decode

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapng files start with a Section Header Block.
var pcapngMagic = []byte{0x0A, 0x0D, 0x0D, 0x0A}

// ReadFrames calls fn for every Ethernet frame of a pcap or pcapng stream, in order,
// with its 1-based index. The frame is only valid during the call. It stops at the first
// error fn returns.
func ReadFrames(r io.Reader, fn func(index int, frame []byte, ci gopacket.CaptureInfo) error) error {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return fmt.Errorf("decode: reading capture header: %w", err)
	}
	var src interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	if bytes.Equal(magic, pcapngMagic) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return fmt.Errorf("decode: pcapng: %w", err)
		}
		if lt := ng.LinkType(); lt != layers.LinkTypeEthernet {
			return fmt.Errorf("decode: pcapng link type %v, only Ethernet is supported", lt)
		}
		src = ng
	} else {
		pc, err := pcapgo.NewReader(br)
		if err != nil {
			return fmt.Errorf("decode: not a pcap or pcapng file: %w", err)
		}
		if lt := pc.LinkType(); lt != layers.LinkTypeEthernet {
			return fmt.Errorf("decode: pcap link type %v, only Ethernet is supported", lt)
		}
		src = pc
	}
	for i := 1; ; i++ {
		data, ci, err := src.ReadPacketData()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("decode: frame %d: %w", i, err)
		}
		if err := fn(i, data, ci); err != nil {
			return err
		}
	}
}
