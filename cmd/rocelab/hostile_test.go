package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/lab/labtest"
	"github.com/rocelab/rocelab/netns"
)

// intDatagram is the UDP payload of issue 20's first finding: an INT-MD shim whose
// metadata header says Hop ML 0 with a non-zero instruction bitmap. Switches stamp at
// dequeue; the INT stamper indexed an empty slice on it and the panic took every node
// of the lab down.
var intDatagram = []byte("\x10\x0300 0A" + strings.Repeat("0", 82))

// sendINTDatagram runs as an unprivileged app in a lab host: one UDP datagram with the
// lab's INT DSCP (0x1B, in the TOS byte) to peer.
func sendINTDatagram(peer string) error {
	c, err := net.Dial("udp4", net.JoinHostPort(peer, "5000"))
	if err != nil {
		return err
	}
	defer c.Close()
	raw, err := c.(*net.UDPConn).SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TOS, 0x1B<<2)
	}); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	_, err = c.Write(intDatagram)
	return err
}

// TestUnprivilegedINTDatagram: an unprivileged user in a host of an INT lab sends the
// datagram that crashed labs; the lab process lives and its fabric still forwards.
func TestUnprivilegedINTDatagram(t *testing.T) {
	c := newCLI(t)
	name := labName("int")
	file := filepath.Join(t.TempDir(), "int.yaml")
	if err := os.WriteFile(file, []byte(`telemetry: int
congestion_control: hpcc
hosts:
  - {name: h1, ipv4: 10.0.0.1}
  - {name: h2, ipv4: 10.0.0.2}
switches:
  - name: s1
links:
  - {endpoints: [h1, s1], rate: 10G, delay: 1us}
  - {endpoints: [h2, s1], rate: 10G, delay: 1us}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c.run("up", "-f", file, "--name", name)
	t.Cleanup(func() { c.cmd("down", name).Run() })

	// The test binary, where uid 65534 may run it, as the app.
	dir, err := os.MkdirTemp("", "rocelab-int-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "app"), bin, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	app := exec.Command(filepath.Join(dir, "app"))
	app.Env = append(os.Environ(), "ROCELAB_TEST_APP=int-datagram", "ROCELAB_TEST_PEER=10.0.0.2")
	app.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := startWait(netns.NamespaceName(name, "h1"), app)
	if err != nil {
		t.Fatalf("the unprivileged app: %v\n%s", err, out)
	}

	// The lab still forwards, both ways, and its process is the same.
	for _, p := range [][2]string{{"h1", "10.0.0.2"}, {"h2", "10.0.0.1"}} {
		if err := labtest.Ping(netns.NamespaceName(name, p[0]), netip.MustParseAddr(p[1])); err != nil {
			t.Fatalf("after the datagram, %s → %s: %v", p[0], p[1], err)
		}
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--json", "--lab", name)), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Running {
		t.Fatalf("the lab process is gone: %+v", st)
	}
	out2 := st.Switches[0].Ports[1].Stats
	t.Logf("s1:p1 after the datagram: stamped %d, stamp errors %d, panics %d", out2.Stamped, out2.StampErrors, out2.Panics)
}

// startWait runs cmd in namespace ns and waits for it, returning its combined output.
func startWait(ns string, cmd *exec.Cmd) ([]byte, error) {
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := netns.StartIn(ns, cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return buf.Bytes(), err
}
