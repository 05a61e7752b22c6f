package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	m := regexp.MustCompile(`http://` + regexp.QuoteMeta(addr) + `/\?token=([0-9a-f]{32})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("up does not say where the view is, with its token:\n%s", out)
	}
	token := m[1]
	shots, err := filepath.Abs("../../out")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	page := "http://" + addr + "/?frames=3&host=h2&token=" + token
	foreign(t, addr, token)

	dom, log := browse(t, browser, page, "")
	for _, n := range []string{"h1", "h2", "s1"} {
		if !strings.Contains(dom, `id="node-`+n+`"`) {
			t.Errorf("the graph has no node %s", n)
		}
	}
	browse(t, browser, page, filepath.Join(shots, "web-idle.png"))

	server := c.cmd("exec", "--lab", name, "-d", "h1", "--", "write_bw", "-x", "1", "-D", "180")
	server.Stdout, server.Stderr = os.Stderr, os.Stderr
	if err := server.Run(); err != nil {
		t.Fatal(err)
	}
	// 180 s: the three browser runs below must fall inside it (a loaded machine takes
	// up to 10 s to start Chromium, and three runs took 61 s at a load average of 11);
	// the deferred kill and down stop both ends when the test is done.
	client := c.cmd("exec", "--lab", name, "h2", "--", "write_bw", "-x", "1", "-D", "180", "10.0.0.1")
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { client.Process.Kill(); client.Wait() }()
	started := time.Now()
	time.Sleep(time.Second) // let the flow start: the view should show it running, not starting

	if resp, err := http.Post("http://"+addr+"/api/capture?port=s1:p0&action=start&token="+token, "", nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("capture start: %v %v", err, resp)
	}
	first, log1 := browse(t, browser, page, "")
	browse(t, browser, page, filepath.Join(shots, "web-traffic.png"))
	second, log2 := browse(t, browser, page, "")
	if resp, err := http.Post("http://"+addr+"/api/capture?port=s1:p0&action=stop&token="+token, "", nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("capture stop: %v %v", err, resp)
	}
	if during := time.Since(started); during > 180*time.Second {
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

// foreign checks that the lab's view refuses what the issue showed another site doing:
// a capture POSTed with a foreign Origin (even with the token, which such a page cannot
// know), a capture without the token, and a status read under a foreign Host (DNS
// rebinding) all get 403, and start no capture.
func foreign(t *testing.T, addr, token string) {
	t.Helper()
	for _, c := range []struct{ path, host, origin string }{
		{"/api/capture?port=s1:p0&action=start&token=" + token, "", "http://evil.example"},
		{"/api/capture?port=s1:p0&action=start", "", ""},
		{"/api/status", "evil.example:" + strings.Split(addr, ":")[1], ""},
	} {
		method := http.MethodPost
		if c.path == "/api/status" {
			method = http.MethodGet
		}
		req, _ := http.NewRequest(method, "http://"+addr+c.path, nil)
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s Host %q Origin %q: %d %s, want 403", method, c.path, c.host, c.origin, resp.StatusCode, body)
		}
	}
}

var (
	replayTxRe    = regexp.MustCompile(`id="port-s1:p4" data-tx-bytes="(\d+)"`)
	replayFrameRe = regexp.MustCompile(`<span id="simtime">([\d.]+) of ([\d.]+) µs simulated, sample (\d+) of (\d+)</span>`)
	replayQPRe    = regexp.MustCompile(`<tr id="qp-h1-0"><td>0</td><td>RTS</td><td>[\d.]+</td><td>\d+</td><td>[\d.]+</td><td>\d+</td>`)
)

// TestWebReplayRealTime: `rocelab web --experiment DIR` replays a small incast in the
// live view's page. Headless Chromium loads it without errors; the graph shows the
// run's nodes (h1…h5, s1) and the replay's controls; a snapshot after 3 samples and one
// after 20 differ as the replay advances (simulated time, the bottleneck's bytes sent,
// a busy link, h1's flow with its rate, W and U); played to its end the page shows
// every sample and says so; started at a later sample (from=30, as the time slider
// seeks) it goes on from there. Screenshot: out/web-replay.png.
func TestWebReplayRealTime(t *testing.T) {
	if raceEnabled {
		t.Skip("Chromium takes seconds per page; the non-race pass runs this")
	}
	browser := chromium(t)
	dir := filepath.Join(t.TempDir(), "incast4")
	// The commands of docs/observability.md, the web one in-process (it serves until Ctrl-C).
	if out, err := runExperiment(t, "incast", "--senders", "4", "--flow-size", "100KB", "--out", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cmd := newWebCmd()
	cmd.SetArgs([]string{"--experiment", dir, "--lab", "x", "--listen", "127.0.0.1:0"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("--lab with --experiment: %v", err)
	}
	addr, frames, err := serveReplay("127.0.0.1:0", dir)
	if err != nil {
		t.Fatal(err)
	}
	shots, err := filepath.Abs("../../out")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	page := "http://" + addr + "/?host=h1"

	early, log1 := browse(t, browser, page+"&frames=3", "")
	late, log2 := browse(t, browser, page+"&frames=20", "")
	whole, log3 := browse(t, browser, page+"&every=20", "")
	sought, log4 := browse(t, browser, page+"&from=30&frames=3", "")
	browse(t, browser, page+"&frames=20", filepath.Join(shots, "web-replay.png"))

	for i, d := range []string{early, late, whole, sought} {
		if !strings.Contains(d, `<ul id="errors"></ul>`) {
			t.Errorf("page %d: the page reported errors:\n%s", i, d)
		}
		for _, n := range []string{"h1", "h2", "h3", "h4", "h5", "s1"} {
			if !strings.Contains(d, `id="node-`+n+`"`) {
				t.Errorf("page %d: the graph has no node %s", i, n)
			}
		}
		if !strings.Contains(d, `<div id="replay">`) || !strings.Contains(d, `<span id="kind">experiment</span>`) {
			t.Errorf("page %d: no replay controls:\n%s", i, d)
		}
	}
	for _, l := range []string{log1, log2, log3, log4} {
		if strings.Contains(l, "Uncaught") {
			t.Errorf("Chromium logged an uncaught exception:\n%s", l)
		}
	}
	if m := replayFrameRe.FindStringSubmatch(sought); m == nil || m[3] != "33" {
		t.Errorf("from=30, after 3 samples the page is not at sample 33: %v", m)
	}
	a, b := replayFrameRe.FindStringSubmatch(early), replayFrameRe.FindStringSubmatch(late)
	if a == nil || b == nil || a[3] != "3" || b[3] != "20" || a[4] != strconv.Itoa(frames) || a[1] == b[1] {
		t.Errorf("simulated time did not advance from sample 3 to 20 of %d: %v then %v", frames, a, b)
	}
	x, y := replayTxRe.FindStringSubmatch(early), replayTxRe.FindStringSubmatch(late)
	if x == nil || y == nil || x[1] == y[1] {
		t.Errorf("the bottleneck s1:p4's bytes sent did not move between samples 3 and 20: %v then %v", x, y)
	} else {
		t.Logf("s1:p4 tx bytes %s at sample 3, %s at sample 20 (%s µs)", x[1], y[1], b[1])
	}
	busy := false
	for _, m := range linkRe.FindAllStringSubmatch(late, -1) {
		busy = busy || strings.Trim(m[1], "0.") != ""
	}
	if !busy {
		t.Errorf("no link showed utilization at sample 20: %q", linkRe.FindAllString(late, -1))
	}
	if !replayQPRe.MatchString(late) {
		t.Errorf("h1's flow 0 is not shown running with rate, W, U and bytes in flight at sample 20:\n%s", late)
	}
	if !strings.Contains(whole, `<span id="state">ended</span>`) || !strings.Contains(whole, `<span id="updates">`+strconv.Itoa(frames)+`</span>`) {
		t.Errorf("played to its end, the page did not show all %d samples and say ended:\n%s", frames, whole)
	}
	if fi, err := os.Stat(filepath.Join(shots, "web-replay.png")); err != nil || fi.Size() == 0 {
		t.Errorf("screenshot web-replay.png: %v", err)
	}
}
