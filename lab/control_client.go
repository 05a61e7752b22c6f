package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/rocelab/rocelab/netns"
)

// maxReplyBody bounds a control reply that Query reads.
const maxReplyBody = 16 << 20

// controlClient is an HTTP client whose every connection is to lab's control socket.
func controlClient(store netns.Store, lab string) *http.Client {
	path := ControlPath(store, lab)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true, // one call per connection: nothing lingers in the lab
	}}
}

// post sends req to lab's control socket as POST /OP.
func post(ctx context.Context, store netns.Store, lab string, req Request, body io.Reader) (*http.Response, error) {
	if body == nil {
		b, _ := json.Marshal(req)
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+lab+"/"+req.Op, body)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := controlClient(store, lab).Do(hr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("lab %s: no answer to %q within %v: the lab process is wedged or starved (its log: %s)",
				lab, req.Op, QueryTimeout, filepath.Join(store.Dir(lab), "lab.log"))
		}
		return nil, fmt.Errorf("lab %s: control socket: %w", lab, err)
	}
	return resp, nil
}

// replyOf reads a JSON Reply from resp's body; a refusal becomes an error naming it.
func replyOf(lab string, resp *http.Response) (Reply, error) {
	defer resp.Body.Close()
	var r Reply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReplyBody)).Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("lab %s: control reply (%s): %w", lab, resp.Status, err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("lab %s: %s", lab, r.Error)
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("lab %s: control reply %s", lab, resp.Status)
	}
	return r, nil
}

// Query sends req (any op but capture: StartCapture) to lab's control socket and
// returns the reply, within QueryTimeout.
func Query(store netns.Store, lab string, req Request) (Reply, error) {
	if req.Op == "capture" {
		return Reply{}, errors.New("lab: a capture is a stream: use StartCapture")
	}
	ctx, cancel := context.WithTimeout(context.Background(), QueryTimeout)
	defer cancel()
	resp, err := post(ctx, store, lab, req, nil)
	if err != nil {
		return Reply{}, err
	}
	r, err := replyOf(lab, resp)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("lab %s: no answer to %q within %v: the lab process is wedged or starved (its log: %s)",
			lab, req.Op, QueryTimeout, filepath.Join(store.Dir(lab), "lab.log"))
	}
	return r, err
}

// Capture is a running capture of a lab's port: Copy reads its pcapng stream, Stop
// asks the lab to end it (the figures still come), Close abandons it.
type Capture struct {
	resp   *http.Response
	stop   *io.PipeWriter
	cancel context.CancelFunc
}

// StartCapture starts the capture req (op "capture": Port, Snaplen, File) on lab's
// control socket.
func StartCapture(store netns.Store, lab string, req Request) (*Capture, error) {
	req.Op = "capture"
	b, _ := json.Marshal(req)
	pr, pw := io.Pipe()
	go func() { pw.Write(b) }() // the body's start; it ends when Stop closes pw
	ctx, cancel := context.WithCancel(context.Background())
	// The lab answers the request at once, or refuses it: bound that, not the stream.
	answered := make(chan struct{})
	go func() {
		select {
		case <-answered:
		case <-ctx.Done():
		case <-time.After(QueryTimeout):
			cancel()
		}
	}()
	resp, err := post(ctx, store, lab, req, pr)
	close(answered)
	if err != nil {
		cancel()
		pw.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_, err := replyOf(lab, resp)
		cancel()
		pw.Close()
		if err == nil {
			err = fmt.Errorf("lab %s: capture refused (%s)", lab, resp.Status)
		}
		return nil, err
	}
	return &Capture{resp: resp, stop: pw, cancel: cancel}, nil
}

// Stop asks the lab to end the capture: it sends the rest of the stream and the
// figures, which Copy returns.
func (c *Capture) Stop() error { return c.stop.Close() }

// Close abandons the capture (the lab ends it too) and releases the connection.
func (c *Capture) Close() error {
	c.stop.Close()
	c.cancel()
	return c.resp.Body.Close()
}

// Copy copies the capture's pcapng stream to w until it ends, then returns the lab's
// figures and the bytes copied. It returns early with w's error, or with an error
// saying the stream ended without figures.
func (c *Capture) Copy(w io.Writer) (*CaptureStatus, int64, error) {
	n, err := io.Copy(w, c.resp.Body)
	if err != nil {
		return nil, n, err
	}
	t := c.resp.Trailer.Get(CaptureTrailer)
	if t == "" {
		return nil, n, errors.New("capture stream ended without the lab's figures")
	}
	var r Reply
	if err := json.Unmarshal([]byte(t), &r); err != nil || r.Capture == nil {
		return nil, n, fmt.Errorf("capture: the lab's figures %q: %v", t, err)
	}
	if r.Error != "" {
		return r.Capture, n, errors.New(r.Error)
	}
	return r.Capture, n, nil
}
