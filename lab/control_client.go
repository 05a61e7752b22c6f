package lab

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/rocelab/rocelab/netns"
)

// Query sends req to lab's control socket and returns the reply; for "capture" the
// connection stays open for the stream and is returned too (the caller closes it).
func Query(store netns.Store, lab string, req Request) (Reply, *Stream, error) {
	c, err := net.DialTimeout("unix", ControlPath(store, lab), QueryTimeout)
	if err != nil {
		return Reply{}, nil, fmt.Errorf("lab %s: control socket: %w", lab, err)
	}
	c.SetDeadline(time.Now().Add(QueryTimeout))
	r, s, err := query(c, lab, req)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("lab %s: no answer to %q within %v: the lab process is wedged or starved (its log: %s)",
			lab, req.Op, QueryTimeout, filepath.Join(store.Dir(lab), "lab.log"))
	}
	if s != nil {
		c.SetDeadline(time.Time{}) // a capture's stream runs until its caller ends it
	}
	return r, s, err
}

func query(c net.Conn, lab string, req Request) (Reply, *Stream, error) {
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		c.Close()
		return Reply{}, nil, err
	}
	// The reply is one line; what follows it (a capture's pcapng) is read through the
	// same buffer. Read a byte at a time, a drain of 20 rows of `record` was 3,000
	// system calls in a process that shares the lab's two cores.
	br := bufio.NewReaderSize(c, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxReplyLine {
			c.Close()
			return Reply{}, nil, errors.New("control reply too long")
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			c.Close()
			return Reply{}, nil, fmt.Errorf("lab %s: control reply: %w", lab, err)
		}
	}
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		c.Close()
		return Reply{}, nil, fmt.Errorf("lab %s: control reply: %w", lab, err)
	}
	if r.Error != "" {
		c.Close()
		return r, nil, fmt.Errorf("lab %s: %s", lab, r.Error)
	}
	if req.Op != "capture" {
		c.Close()
		return r, nil, nil
	}
	return r, &Stream{c.(*net.UnixConn), br}, nil
}

// maxReplyLine bounds a control reply that Query reads.
const maxReplyLine = 16 << 20

// Stream is the connection of a "capture" after its reply: reads go through the
// buffer that read the reply line, and CloseWrite (of the embedded connection) asks
// the lab to end the capture.
type Stream struct {
	*net.UnixConn
	r *bufio.Reader
}

// Read reads the capture's pcapng bytes as they arrive.
func (s *Stream) Read(p []byte) (int, error) { return s.r.Read(p) }
