package decode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapngMagic starts a pcapng file: its Section Header Block type.
var pcapngMagic = []byte{0x0A, 0x0D, 0x0D, 0x0A}

// ErrCutShort: the capture ends in the middle of a packet record (tshark: "appears to
// have been cut short in the middle of a packet"). The frames before it were read.
var ErrCutShort = errors.New("the capture appears to have been cut short in the middle of a packet")

// Frame is one packet of a capture.
type Frame struct {
	Index    int    // 1-based, as Wireshark numbers frames: every packet counts
	Data     []byte // valid only during the callback
	Info     gopacket.CaptureInfo
	LinkType layers.LinkType // of the packet's interface; only Ethernet is decoded
}

// ReadFrames calls fn for every packet of a pcap or pcapng stream, in order, whatever
// its interface's link type (a pcapng file may mix them: frames must keep Wireshark's
// numbers). It stops at the first error fn returns, and returns ErrCutShort (wrapped,
// with the frame number) when the stream ends inside a packet record.
func ReadFrames(r io.Reader, fn func(f *Frame) error) error {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return fmt.Errorf("decode: reading capture header: %w", err)
	}
	var src interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	linkOf := func(gopacket.CaptureInfo) layers.LinkType { return layers.LinkTypeEthernet }
	if bytes.Equal(magic, pcapngMagic) {
		opts := pcapgo.DefaultNgReaderOptions
		opts.WantMixedLinkType = true // else pcapgo skips other interfaces' packets unseen
		ng, err := pcapgo.NewNgReader(br, opts)
		if err != nil {
			return fmt.Errorf("decode: pcapng: %w", err)
		}
		src = ng
		linkOf = func(ci gopacket.CaptureInfo) layers.LinkType {
			if len(ci.AncillaryData) > 0 {
				if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
					return lt
				}
			}
			return layers.LinkTypeNull
		}
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
		switch {
		// pcapgo reports a pcap record whose header is complete and whose data is
		// missing altogether as a clean io.EOF: the header it read says otherwise.
		case err == io.EOF && ci.CaptureLength == 0:
			return nil
		case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("decode: frame %d: %w", i, ErrCutShort)
		case err != nil:
			return fmt.Errorf("decode: frame %d: %w", i, err)
		}
		if err := fn(&Frame{Index: i, Data: data, Info: ci, LinkType: linkOf(ci)}); err != nil {
			return err
		}
	}
}
