// Package capture records what crosses a link endpoint as pcapng, with telemetry intact:
// a Tap wraps any link.Endpoint (a switch port or an RNIC port) the way gVisor's
// sniffer wraps a link endpoint, so nodes need no capture hooks.
//
// Timestamps are the frames' model times (the moment the last bit left or arrived)
// offset by an epoch, so captures under the Virtual clock are byte-identical for the
// same topology, traffic and seed.
package capture

import (
	"io"
	"runtime"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// Writer writes one pcapng file with one interface: the captured endpoint.
type Writer struct {
	w     *pcapgo.NgWriter
	epoch time.Time
	err   error
}

// NewWriter starts a pcapng file on w for an interface named name. Model time t is
// written as epoch+t; the zero epoch means the Unix epoch.
func NewWriter(w io.Writer, name string, epoch time.Time) (*Writer, error) {
	if epoch.IsZero() {
		epoch = time.Unix(0, 0)
	}
	ng, err := pcapgo.NewNgWriterInterface(w, pcapgo.NgInterface{
		Name:     name,
		LinkType: layers.LinkTypeEthernet,
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware:    runtime.GOARCH,
		OS:          runtime.GOOS,
		Application: "rocelab",
	}})
	if err != nil {
		return nil, err
	}
	return &Writer{w: ng, epoch: epoch}, nil
}

var (
	inbound  = pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionInbound}
	outbound = pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionOutbound}
)

// write records frame b, of which the first len(b) of origLen bytes were kept.
func (c *Writer) write(t clock.Time, b []byte, origLen int, dir *pcapgo.NgEpbFlags) {
	if c.err != nil {
		return
	}
	ci := gopacket.CaptureInfo{Timestamp: c.epoch.Add(t.Duration()), CaptureLength: len(b), Length: origLen}
	c.err = c.w.WritePacketWithOptions(ci, b, pcapgo.NgPacketOptions{Flags: dir})
}

// writeStats appends an Interface Statistics Block: isb_ifrecv is every frame that
// crossed the interface while the capture ran, isb_ifdrop those left out of the file
// (dumpcap writes the capture's own drops there too, and Wireshark shows them as
// "Dropped packets"). The block is stamped with model time last.
func (c *Writer) writeStats(recv, dropped uint64, last clock.Time) {
	if c.err != nil {
		return
	}
	c.err = c.w.WriteInterfaceStats(0, pcapgo.NgInterfaceStatistics{
		LastUpdate: c.epoch.Add(last.Duration()), PacketsReceived: recv, PacketsDropped: dropped})
}

// Flush writes buffered packets out and returns the first error the writer met.
func (c *Writer) Flush() error {
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}

// Tap returns an endpoint that behaves as ep and records every frame sent through it
// (outbound, before link faults) and every frame it delivers (inbound) to c.
func Tap(ep link.Endpoint, c *Writer) link.Endpoint {
	return &tap{Endpoint: ep, c: c}
}

type tap struct {
	link.Endpoint
	c  *Writer
	rx link.Receiver
}

func (t *tap) Attach(loop clock.Loop, rx link.Receiver) {
	t.rx = rx
	t.Endpoint.Attach(loop, t)
}

func (t *tap) Send(frames []*link.Frame) {
	for _, f := range frames {
		t.c.write(f.Time, f.Bytes(), f.Len(), &outbound)
	}
	t.Endpoint.Send(frames)
}

func (t *tap) Receive(frames []*link.Frame) {
	for _, f := range frames {
		t.c.write(f.Time, f.Bytes(), f.Len(), &inbound)
	}
	t.rx.Receive(frames)
}
