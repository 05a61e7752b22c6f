package decode

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// Summary counts what a capture holds, for `rocelab decode --summary`.
type Summary struct {
	Frames      int
	RoCE        int
	ICRCFailed  int
	Errors      int
	NotEthernet int // packets of other link types, not decoded
	Notes       int // frames with a note (a telemetry signal not honoured, ...)
	Opcodes     map[string]int
	FirstErrors []string // the first few error messages, with frame numbers
	FirstNotes  []string // the first few notes, with frame numbers
}

// maxListedErrors bounds FirstErrors and FirstNotes so a garbage capture still prints one screen.
const maxListedErrors = 10

// Add counts one record.
func (s *Summary) Add(r *Record) {
	s.Frames++
	if r.RoCE {
		s.RoCE++
	}
	if r.BTH != nil {
		if s.Opcodes == nil {
			s.Opcodes = make(map[string]int)
		}
		s.Opcodes[r.BTH.OpcodeName]++
	}
	if r.ICRCOK != nil && !*r.ICRCOK {
		s.ICRCFailed++
	}
	if r.LinkType != "" {
		s.NotEthernet++
	}
	if r.Note != "" {
		s.Notes++
		if len(s.FirstNotes) < maxListedErrors {
			s.FirstNotes = append(s.FirstNotes, fmt.Sprintf("frame %d: %s", r.Frame, r.Note))
		}
	}
	if r.Error != "" {
		s.Errors++
		if len(s.FirstErrors) < maxListedErrors {
			s.FirstErrors = append(s.FirstErrors, fmt.Sprintf("frame %d: %s", r.Frame, r.Error))
		}
	}
}

// Print writes the summary as a table.
func (s *Summary) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "frames\t%d\n", s.Frames)
	fmt.Fprintf(tw, "RoCEv2 frames\t%d\n", s.RoCE)
	fmt.Fprintf(tw, "ICRC failures\t%d\n", s.ICRCFailed)
	fmt.Fprintf(tw, "decode errors\t%d\n", s.Errors)
	if s.NotEthernet > 0 {
		fmt.Fprintf(tw, "non-Ethernet frames (not decoded)\t%d\n", s.NotEthernet)
	}
	if s.Notes > 0 {
		fmt.Fprintf(tw, "frames with notes\t%d\n", s.Notes)
	}
	names := make([]string, 0, len(s.Opcodes))
	for n := range s.Opcodes {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		fmt.Fprintf(tw, "\nopcode\tcount\n")
	}
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t%d\n", n, s.Opcodes[n])
	}
	for _, list := range [][]string{s.FirstErrors, s.FirstNotes} {
		for _, e := range list {
			fmt.Fprintf(tw, "\n%s", e)
		}
	}
	if len(s.FirstErrors)+len(s.FirstNotes) > 0 {
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
