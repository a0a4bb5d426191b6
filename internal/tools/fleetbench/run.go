package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// subcommands are the fleet subcommands measured, with their extra
// arguments, and the exit statuses that mean success: report exits 1
// when it finds drift, which the synthetic fleet has.
var subcommands = []struct {
	name string
	args []string
	ok   []int
}{
	{"report", nil, []int{0, 1}},
	{"slurm-tree", nil, []int{0}},
	{"slurm-block", nil, []int{0}},
	{"slurm-yaml", nil, []int{0}},
	{"labels", []string{"-o", "json"}, []int{0}},
}

// handQueries are the fleet reader's queries, one per family, for when
// the binary cannot log its own (no --log-queries).
func handQueries() []string {
	var qs []string
	for _, f := range families {
		qs = append(qs, f.name+"{}")
	}
	return qs
}

// queryPrefix starts the line --log-queries writes per query on stderr.
const queryPrefix = "gpuaffinity fleet: query "

// queryLog is one such line's JSON.
type queryLog struct {
	Query   string  `json:"query"`
	Time    string  `json:"time"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`
	Series  int     `json:"series"`
	Status  int     `json:"status"`
}

// result is one subcommand's run at one N, or, with run false, only
// Prometheus's time for the hand-written queries.
type result struct {
	n       int
	sub     string
	run     bool
	wall    time.Duration
	rssKB   int64 // the child's peak RSS (rusage ru_maxrss)
	queries int
	bytes   int64         // response bodies of the replayed queries
	prom    time.Duration // sum over the queries of the median replay time
	err     error
}

// buildBinary builds the full gpuaffinity (gpuaffinity-fleet, which has
// the fleet command in process) of the module in the working directory
// into dir.
func buildBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "gpuaffinity-fleet")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gpuaffinity")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gpuaffinity: %w\n%s", err, tail(out, 2000))
	}
	return bin, nil
}

// missingFlags lists the flags the measurement needs that bin's fleet
// command lacks.
func missingFlags(bin string) ([]string, error) {
	out, err := exec.Command(bin, "fleet", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s fleet --help: %w\n%s", bin, err, tail(out, 1000))
	}
	var missing []string
	for _, f := range []string{"--time", "--log-queries"} {
		if !bytes.Contains(out, []byte(f+" ")) {
			missing = append(missing, f)
		}
	}
	return missing, nil
}

// childEnv is the environment of the fleet CronJob's container as far as
// the Go runtime is concerned: GOMEMLIMIT as given, no GOGC; and no
// GPUAFFINITY_* variable (the flags say which server to ask).
func childEnv(gomemlimit string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") || strings.HasPrefix(kv, "GPUAFFINITY_")
	})
	if gomemlimit != "" {
		env = append(env, "GOMEMLIMIT="+gomemlimit)
	}
	return env
}

// runSub runs one subcommand against s, through the shim (measure.go),
// and returns its wall time, peak RSS and the queries it logged.
func runSub(ctx context.Context, bin, dir string, env []string, s *server, sub string, args []string, ok []int) (result, []queryLog, error) {
	r := result{sub: strings.Join(append([]string{sub}, args...), " "), run: true}
	argv := append([]string{"fleet", sub, "--prometheus", s.url, "--time", evalTime.Format(time.RFC3339),
		"--log-queries", "--timeout", "600s"}, args...)
	ctx, cancel := context.WithTimeout(ctx, 11*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		return r, nil, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{bin}, argv...)...)
	measurement := filepath.Join(dir, "measurement")
	os.Remove(measurement)
	cmd.Env = slices.Concat(env, []string{measureEnv + "=" + measurement})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := os.Create(filepath.Join(dir, sub+".out"))
	if err != nil {
		return r, nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	r.wall, r.rssKB, err = measured(cmd, measurement)
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || !slices.Contains(ok, exit.ExitCode())) {
		return r, nil, fmt.Errorf("gpuaffinity %s: %w\n%s", strings.Join(argv, " "), err, tail(stderr.Bytes(), 1500))
	}
	var logs []queryLog
	for _, line := range strings.Split(stderr.String(), "\n") {
		js, found := strings.CutPrefix(line, queryPrefix)
		if !found {
			continue
		}
		var q queryLog
		if err := json.Unmarshal([]byte(js), &q); err != nil {
			return r, nil, fmt.Errorf("gpuaffinity fleet %s: query log %q: %w", sub, line, err)
		}
		logs = append(logs, q)
	}
	if len(logs) == 0 {
		return r, nil, fmt.Errorf("gpuaffinity fleet %s: no query logged on stderr (%q lines)\n%s", sub, queryPrefix, tail(stderr.Bytes(), 1500))
	}
	return r, logs, nil
}

// replay sends each query to s rounds times and adds up the medians; it
// also adds up the response sizes.
func replay(ctx context.Context, s *server, logs []queryLog, rounds int) (total time.Duration, size int64, err error) {
	for _, q := range logs {
		took := make([]time.Duration, rounds)
		for i := range took {
			n, t, err := s.query(ctx, q.Query, q.Time, io.Discard)
			if err != nil {
				return 0, 0, err
			}
			took[i] = t
			if i == 0 {
				size += n
			}
		}
		slices.Sort(took)
		total += took[rounds/2]
	}
	return total, size, nil
}
