package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// genVersion names the generator's output: change it whenever the
// series it writes change, so that no cached TSDB of an older generator
// is used.
const genVersion = "g1"

// dataset is one fleet's TSDB in the cache, and how it was made.
type dataset struct {
	Dir         string        `json:"-"` // the cache entry: data/ and meta.json
	N           int           `json:"n"`
	Seed        uint64        `json:"seed"`
	Interval    time.Duration `json:"interval"`
	Window      time.Duration `json:"window"`
	Composition string        `json:"composition"`
	Gapped      int           `json:"gapped"`
	Series      int           `json:"series"`
	Samples     int           `json:"samples"`
	TextBytes   int64         `json:"text_bytes"`
	TSDBBytes   int64         `json:"tsdb_bytes"`
	Generate    time.Duration `json:"generate"` // writing the OpenMetrics text
	Promtool    time.Duration `json:"promtool"` // promtool tsdb create-blocks-from openmetrics
	// PromtoolRSSKB is promtool's peak RSS in KiB.
	PromtoolRSSKB int64  `json:"promtool_rss_kb"`
	Cached        bool   `json:"-"` // found in the cache, not built by this run
	load          string // the 1-minute load average when it was measured
}

// cacheKey names a dataset's cache entry: <generator-version>-<N>, with
// the seed and sampling where they are not the defaults.
func cacheKey(n int, seed uint64, s sampling) string {
	key := genVersion
	if seed != defaultSeed || s != defaultSampling {
		key += fmt.Sprintf("-seed%d-%s-%s", seed, s.interval, s.window)
	}
	return fmt.Sprintf("%s-%d", key, n)
}

// loadOrBuild returns the dataset of n nodes from the cache under root,
// building it first when it is not there: the OpenMetrics text and
// promtool's blocks go to a temporary directory beside the entry, which
// is renamed into place when complete (the text is removed).
func loadOrBuild(ctx context.Context, root, promtool string, n int, seed uint64, s sampling) (*dataset, error) {
	dir := filepath.Join(root, cacheKey(n, seed, s))
	if data, err := os.ReadFile(filepath.Join(dir, "meta.json")); err == nil {
		d := &dataset{}
		if err := json.Unmarshal(data, d); err != nil {
			return nil, fmt.Errorf("cache %s: meta.json: %w (remove the directory)", dir, err)
		}
		d.Dir, d.Cached = dir, true
		return d, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".build-"+filepath.Base(dir)+"-")
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	defer os.RemoveAll(tmp) // nothing left there once renamed

	d := &dataset{N: n, Seed: seed, Interval: s.interval, Window: s.window}
	start := time.Now()
	nodes, c := generate(n, seed)
	d.Composition, d.Gapped = c.String(), c.gapped
	text := filepath.Join(tmp, "fleet.om")
	f, err := os.Create(text)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	d.Series, d.Samples, err = writeOpenMetrics(f, nodes, s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", text, err)
	}
	d.Generate = time.Since(start)
	if fi, err := os.Stat(text); err == nil {
		d.TextBytes = fi.Size()
	}

	start = time.Now()
	data := filepath.Join(tmp, "data")
	cmd := exec.CommandContext(ctx, promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", text, data)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s tsdb create-blocks-from openmetrics %s: %w\n%s", promtool, text, err, tail(out, 2000))
	}
	d.Promtool = time.Since(start)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		d.PromtoolRSSKB = ru.Maxrss
	}
	if err := os.Remove(text); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if d.TSDBBytes, err = du(data); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	meta, _ := json.MarshalIndent(d, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), append(meta, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	d.Dir = dir
	return d, nil
}

// du is the size of the regular files under dir.
func du(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		fi, err := e.Info()
		if err == nil {
			size += fi.Size()
		}
		return err
	})
	return size, err
}

// linkTree makes dst a copy of src's tree whose files are hard links to
// src's (copies where the file system refuses links): a writable storage
// directory for Prometheus that leaves the cache entry as it is.
// Prometheus never writes into a block's files; it adds its lock, WAL
// and head chunks beside them.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if err := os.Link(p, target); err == nil {
			return nil
		}
		return copyFile(p, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// tail is the end of out, at most n bytes, trimmed.
func tail(out []byte, n int) string {
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.TrimSpace(string(out))
}
