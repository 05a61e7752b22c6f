// Package replay runs HPCC++ over a telemetry trace given as JSON lines: the logic of
// `rocelab hpcc replay`, kept out of the command so it is testable and fuzzable. It is
// pure: a Replayer turns one input line into one output line and does no I/O.
//
// Input, one JSON object per line (an unknown or repeated key, or a number written as a string, is an error):
//
//	sender:   {"seq": <acked bytes>, "snd_nxt": <bytes>, "hops": [HOP, ...]}
//	receiver: {"now_ns": <ns>, "hops": [HOP, ...]}
//	HOP:      {"ts_ns": <ns>, "qlen": <bytes>, "tx_bytes": <bytes>, "bw_bps": <bit/s>}
//
// Counts are non-negative integers (written plainly or in exponent form, e.g. 1e11);
// now_ns may be negative; bw_bps must be positive. Output, one object per input line:
//
//	{"u": U, "w": W, "wc": Wc, "rate_bps": R, "inc_stage": n, "update_wc": bool}
//
// with "send_ack" added in receiver mode. Floats use encoding/json's formatting of
// float64. The semantics are those of hpcc.Sender.NewAck and hpcc.Receiver.NewINT.
package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/rocelab/rocelab/hpcc"
)

// Modes a Replayer runs in.
const (
	ModeSender   = "sender"
	ModeReceiver = "receiver"
)

// Replayer holds one flow's HPCC++ state across the lines of a trace.
type Replayer struct {
	snd  *hpcc.Sender
	rcv  *hpcc.Receiver
	hops []hpcc.Hop // reused between lines
}

// New returns a Replayer for mode (ModeSender or ModeReceiver) with parameters p.
func New(mode string, p hpcc.Params) (*Replayer, error) {
	var r Replayer
	var err error
	switch mode {
	case ModeSender:
		r.snd, err = hpcc.NewSender(p)
	case ModeReceiver:
		r.rcv, err = hpcc.NewReceiver(p)
	default:
		return nil, fmt.Errorf("replay: mode must be %q or %q, got %q", ModeSender, ModeReceiver, mode)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

type hopIn struct {
	TS      json.Number `json:"ts_ns"`
	QLen    json.Number `json:"qlen"`
	TxBytes json.Number `json:"tx_bytes"`
	BW      json.Number `json:"bw_bps"`
}

type eventIn struct {
	Seq    json.Number `json:"seq"`
	SndNxt json.Number `json:"snd_nxt"`
	NowNS  json.Number `json:"now_ns"`
	Hops   []hopIn     `json:"hops"`
}

type senderOut struct {
	U        float64 `json:"u"`
	W        float64 `json:"w"`
	Wc       float64 `json:"wc"`
	Rate     float64 `json:"rate_bps"`
	IncStage int     `json:"inc_stage"`
	UpdateWc bool    `json:"update_wc"`
}

type receiverOut struct {
	senderOut
	SendAck bool `json:"send_ack"`
}

// Step processes one input line and returns the output line (without a newline). On
// error the flow's state is unchanged and the error names the offending field.
func (r *Replayer) Step(line []byte) ([]byte, error) {
	if err := checkStrict(line); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	var ev eventIn
	if err := json.Unmarshal(line, &ev); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := r.decodeHops(ev.Hops); err != nil {
		return nil, err
	}
	if r.snd != nil {
		seq, err := count("seq", ev.Seq)
		if err != nil {
			return nil, err
		}
		sndNxt, err := count("snd_nxt", ev.SndNxt)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out(r.snd.NewAck(seq, sndNxt, r.hops)))
	}
	now, err := instant("now_ns", ev.NowNS)
	if err != nil {
		return nil, err
	}
	st := r.rcv.NewINT(now, r.hops)
	return json.Marshal(receiverOut{out(st.State), st.SendAck})
}

func out(s hpcc.State) senderOut {
	return senderOut{s.U, s.W, s.Wc, s.Rate, s.IncStage, s.UpdateWc}
}

func (r *Replayer) decodeHops(in []hopIn) error {
	r.hops = r.hops[:0]
	for i, h := range in {
		var hop hpcc.Hop
		var err error
		field := func(name string) string { return fmt.Sprintf("hops[%d].%s", i, name) }
		if hop.TS, err = count(field("ts_ns"), h.TS); err != nil {
			return err
		}
		if hop.QLen, err = count(field("qlen"), h.QLen); err != nil {
			return err
		}
		if hop.TxBytes, err = count(field("tx_bytes"), h.TxBytes); err != nil {
			return err
		}
		if hop.Rate, err = count(field("bw_bps"), h.BW); err != nil {
			return err
		}
		if hop.Rate == 0 {
			return fmt.Errorf("replay: %s must be positive", field("bw_bps"))
		}
		r.hops = append(r.hops, hop)
	}
	return nil
}

var errMissing = errors.New("missing")

// count parses a non-negative integer that may be written in exponent form (1e11),
// as JSON producers that hold numbers as doubles write large values.
func count(name string, n json.Number) (uint64, error) {
	if n == "" {
		return 0, fmt.Errorf("replay: %s: %w", name, errMissing)
	}
	if v, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f >= 1<<64 {
		return 0, fmt.Errorf("replay: %s must be a non-negative integer below 2^64, got %s", name, n)
	}
	return uint64(f), nil
}

// instant parses a signed integer nanosecond time, accepting exponent form too.
func instant(name string, n json.Number) (int64, error) {
	if n == "" {
		return 0, fmt.Errorf("replay: %s: %w", name, errMissing)
	}
	if v, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, fmt.Errorf("replay: %s must be an integer number of nanoseconds, got %s", name, n)
	}
	return int64(f), nil
}

// The fields an input line may have: a trace is a contract, so a misspelt or repeated
// key, or a number written as a string, is an error rather than a silent default.
var (
	eventFields = map[string]bool{"seq": true, "snd_nxt": true, "now_ns": true, "hops": true}
	hopFields   = map[string]bool{"ts_ns": true, "qlen": true, "tx_bytes": true, "bw_bps": true}
)

// checkStrict walks one input line's tokens: one JSON object of eventFields, each at
// most once, numbers as JSON numbers, hops an array of objects of hopFields.
func checkStrict(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := strictObject(dec, "line", eventFields); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errors.New("unexpected end of the line: not a whole JSON object")
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the object")
	}
	return nil
}

func strictObject(dec *json.Decoder, where string, fields map[string]bool) error {
	if err := expectDelim(dec, '{', where+" must be an object"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string) // the decoder only yields strings as object keys
		switch {
		case !fields[key]:
			return fmt.Errorf("%s: unknown field %q", where, key)
		case seen[key]:
			return fmt.Errorf("%s: field %q given twice", where, key)
		}
		seen[key] = true
		if key == "hops" {
			if err := strictHops(dec); err != nil {
				return err
			}
			continue
		}
		tok, err = dec.Token()
		if err != nil {
			return err
		}
		if _, ok := tok.(json.Number); !ok {
			return fmt.Errorf("%s: %s must be a JSON number, got %v", where, key, tokenText(tok))
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func strictHops(dec *json.Decoder) error {
	if err := expectDelim(dec, '[', "hops must be an array"); err != nil {
		return err
	}
	for i := 0; dec.More(); i++ {
		if err := strictObject(dec, fmt.Sprintf("hops[%d]", i), hopFields); err != nil {
			return err
		}
	}
	_, err := dec.Token() // ']'
	return err
}

func expectDelim(dec *json.Decoder, d json.Delim, msg string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return errors.New(msg)
	}
	return nil
}

func tokenText(tok json.Token) string {
	switch v := tok.(type) {
	case string:
		return strconv.Quote(v)
	case json.Delim:
		return "a " + map[json.Delim]string{'{': "object", '[': "array"}[v]
	}
	return fmt.Sprint(tok)
}
