package rdma

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// Counter directories of a port (sysfs-class-infiniband ABI text).
const (
	DirCounters    = "counters"     // IBTA PortCounters, kernel 2.6.12+
	DirCountersExt = "counters_ext" // 64-bit PortCountersExtended before kernel 4.5
	DirHwCounters  = "hw_counters"  // driver counters (mlx5, bnxt_re, efa, ...), kernel 4.6+
)

// CounterReader reads every RDMA port's state and counters under a root at
// scrape time, from <root>/sys/class/infiniband/<dev>/ports/<n>/: state,
// phys_state, rate, link_layer and the files of counters/, counters_ext/
// and hw_counters/.
//
// It is long-lived: a counter file that answers EINVAL (ConnectX-7 ports
// in switch mode on VL15_dropped, the Fabric-Manager "limited PFs" of
// DGX/HGX B200, where every read also logs an mlx5_cmd_out_err line in the
// kernel log) is remembered and never read again, so a scrape does not
// flood the kernel log. A CounterReader is safe for concurrent use.
type CounterReader struct {
	// Root is the filesystem root ("/" live).
	Root string
	// FS, where set, is the root already open to read under (a caller
	// that reads other files under the same root, package audit); Root
	// is then unused, and the reader never closes it.
	FS *rootfs.Root
	// ReadFile reads one attribute file, named in full; nil means the
	// root reader's bounded single read (open, read, close, inside the
	// root; rootfs.Root.ReadFile). Tests set it to
	// answer syscall.EINVAL in an *fs.PathError (as os.ReadFile reports
	// the kernel's read(2) answer) for chosen paths: a tmpfs or disk file
	// cannot produce EINVAL on read.
	ReadFile func(name string) ([]byte, error)
	// Counters, CountersExt and HwCounters name the files to read in each
	// directory; nil reads every regular file there.
	Counters, CountersExt, HwCounters []string

	mu       sync.Mutex
	disabled map[string]struct{} // paths that answered EINVAL

	fsOnce sync.Once
	fs     *rootfs.Root
	fsErr  error
}

// PortSample is one port as read at one scrape. Counter values are as the
// file holds them: port_rcv_data, port_xmit_data and the *_data_64 files
// count 4-byte words.
type PortSample struct {
	Device      string
	Port        int
	State       string  // state text, "ACTIVE"
	StateID     int     // state number, 4
	PhysState   string  // phys_state text, "LinkUp"
	PhysStateID int     // phys_state number, 5
	RateGbps    float64 // rate, "400 Gb/sec (4X NDR)" -> 400
	LinkLayer   string  // link_layer; "" when the file is missing
	// Counters, CountersExt and HwCounters map a file name of counters/,
	// counters_ext/ and hw_counters/ to its value. A file that is missing,
	// unreadable for permission or support, answers "N/A (no PMA)" (iWARP
	// ports without a performance management agent) or EINVAL is absent.
	Counters    map[string]uint64
	CountersExt map[string]uint64
	HwCounters  map[string]uint64
	// Disabled counts this port's counter files the reader no longer
	// reads because they answered EINVAL.
	Disabled int
}

// Read reads every port of every RDMA device, in device name and port
// order. A root without class/infiniband has none: no error.
//
// A device or port that vanishes between the listing and its reading (a
// NIC removed, a driver reloaded) is left out without an error: its
// absence is the answer. A port whose state, phys_state or rate is
// unreadable or malformed is left out with an error; a counter file that
// is unreadable (other than as described at PortSample) or does not hold
// a number is left out with an error. Errors name the file; Read returns
// the ports it could read together with the errors (joined). It stops at
// ctx's end and returns what it has and ctx's error.
func (r *CounterReader) Read(ctx context.Context) ([]PortSample, error) {
	root, err := r.rootFS()
	if err != nil {
		return nil, err
	}
	entries, err := root.ReadDir(classDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	type job struct {
		dev, dir string
		port     int
	}
	var (
		jobs []job
		errs []error
	)
	for _, e := range entries {
		portsDir := path.Join(classDir, e.Name(), "ports")
		ports, err := root.ReadDir(portsDir)
		if err != nil {
			if !gone(err) {
				errs = append(errs, fmt.Errorf("RDMA device %s: list ports: %w", e.Name(), err))
			}
			continue
		}
		nums := make([]int, 0, len(ports))
		for _, p := range ports {
			n, err := strconv.Atoi(p.Name())
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s: not a port number", root.Path(path.Join(portsDir, p.Name()))))
				continue
			}
			nums = append(nums, n)
		}
		slices.Sort(nums)
		for _, n := range nums {
			jobs = append(jobs, job{e.Name(), path.Join(portsDir, strconv.Itoa(n)), n})
		}
	}
	// Ports are read on a few goroutines: a scrape is dominated by the
	// open/read/close of a few hundred small files, which overlap well.
	type result struct {
		s    PortSample
		ok   bool
		errs []error
	}
	results := make([]result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(jobs), readWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				s, ok, perrs := r.readPort(root, j.dev, j.dir, j.port)
				results[i] = result{s, ok, perrs}
			}
		}()
	}
	var cancelled error
	for i := range jobs {
		if cancelled = ctx.Err(); cancelled != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var out []PortSample
	for _, res := range results {
		errs = append(errs, res.errs...)
		if res.ok {
			out = append(out, res.s)
		}
	}
	if cancelled != nil {
		errs = append(errs, cancelled)
	}
	return out, errors.Join(errs...)
}

// readWorkers is how many ports Read reads at once.
const readWorkers = 4

// DisabledFiles returns the counter files that answered EINVAL, sorted.
func (r *CounterReader) DisabledFiles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.disabled))
	for p := range r.disabled {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// classDir is the RDMA class directory under the root.
const classDir = "sys/class/infiniband"

// rootFS opens the root once; the reader keeps it for its life.
func (r *CounterReader) rootFS() (*rootfs.Root, error) {
	r.fsOnce.Do(func() {
		if r.FS != nil {
			r.fs = r.FS
			return
		}
		r.fs, r.fsErr = rootfs.Open(r.Root)
	})
	return r.fs, r.fsErr
}

// readFile reads the attribute rel under root: one bounded read that
// never blocks and never leaves the root (rootfs.Root.ReadFile), or the
// test's ReadFile, given the full name.
func (r *CounterReader) readFile(d *rootfs.Dir, name string) ([]byte, error) {
	if r.ReadFile != nil {
		return r.ReadFile(d.Path(name))
	}
	return d.ReadFile(name, sysattr.MaxSize)
}

// gone reports whether err says the file or its directory went away.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

// readPort reads one port; ok is false when the port vanished or its
// state could not be read.
func (r *CounterReader) readPort(root *rootfs.Root, dev, dir string, n int) (s PortSample, ok bool, errs []error) {
	s = PortSample{Device: dev, Port: n}
	// The port's directory is resolved once; its files are read by name.
	d, err := root.OpenDir(dir)
	if err != nil {
		if !gone(err) {
			errs = append(errs, fmt.Errorf("RDMA device %s port %d: %w", dev, n, err))
		}
		return s, false, errs
	}
	defer d.Close()
	attr := func(name string) (string, bool) {
		b, err := r.readFile(d, name)
		if err != nil {
			if !gone(err) {
				errs = append(errs, fmt.Errorf("RDMA device %s port %d: %w", dev, n, err))
			}
			return "", false
		}
		return strings.TrimSpace(string(b)), true
	}
	malformed := func(name string, err error) {
		errs = append(errs, fmt.Errorf("%s: %w", d.Path(name), err))
	}
	st, ok1 := attr("state")
	ph, ok2 := attr("phys_state")
	rate, ok3 := attr("rate")
	if !ok1 || !ok2 || !ok3 {
		return s, false, errs
	}
	if s.StateID, s.State, err = ParseState(st); err != nil {
		malformed("state", err)
		return s, false, errs
	}
	if s.PhysStateID, s.PhysState, err = ParseState(ph); err != nil {
		malformed("phys_state", err)
		return s, false, errs
	}
	if s.RateGbps, err = ParseRate(rate); err != nil {
		malformed("rate", err)
		return s, false, errs
	}
	if ll, err := r.readFile(d, "link_layer"); err == nil {
		s.LinkLayer = strings.TrimSpace(string(ll))
	}
	s.Counters = r.readCounters(root, &s, path.Join(dir, DirCounters), r.Counters, &errs)
	s.CountersExt = r.readCounters(root, &s, path.Join(dir, DirCountersExt), r.CountersExt, &errs)
	s.HwCounters = r.readCounters(root, &s, path.Join(dir, DirHwCounters), r.HwCounters, &errs)
	return s, true, errs
}

// readCounters reads the wanted files of one counter directory; nil when
// the directory is missing.
func (r *CounterReader) readCounters(root *rootfs.Root, s *PortSample, dir string, want []string, errs *[]error) map[string]uint64 {
	d, err := root.OpenDir(dir)
	if err != nil {
		if !gone(err) {
			*errs = append(*errs, fmt.Errorf("RDMA device %s port %d: %w", s.Device, s.Port, err))
		}
		return nil
	}
	defer d.Close()
	// The files to read: those named (a missing one is absent), in name
	// order, without listing the directory; else every regular file.
	names := want
	if want == nil {
		entries, err := d.ReadDir()
		if err != nil {
			if !gone(err) {
				*errs = append(*errs, fmt.Errorf("RDMA device %s port %d: %w", s.Device, s.Port, err))
			}
			return nil
		}
		names = make([]string, 0, len(entries))
		for _, e := range entries {
			if e.Type().IsRegular() {
				names = append(names, e.Name())
			}
		}
	} else if !slices.IsSorted(want) {
		names = slices.Sorted(slices.Values(want))
	}
	out := make(map[string]uint64, len(names))
	for _, name := range names {
		v, o, err := r.readCounter(d, name)
		switch o {
		case counterOK:
			out[name] = v
		case counterDisabled:
			s.Disabled++
		case counterBad:
			*errs = append(*errs, err)
		}
	}
	return out
}

// PortCounters reads the named counters of one port, the files
// <root>/sys/class/infiniband/<dev>/ports/<port>/counters/<name>, with the
// reader's bounded reads (ReadFile). As in Read, a file that answers
// EINVAL is remembered and never read again, and a counter whose file is
// missing (EFA and some RoCE drivers keep only hw_counters), unreadable
// for permission or support, answers "N/A" or was disabled is left out of
// the map. A file that does not hold a number, or fails otherwise, is an
// error naming it; the counters read are returned with it. When no
// counter could be read and nothing failed, the error wraps
// fs.ErrNotExist.
//
// It is the check-time read of the same reader the exporter scrapes with,
// so both share one memory of EINVAL files.
func (r *CounterReader) PortCounters(dev string, port int, names []string) (map[string]uint64, error) {
	root, err := r.rootFS()
	if err != nil {
		return nil, err
	}
	dir := path.Join(classDir, dev, "ports", strconv.Itoa(port), DirCounters)
	if dev == "" || dev == "." || dev == ".." || strings.ContainsRune(dev, '/') {
		return nil, fmt.Errorf("%s: %q is not an RDMA device name", root.Path(classDir), dev)
	}
	d, err := root.OpenDir(dir)
	if err != nil {
		if gone(err) {
			return nil, fmt.Errorf("%s: no counters: %w", root.Path(dir), fs.ErrNotExist)
		}
		return nil, err
	}
	defer d.Close()
	out := make(map[string]uint64, len(names))
	var errs []error
	for _, name := range names {
		if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
			errs = append(errs, fmt.Errorf("%s: %q is not a counter file name", root.Path(dir), name))
			continue
		}
		v, o, err := r.readCounter(d, name)
		switch o {
		case counterOK:
			out[name] = v
		case counterBad:
			errs = append(errs, err)
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("%s: no counters: %w", root.Path(dir), fs.ErrNotExist)
	}
	return out, errors.Join(errs...)
}

// counterOutcome is what reading one counter file gave.
type counterOutcome int

const (
	counterOK       counterOutcome = iota
	counterAbsent                  // missing, no permission, not supported, "N/A (no PMA)"
	counterDisabled                // answered EINVAL, now or before
	counterBad                     // unreadable otherwise, or not a number: the error says
)

// readCounter reads one counter file; the error is set for counterBad
// and names the file.
func (r *CounterReader) readCounter(d *rootfs.Dir, file string) (uint64, counterOutcome, error) {
	name := d.Path(file)
	if r.isDisabled(name) {
		return 0, counterDisabled, nil
	}
	b, err := r.readFile(d, file)
	switch {
	case err == nil:
	case errors.Is(err, syscall.EINVAL):
		r.disable(name)
		return 0, counterDisabled, nil
	case gone(err), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EOPNOTSUPP):
		return 0, counterAbsent, nil
	default:
		return 0, counterBad, err // an *fs.PathError names the file
	}
	text := strings.TrimSpace(string(b))
	if strings.HasPrefix(text, "N/A") { // "N/A (no PMA)"
		return 0, counterAbsent, nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, counterBad, fmt.Errorf("%s: malformed counter %q", name, text)
	}
	return v, counterOK, nil
}

func (r *CounterReader) isDisabled(path string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.disabled[path]
	return ok
}

func (r *CounterReader) disable(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.disabled == nil {
		r.disabled = map[string]struct{}{}
	}
	r.disabled[path] = struct{}{}
}
