package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// The DaemonSet's memory limit and GOMEMLIMIT
// (deploy/kubernetes/daemonset.yaml).
const (
	stormMemLimit   = 96 << 20
	stormGoMemLimit = "80MiB"
	stormClients    = 4000
	// The refusal of a scrape beyond --web.max-requests (its default, 40):
	// promhttp's text for its MaxRequestsInFlight, which node_exporter
	// answers.
	stormRefusal = "Limit of concurrent requests reached (40), try again later.\n"
)

// The agent binary in a memory cgroup at the DaemonSet's limit takes
// 4,000 concurrent clients of each kind, one kind after another: scrapers
// that read their answer, scrapers that never read it, slowloris clients
// (headers never finished) and slow bodies. It is never OOM-killed; every
// 200 answer is a complete exposition that promlint accepts and every
// other is the 503 refusal; /health answers within the kubelet probe's
// timeout during each storm and after it; SIGHUP rescans during it; the
// state files always parse. Without --web.max-requests ahead of the
// compressor, or with slow bodies read to the end, the first or last kind
// goes over 96 MiB.
func TestAgentStormInMemoryCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 16,000 connections")
	}
	need := uint64(stormClients + 500)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur < need {
		skipOrFail(t, fmt.Sprintf("RLIMIT_NOFILE %d: the storm needs %d descriptors on the client side", rl.Cur, need))
	}
	cg, err := newMemCgroup(t, stormMemLimit)
	if err != nil {
		skipOrFail(t, "no memory cgroup to run the agent in: "+err.Error())
	}
	t.Logf("cgroup %s (%s), limit %d MiB, GOMEMLIMIT=%s", cg.dir, cg.version(), stormMemLimit>>20, stormGoMemLimit)

	root := fakesystest.Root(t, "dgx-h100")
	state := filepath.Join(t.TempDir(), "state")
	nfd := filepath.Join(t.TempDir(), "gpuaffinity.nfd")
	wrap := []string{"sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg.dir, "cgroup.procs")}
	p := startAgentProcVia(t, wrap, []string{"GOMEMLIMIT=" + stormGoMemLimit},
		"--root", root, "--state-dir", state, "--nfd-file", nfd, "--rescan", "0", "--placement", "off")
	if !cg.holds(p.cmd.Process.Pid) {
		t.Fatalf("agent %d is not in %s", p.cmd.Process.Pid, cg.dir)
	}
	addr := strings.TrimPrefix(p.url, "http://")
	t.Logf("idle: %d KiB", cg.usage()>>10)

	s := &storm{t: t, p: p, cg: cg, addr: addr, state: state, nfd: nfd}
	s.run("reading", true, "GET /metrics HTTP/1.1\r\nHost: agent\r\nAccept: text/plain;version=0.0.4\r\nAccept-Encoding: gzip\r\n\r\n", "", func(kind string, conns []net.Conn) { s.readAnswers(kind, conns, false) })
	// Identity: the answer (about 260 KB) outgrows the sockets' buffers,
	// so the handlers block on their writes.
	s.run("never reading", false, "GET /metrics HTTP/1.1\r\nHost: agent\r\nAccept: text/plain;version=0.0.4\r\n\r\n", "", nil)
	s.run("slowloris", false, "GET /metrics HTTP/1.1\r\nHost: agent\r\n", "X-Dribble: 1\r\n", s.waitCut)
	s.run("slow body", true, "GET /metrics HTTP/1.1\r\nHost: agent\r\nAccept: text/plain;version=0.0.4\r\nAccept-Encoding: gzip\r\nContent-Length: 100000\r\n\r\nbody", "0123456789", func(kind string, conns []net.Conn) { s.readAnswers(kind, conns, true) })

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v", err)
	}
	if n := cg.oomKills(); n != 0 {
		t.Errorf("%d OOM kills in the agent's cgroup", n)
	}
}

// skipOrFail skips, or fails in CI where the test must run.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if testenv.InCI() {
		t.Fatal(why)
	}
	t.Skip(why)
}

// storm sends waves of clients at one agent.
type storm struct {
	t     *testing.T
	p     *agentProc
	cg    *memCgroup
	addr  string
	state string
	nfd   string
}

// run opens stormClients connections that each send request (and then
// dribble every 2 s, where dribble is set), and, with all of them open,
// probes /health, sends SIGHUP and checks the state files; then finish
// (nil: close them unread) deals with the connections. Afterwards the
// agent is alive, not OOM-killed, answers /health, and each request was
// answered 200 or 503.
//
// buffered gives each client socket a 1 MiB receive buffer, which holds a
// whole answer: the agent's writes then end whenever the test, slower
// under -race than a scraper, gets to read them (an answer still being
// written after writeTimeout, 15 s, is cut).
func (s *storm) run(kind string, buffered bool, request, dribble string, finish func(kind string, conns []net.Conn)) {
	t := s.t
	t.Helper()
	s.cg.resetPeak()
	before := s.metricsCount()
	start := time.Now()
	conns := s.dial(kind, buffered, request)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	stopDribble := make(chan struct{})
	var dribbling sync.WaitGroup
	if dribble != "" {
		dribbling.Go(func() { dribbleAll(conns, dribble, stopDribble) })
	}
	t.Logf("%s: %d connections open after %s, %d KiB", kind, len(conns), time.Since(start).Round(time.Millisecond), s.cg.usage()>>10)

	s.probe(kind + ", during")
	s.sighup(kind)
	s.checkState(kind)
	t.Logf("%s: SIGHUP done %s after the first connection", kind, time.Since(start).Round(time.Millisecond))
	if finish != nil {
		finish(kind, conns)
	}
	close(stopDribble)
	dribbling.Wait()
	for _, c := range conns {
		c.Close()
	}
	if !s.alive() {
		t.Fatalf("%s: the agent died (%d OOM kills); stderr:\n%s", kind, s.cg.oomKills(), s.p.drain())
	}
	if n := s.cg.oomKills(); n != 0 {
		t.Fatalf("%s: %d OOM kills", kind, n)
	}
	s.probe(kind + ", after")
	if kind != "slowloris" {
		// Every request was answered, 200 or 503, and some were refused.
		var after map[string]float64
		waitFor(t, kind+": every request counted by promhttp", func() bool {
			after = s.metricsCount()
			return after["200"]+after["503"]-before["200"]-before["503"] >= stormClients+1 // and this scrape
		})
		if after["503"] == before["503"] {
			t.Errorf("%s: no request refused with 503 among %d at once", kind, stormClients)
		}
		for code, n := range after {
			if code != "200" && code != "503" && n != before[code] {
				t.Errorf("%s: %g answers %s", kind, n-before[code], code)
			}
		}
		t.Logf("%s: %g answered 200, %g refused 503", kind, after["200"]-before["200"]-1, after["503"]-before["503"])
	}
	s.checkState(kind)
	t.Logf("%s: peak %d KiB (%s), %s", kind, s.cg.peak()>>10, s.cg.extra(), time.Since(start).Round(time.Millisecond))
}

// dial opens stormClients connections and sends request on each, from a
// few goroutines (the test binary may run under -race, which allows 8,128
// goroutines at most).
func (s *storm) dial(kind string, buffered bool, request string) []net.Conn {
	d := net.Dialer{Timeout: 30 * time.Second}
	if buffered {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var err error
			if cerr := c.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1<<20)
			}); cerr != nil {
				return cerr
			}
			return err
		}
	}
	conns := make([]net.Conn, stormClients)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(conns); i = int(next.Add(1)) - 1 {
				c, err := d.Dial("tcp", s.addr)
				if err == nil {
					c.SetWriteDeadline(time.Now().Add(30 * time.Second))
					_, err = io.WriteString(c, request)
					conns[i] = c
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	var open []net.Conn
	for _, c := range conns {
		if c != nil {
			open = append(open, c)
		}
	}
	if len(errs) > 0 {
		for _, c := range open {
			c.Close()
		}
		s.t.Fatalf("%s: %d of %d connections failed; first: %v", kind, len(errs), stormClients, errs[0])
	}
	return open
}

// dribbleAll writes b on every connection every 2 s until stop; a
// connection the agent closed is left alone.
func dribbleAll(conns []net.Conn, b string, stop <-chan struct{}) {
	dead := make([]bool, len(conns))
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for i, c := range conns {
			if dead[i] {
				continue
			}
			c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := io.WriteString(c, b); err != nil {
				dead[i] = true
			}
		}
	}
}

// forEach runs f on every connection from 32 goroutines.
func forEach(conns []net.Conn, f func(net.Conn)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(conns); i = int(next.Add(1)) - 1 {
				f(conns[i])
			}
		})
	}
	wg.Wait()
}

// readAnswers reads each connection's answer: a 200 must be a complete
// exposition that promlint accepts, anything else the 503 refusal. Where
// resetOK (the request has a body the agent does not read), the answer
// may be lost to the TCP reset the agent's close sends with the unread
// body still arriving (RFC 9112, 9.6).
func (s *storm) readAnswers(kind string, conns []net.Conn, resetOK bool) {
	t := s.t
	var ok, refused atomic.Int64
	var mu sync.Mutex
	var problems []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	start := time.Now()
	var x expositions
	var reset atomic.Int64
	forEach(conns, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		switch {
		case err != nil && resetOK && errors.Is(err, syscall.ECONNRESET):
			reset.Add(1)
			return
		case err != nil && resp == nil:
			fail("reading an answer: %v", err)
			return
		case err != nil:
			fail("%s answer cut: %v after %d bytes", resp.Status, err, len(body))
			return
		}
		switch resp.StatusCode {
		case http.StatusOK:
			ok.Add(1)
			if err := x.check(resp.Header.Get("Content-Encoding"), body); err != nil {
				fail("200 answer: %v", err)
			}
		case http.StatusServiceUnavailable:
			refused.Add(1)
			if string(body) != stormRefusal {
				fail("503 answer %q, want %q", body, stormRefusal)
			}
		default:
			fail("answer %s: %q", resp.Status, body)
		}
	})
	for _, p := range problems {
		t.Errorf("%s: %s", kind, p)
	}
	if ok.Load() == 0 {
		t.Errorf("%s: no scrape answered 200", kind)
	}
	t.Logf("%s: read %d answers 200 (complete, lint-clean; %d shapes parsed in full), %d refusals, %d lost to a reset, in %s", kind, ok.Load(), len(x.shapes), refused.Load(), reset.Load(), time.Since(start).Round(time.Millisecond))
}

// expositions checks the 200 answers of a storm. Each is decoded, and
// its shape (the text without the sample values, each of which must
// parse as a float) is taken; the first answer of each shape is parsed
// in full with prometheus/common's text parser and linted by promlint,
// whose verdicts depend on the shape only (names, help, types, label
// sets). Parsing and linting each of a few hundred 260 KB answers would
// take minutes under -race (promlint: 2 s each).
type expositions struct {
	mu     sync.Mutex
	shapes map[uint64]*shapeCheck
}

var shapeSeed = maphash.MakeSeed()

func (x *expositions) check(encoding string, body []byte) error {
	if encoding == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
	}
	var h maphash.Hash
	h.SetSeed(shapeSeed)
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			h.Write(line)
			h.WriteByte('\n')
			continue
		}
		i := bytes.LastIndexByte(line, ' ')
		if i < 0 {
			return fmt.Errorf("sample line %q without a value", line)
		}
		if _, err := strconv.ParseFloat(string(line[i+1:]), 64); err != nil {
			return fmt.Errorf("sample line %q: %w", line, err)
		}
		h.Write(line[:i])
		h.WriteByte('\n')
	}
	shape := h.Sum64()
	x.mu.Lock()
	if x.shapes == nil {
		x.shapes = map[uint64]*shapeCheck{}
	}
	c := x.shapes[shape]
	if c == nil {
		c = &shapeCheck{}
		x.shapes[shape] = c
	}
	x.mu.Unlock()
	c.once.Do(func() { c.err = checkExposition(body) })
	return c.err
}

// shapeCheck is the full check of the first answer of a shape.
type shapeCheck struct {
	once sync.Once
	err  error
}

// checkExposition parses an exposition in full with prometheus/common's
// text parser; promlint must find nothing, and the last series the agent
// sends (promhttp's) must be there.
func checkExposition(body []byte) error {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%d bytes: %w", len(body), err)
	}
	for _, name := range []string{"gpuaffinity_build_info", "gpuaffinity_health_healthy", "promhttp_metric_handler_requests_total"} {
		if mfs[name] == nil {
			return fmt.Errorf("%d bytes without %s", len(body), name)
		}
	}
	fams := make([]*dto.MetricFamily, 0, len(mfs))
	for _, mf := range mfs {
		fams = append(fams, mf)
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("promlint: %s: %s (and %d more)", problems[0].Metric, problems[0].Text, len(problems)-1)
	}
	return nil
}

// waitCut waits until the agent has closed every connection
// (readHeaderTimeout): it never answers a request whose headers do not
// end.
func (s *storm) waitCut(kind string, conns []net.Conn) {
	start := time.Now()
	var answered, open atomic.Int64
	forEach(conns, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		n, err := c.Read(make([]byte, 1))
		switch {
		case n > 0:
			answered.Add(1)
		case errors.Is(err, os.ErrDeadlineExceeded):
			open.Add(1)
		}
	})
	if answered.Load() > 0 || open.Load() > 0 {
		s.t.Errorf("%s: %d connections answered, %d still open after 60 s; want all closed unanswered", kind, answered.Load(), open.Load())
	}
	s.t.Logf("%s: all closed by the agent %s after the probe", kind, time.Since(start).Round(time.Millisecond))
}

// probe GETs /health as the kubelet would (timeoutSeconds 5, three
// tries: failureThreshold 3).
func (s *storm) probe(when string) {
	s.t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var err error
	for try := range 3 {
		var resp *http.Response
		start := time.Now()
		if resp, err = client.Get(s.p.url + "/health"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.HasPrefix(string(b), "ok: healthy") {
				s.t.Logf("%s: /health answered in %s (try %d)", when, time.Since(start).Round(time.Millisecond), try+1)
				return
			}
			err = fmt.Errorf("%s %q", resp.Status, b)
		}
	}
	s.t.Fatalf("%s: /health: %v (agent alive: %t, OOM kills in its cgroup: %d)", when, err, s.alive(), s.cg.oomKills())
}

// sighup rescans through SIGHUP and waits for the round's READY=1 and
// the rewritten topology.json.
func (s *storm) sighup(kind string) {
	s.t.Helper()
	path := filepath.Join(s.state, cache.TopologyFile)
	before, err := os.Stat(path)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		s.t.Fatal(err)
	}
	s.p.expect(s.t, "RELOADING=1")
	s.p.expect(s.t, "READY=1")
	after, err := os.Stat(path)
	if err != nil {
		s.t.Fatal(err)
	}
	if !after.ModTime().After(before.ModTime()) {
		s.t.Errorf("%s: SIGHUP did not rewrite %s (mtime %s, before %s)", kind, path, after.ModTime(), before.ModTime())
	}
}

// checkState parses every state file and the NFD feature file.
func (s *storm) checkState(kind string) {
	t := s.t
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		return b
	}
	top := filepath.Join(s.state, cache.TopologyFile)
	if n, err := cache.Decode(top, read(top)); err != nil || len(n.GPUs) != 8 {
		t.Errorf("%s: %s: %d GPUs, %v", kind, top, len(n.GPUs), err)
	}
	launch := filepath.Join(s.state, cache.LaunchFile)
	if n, err := cache.DecodeLaunch(launch, read(launch)); err != nil || len(n.GPUs) != 8 {
		t.Errorf("%s: %s: %d GPUs, %v", kind, launch, len(n.GPUs), err)
	}
	xmlFile := filepath.Join(s.state, cache.NCCLTopoFile)
	dec := xml.NewDecoder(bytes.NewReader(read(xmlFile)))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Errorf("%s: torn %s: %v", kind, xmlFile, err)
			break
		}
	}
	env := read(filepath.Join(s.state, cache.EnvFile))
	if !bytes.HasSuffix(env, []byte("\n")) || !bytes.Contains(env, []byte("\nNCCL_TOPO_FILE=")) {
		t.Errorf("%s: torn env: %q", kind, env)
	}
	nfd := string(read(s.nfd))
	if !strings.HasPrefix(nfd, "# +expiry-time=") || !strings.HasSuffix(nfd, "\n") || !strings.Contains(nfd, "gpuaffinity.io/healthy=true\n") {
		t.Errorf("%s: torn NFD file:\n%s", kind, nfd)
	}
}

// metricsCount scrapes /metrics (until one is not refused) and returns
// promhttp_metric_handler_requests_total by code.
func (s *storm) metricsCount() map[string]float64 {
	s.t.Helper()
	var out map[string]float64
	waitFor(s.t, "a /metrics scrape not refused", func() bool {
		resp, err := http.Get(s.p.url + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			io.Copy(io.Discard, resp.Body)
			return false
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			s.t.Fatalf("/metrics: %v", err)
		}
		out = map[string]float64{}
		for _, m := range mfs["promhttp_metric_handler_requests_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		return true
	})
	return out
}

// alive reports whether the agent runs (a zombie, killed and not yet
// waited for, does not).
func (s *storm) alive() bool {
	if s.p.cmd.ProcessState != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.p.cmd.Process.Pid))
	i := bytes.LastIndexByte(b, ')') // the state follows the command's name
	return err == nil && i > 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

// waitFor polls cond until it holds, for 60 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// memCgroup is a memory cgroup made for one test under this process's
// own (cgroup v2 where its memory controller is there, else v1).
type memCgroup struct {
	dir string
	v2  bool
}

func (c *memCgroup) version() string {
	if c.v2 {
		return "cgroup v2, memory.max"
	}
	return "cgroup v1, memory.limit_in_bytes"
}

// newMemCgroup makes the cgroup with its limit; t.Cleanup removes it.
func newMemCgroup(t *testing.T, limit int64) (*memCgroup, error) {
	name := fmt.Sprintf("gpuaffinity-test-%d", os.Getpid())
	var errs []error
	for _, v2 := range []bool{true, false} {
		parent, err := ownCgroup(v2)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c := &memCgroup{dir: filepath.Join(parent, name), v2: v2}
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		limitFile := "memory.limit_in_bytes"
		if v2 {
			limitFile = "memory.max"
			if _, err := os.Stat(filepath.Join(c.dir, limitFile)); err != nil {
				// The controller is not enabled for children: try.
				os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0)
			}
		}
		if err := os.WriteFile(filepath.Join(c.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
			os.Remove(c.dir)
			errs = append(errs, fmt.Errorf("%s: %w", c.version(), err))
			continue
		}
		if !v2 {
			// Count the sockets' buffers (cgroup v2 counts them in
			// memory.current; v1 apart, once a limit turns it on).
			os.WriteFile(filepath.Join(c.dir, "memory.kmem.tcp.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0)
		}
		t.Cleanup(func() { c.remove(t) })
		return c, nil
	}
	return nil, errors.Join(errs...)
}

// ownCgroup is this process's cgroup directory in the v2 hierarchy, or in
// v1's memory hierarchy, from /proc/self/mountinfo and /proc/self/cgroup.
func ownCgroup(v2 bool) (string, error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	cgroups, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var own string
	for line := range strings.SplitSeq(string(cgroups), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && ((v2 && f[0] == "0" && f[1] == "") || (!v2 && hasItem(f[1], "memory"))) {
			own = f[2]
		}
	}
	if own == "" {
		return "", fmt.Errorf("/proc/self/cgroup: no %s", map[bool]string{true: "cgroup v2", false: "v1 memory cgroup"}[v2])
	}
	for line := range strings.SplitSeq(string(mounts), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		if (v2 && g[0] == "cgroup2") || (!v2 && g[0] == "cgroup" && hasItem(g[2], "memory")) {
			rel, ok := strings.CutPrefix(own, f[3])
			if !ok {
				continue
			}
			dir := filepath.Join(f[4], rel)
			if v2 {
				b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
				if err != nil || !hasItem(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", ","), "memory") {
					return "", fmt.Errorf("cgroup v2 at %s: no memory controller (%q)", dir, strings.TrimSpace(string(b)))
				}
			}
			return dir, nil
		}
	}
	return "", fmt.Errorf("no mounted %s hierarchy holds %s", map[bool]string{true: "cgroup v2", false: "v1 memory"}[v2], own)
}

func hasItem(list, item string) bool {
	for it := range strings.SplitSeq(list, ",") {
		if it == item {
			return true
		}
	}
	return false
}

func (c *memCgroup) read(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name))
	return strings.TrimSpace(string(b))
}

func (c *memCgroup) number(name string) int64 {
	n, _ := strconv.ParseInt(c.read(name), 10, 64)
	return n
}

// holds reports whether pid is in the cgroup.
func (c *memCgroup) holds(pid int) bool {
	return hasItem(strings.ReplaceAll(c.read("cgroup.procs"), "\n", ","), strconv.Itoa(pid))
}

func (c *memCgroup) usage() int64 {
	if c.v2 {
		return c.number("memory.current")
	}
	return c.number("memory.usage_in_bytes")
}

// peak is the most the cgroup has used since resetPeak (v1; v2: since it
// was made, where the kernel has memory.peak).
func (c *memCgroup) peak() int64 {
	if c.v2 {
		return c.number("memory.peak")
	}
	return c.number("memory.max_usage_in_bytes")
}

func (c *memCgroup) resetPeak() {
	if !c.v2 {
		os.WriteFile(filepath.Join(c.dir, "memory.max_usage_in_bytes"), []byte("0"), 0)
		os.WriteFile(filepath.Join(c.dir, "memory.kmem.tcp.max_usage_in_bytes"), []byte("0"), 0)
	}
}

// extra says what the peak leaves out or includes.
func (c *memCgroup) extra() string {
	if c.v2 {
		return "sockets' buffers included; the most since the agent started"
	}
	return fmt.Sprintf("kernel memory included; sockets' buffers apart, peak %d KiB", c.number("memory.kmem.tcp.max_usage_in_bytes")>>10)
}

// oomKills is the cgroup's count of OOM kills.
func (c *memCgroup) oomKills() int64 {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	for line := range strings.SplitSeq(c.read(file), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// remove removes the cgroup once the last process has left it (the
// kernel may report it populated for a moment after the agent is reaped).
func (c *memCgroup) remove(t *testing.T) {
	waitFor(t, "removing "+c.dir, func() bool {
		err := os.Remove(c.dir)
		return err == nil || errors.Is(err, os.ErrNotExist)
	})
}
