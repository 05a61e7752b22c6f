package verbs_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/service"
)

const floodEnv = "ROCELAB_VERBS_TEST_FLOOD" // ADDR,N: the child opens N silent connections

// nobody is the unprivileged user the flood runs as.
const nobody = 65534

// flood is the attacker: it opens n connections to addr without saying anything, holds
// every one it got, reports "held H failed F" and waits for its stdin to close.
func flood(arg string) {
	addr, nStr, _ := strings.Cut(arg, ",")
	n, _ := strconv.Atoi(nStr)
	var held []*net.UnixConn
	failed := 0
	for range n {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: addr, Net: "unixpacket"})
		for tries := 0; errors.Is(err, syscall.EAGAIN) && tries < 1000; tries++ { // the backlog is full: insist
			time.Sleep(100 * time.Microsecond)
			c, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: addr, Net: "unixpacket"})
		}
		if err != nil {
			failed++
			continue
		}
		held = append(held, c)
	}
	fmt.Println("held", len(held), "failed", failed)
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// startFlood runs flood as uid nobody against addr with n connections and returns once
// the child has made every attempt; the cleanup (or release) ends it.
func startFlood(t *testing.T, addr string, n int) (held int, release func()) {
	t.Helper()
	cmd := exec.Command(copyForNobody(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), floodEnv+"="+addr+","+strconv.Itoa(n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("flood child: %v", err)
	}
	t.Logf("flood child as uid %d: %s", nobody, strings.TrimSpace(line))
	fmt.Sscanf(line, "held %d", &held)
	done := false
	release = func() {
		if !done {
			done = true
			stdin.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(release)
	return held, release
}

// copyForNobody copies the test binary where uid nobody may run it (go test builds it in
// a directory only its owner can enter).
func copyForNobody(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rocelab-flood-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(dir+"/verbs.test", bin, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir + "/verbs.test"
}

func needRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the flood runs as another user (uid 65534)")
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitFor polls cond until it holds or 20 s pass (a bound only a broken service hits).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeWorks checks that root's apps on the flooded host still open the device and move
// data: a fresh pair of contexts, a 1 MiB RDMA WRITE, its completion.
func writeWorks(t *testing.T, l *lab) {
	t.Helper()
	a, b := pair(t, l, 1<<20)
	fill(a.mr.Bytes(), 7)
	postWrite(t, a, b, 1<<20)
	wantOK(t, poll(t, a.cq, 1))
	a.ctx.Close()
	b.ctx.Close()
}

// TestFloodFromDisallowedUser is issue 20's fd exhaustion: 20,000 connection attempts
// from a user the service does not admit. Each is refused at accept, before a byte is
// read, so the lab's descriptors and memory stay where they were and root's apps on the
// same host keep working while the attacker holds its end of every connection.
func TestFloodFromDisallowedUser(t *testing.T) {
	needRoot(t)
	l := newLab(t)
	writeWorks(t, l) // warm: the baseline includes what a first app leaves (pools, goroutines)
	fds, rss := openFDs(t), rssBytes(t)
	held, release := startFlood(t, l.addrs[1], 20000)
	if held < 10000 {
		t.Fatalf("the flood got only %d connections through", held)
	}
	writeWorks(t, l)
	// Every connection that got through is refused, none kept.
	waitFor(t, "every flood connection refused", func() bool { return l.srvs[1].Stats().Rejected >= held })
	waitFor(t, "no connection held once root's apps closed", func() bool { return l.srvs[1].Stats().Conns == 0 })
	if n := openFDs(t); n > fds+8 {
		t.Errorf("during the flood the lab holds %d descriptors, %d before", n, fds)
	}
	release()
	waitFor(t, "the service's descriptors back to baseline", func() bool { return openFDs(t) <= fds+2 })
	t.Logf("lab descriptors %d before, %d after; RSS %d MiB before, %d MiB after", fds, openFDs(t), rss>>20, rssBytes(t)>>20)
	// The race detector's shadow memory grows with every goroutine and object it has
	// seen, so memory is judged without it (make test's second pass runs this test too).
	if got := rssBytes(t); !raceEnabled && got > rss+64<<20 {
		t.Errorf("RSS %d MiB after the flood, %d MiB before", got>>20, rss>>20)
	}
}

// TestFloodWithinLimits: an admitted user that opens connections and never says HELLO
// gets its per-user quota and no more; the silent ones are closed after the handshake
// timeout, and other users' apps work throughout.
func TestFloodWithinLimits(t *testing.T) {
	needRoot(t)
	const perUID, total, attempts = 64, 128, 2000
	l := newLab(t, service.WithAllowedUIDs(0, nobody), service.WithConnLimits(perUID, total),
		service.WithHandshakeTimeout(500*time.Millisecond))
	fds := openFDs(t)
	_, release := startFlood(t, l.addrs[1], attempts)
	writeWorks(t, l)
	waitFor(t, "the silent connections timed out", func() bool { return l.srvs[1].Stats().TimedOut == perUID })
	st := l.srvs[1].Stats()
	if st.OverLimit < attempts-perUID || st.Conns != 0 || st.Rejected != 0 {
		t.Errorf("stats %+v: want %d over the limit, %d timed out, none held", st, attempts-perUID, perUID)
	}
	release()
	waitFor(t, "descriptors back to baseline", func() bool { return openFDs(t) <= fds+2 })
}

// postWrite posts one signaled RDMA WRITE of n bytes from a's MR into b's.
func postWrite(t *testing.T, a, b *app, n uint32) {
	t.Helper()
	if err := a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: n, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
}

// rssBytes is this process's resident set size.
func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(ln, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
