package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium is Debian's headless browser (make deps-system installs it as root).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (make deps-system installs it as root)")
	return ""
}

// browse loads url in headless Chromium; with shot it saves a screenshot there,
// otherwise it returns the DOM once the page has run (its ?frames=N stream closed) and
// Chromium's log.
func browse(t *testing.T, browser, url, shot string) (dom, log string) {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
		"--window-size=1200,760"}
	if shot != "" {
		args = append(args, "--screenshot="+shot)
	} else {
		args = append(args, "--dump-dom")
	}
	cmd := exec.Command(browser, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return string(out), stderr.String()
}

var (
	txBytesRe = regexp.MustCompile(`id="port-s1:p0" data-tx-bytes="(\d+)"`)
	linkRe    = regexp.MustCompile(`class="linklabel">([\d.]+)% · q`)
	qpRowRe   = regexp.MustCompile(`<tr id="qp-h2-\d+"><td>\d+</td><td>RTS</td><td>[\d.∞]+</td><td>[\d∞]+</td><td>[\d.]+</td>`)
)

// TestWebViewRealTime: `rocelab up --web ADDR` serves the live view; headless Chromium
// loads it without errors (the page reports window errors, rejections and
// console.error into the DOM; Chromium's log has no uncaught exception), the graph shows
// the lab's nodes, and while write_bw runs two snapshots taken apart show the port's
// counters moving, a busy link and h2's QP with its rate, W and U. A capture is started
// and stopped through the page's API. Screenshots go to out/web-*.png.
func TestWebViewRealTime(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector slows the lab below real time")
	}
	c := newCLI(t)
	browser := chromium(t)
	buildApps(t, c, "write_bw")
	name := labName("web")
	addr := freeAddr(t)
	captures := t.TempDir()
	out := c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", name, "--web", addr, "--capture-dir", captures)
	defer c.run("down", name)
	if !strings.Contains(out, "http://"+addr+"/") {
		t.Errorf("up does not say where the view is:\n%s", out)
	}
	shots, err := filepath.Abs("../../out")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	page := "http://" + addr + "/?frames=3&host=h2"

	dom, log := browse(t, browser, page, "")
	for _, n := range []string{"h1", "h2", "s1"} {
		if !strings.Contains(dom, `id="node-`+n+`"`) {
			t.Errorf("the graph has no node %s", n)
		}
	}
	browse(t, browser, page, filepath.Join(shots, "web-idle.png"))

	server := c.cmd("exec", "--lab", name, "-d", "h1", "--", "write_bw", "-x", "1", "-D", "60")
	server.Stdout, server.Stderr = os.Stderr, os.Stderr
	if err := server.Run(); err != nil {
		t.Fatal(err)
	}
	// 60 s: the three browser runs below must fall inside it (a loaded machine takes
	// up to 10 s to start Chromium); down stops it when the test is done.
	client := c.cmd("exec", "--lab", name, "h2", "--", "write_bw", "-x", "1", "-D", "60", "10.0.0.1")
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { client.Process.Kill(); client.Wait() }()
	started := time.Now()
	time.Sleep(time.Second) // let the flow start: the view should show it running, not starting

	if resp, err := http.Post("http://"+addr+"/api/capture?port=s1:p0&action=start", "", nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("capture start: %v %v", err, resp)
	}
	first, log1 := browse(t, browser, page, "")
	browse(t, browser, page, filepath.Join(shots, "web-traffic.png"))
	second, log2 := browse(t, browser, page, "")
	if resp, err := http.Post("http://"+addr+"/api/capture?port=s1:p0&action=stop", "", nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("capture stop: %v %v", err, resp)
	}
	if during := time.Since(started); during > 60*time.Second {
		t.Fatalf("the snapshots took %v, longer than write_bw ran", during)
	}

	for i, d := range []string{dom, first, second} {
		if !strings.Contains(d, `<ul id="errors"></ul>`) {
			t.Errorf("snapshot %d: the page reported errors:\n%s", i, d)
		}
		if !strings.Contains(d, `<span id="state">snapshot</span>`) {
			t.Errorf("snapshot %d: the page did not get its 3 updates", i)
		}
	}
	for _, l := range []string{log, log1, log2} {
		if strings.Contains(l, "Uncaught") {
			t.Errorf("Chromium logged an uncaught exception:\n%s", l)
		}
	}
	a, b := txBytesRe.FindStringSubmatch(first), txBytesRe.FindStringSubmatch(second)
	if a == nil || b == nil || a[1] == b[1] {
		t.Errorf("s1:p0's tx bytes did not move between snapshots taken while write_bw ran: %v then %v", a, b)
	} else {
		t.Logf("s1:p0 tx bytes %s, then %s", a[1], b[1])
	}
	busy := false
	for _, m := range linkRe.FindAllStringSubmatch(second, -1) {
		busy = busy || strings.Trim(m[1], "0.") != ""
	}
	if !busy {
		t.Errorf("no link showed utilization while write_bw ran: %q", linkRe.FindAllString(second, -1))
	}
	if !qpRowRe.MatchString(second) {
		t.Errorf("h2's flows show no QP with rate, W and U:\n%s", second)
	}
	files, _ := filepath.Glob(filepath.Join(captures, "s1-p0-*.pcapng"))
	if len(files) != 1 {
		t.Fatalf("captures started from the page: %v, want one file", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Size() < 1<<20 {
		t.Errorf("the page's capture %s: %v, %d bytes", files[0], err, fi.Size())
	}
	for _, s := range []string{"web-idle.png", "web-traffic.png"} {
		if fi, err := os.Stat(filepath.Join(shots, s)); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s: %v", s, err)
		}
	}
}
