package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func decodeCuFile(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("cufile output is not JSON: %v\n%s", err, s)
	}
	return m
}

func jsonAt(v any, keys ...string) any {
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

func jsonStrings(v any) string {
	a, _ := v.([]any)
	var out []string
	for _, e := range a {
		s, _ := e.(string)
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// The DGX H100 demo mounts no network file system and runs CUDA 12.4 on
// kernel 5.15 (no P2PDMA): NVIDIA's defaults, P2PDMA and dynamic routing
// off, no client address list. -f writes the same bytes stdout gets.
func TestCuFileDGX(t *testing.T) {
	out, stderr, err := runErr(t, "cufile", "--demo", "dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	m := decodeCuFile(t, out)
	for _, k := range [][]string{{"properties", "use_pci_p2pdma"}, {"block", "nvme", "use_pci_p2pdma"}, {"properties", "rdma_dynamic_routing"}} {
		if v := jsonAt(m, k...); v != false {
			t.Errorf("%s = %v, want false", strings.Join(k, "."), v)
		}
	}
	for _, fs := range []string{"beegfs", "lustre", "nfs", "gpfs", "weka"} {
		if jsonAt(m, "fs", fs, "rdma_dev_addr_list") != nil || jsonAt(m, "fs", fs, "mount_table") != nil {
			t.Errorf("fs.%s has addresses on a node without network mounts: %v", fs, jsonAt(m, "fs", fs))
		}
	}
	if v := jsonAt(m, "logging", "level"); v != "ERROR" {
		t.Errorf("logging.level = %v, want NVIDIA's ERROR", v)
	}
	if strings.Contains(stderr, "cufile") || strings.Contains(stderr, "IPv4") {
		t.Errorf("warnings on a node without network mounts: %s", stderr)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "cufile.json")
	if _, _, err := runErr(t, "cufile", "--demo", "dgx-h100", "-f", file); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != out {
		t.Errorf("-f wrote %d bytes (%v), stdout %d", len(b), err, len(out))
	}
	if dash := mustRun(t, "cufile", "--demo", "dgx-h100", "-f", "-"); dash != out {
		t.Error("-f - differs from stdout")
	}
}

// DGX H100 set up for GDS (dgx-h100-gds.yaml): NFS over RDMA at
// /mnt/datasets through mlx5_2 (enp41s0f1np1, 10.100.1.21) and at
// /mnt/checkpoints through mlx5_8 (enp170s0f1np1, 10.100.2.21): two
// different ports, so a mount table; Lustre through mlx5_1 (ibp41s0f0,
// 10.200.1.21) and mlx5_7 (ibp170s0f0, 10.200.2.21): one mount, so the
// per-fs list. Every GPU's storage NICs are across host bridges (NODE):
// dynamic routing on. CUDA 12.4: no P2PDMA.
func TestCuFileGDSDemo(t *testing.T) {
	out, stderr, err := runErr(t, "cufile", "--demo", "dgx-h100-gds")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	m := decodeCuFile(t, out)
	if got := jsonStrings(jsonAt(m, "fs", "lustre", "rdma_dev_addr_list")); got != "10.200.1.21,10.200.2.21" {
		t.Errorf("fs.lustre.rdma_dev_addr_list = %q", got)
	}
	if jsonAt(m, "fs", "lustre", "mount_table") != nil || jsonAt(m, "fs", "nfs", "rdma_dev_addr_list") != nil {
		t.Errorf("a per-fs list beside a mount table: %v", jsonAt(m, "fs"))
	}
	if got := jsonStrings(jsonAt(m, "fs", "nfs", "mount_table", "/mnt/datasets", "rdma_dev_addr_list")); got != "10.100.1.21" {
		t.Errorf("/mnt/datasets = %q", got)
	}
	if got := jsonStrings(jsonAt(m, "fs", "nfs", "mount_table", "/mnt/checkpoints", "rdma_dev_addr_list")); got != "10.100.2.21" {
		t.Errorf("/mnt/checkpoints = %q", got)
	}
	if jsonAt(m, "properties", "rdma_dynamic_routing") != true || jsonAt(m, "properties", "use_pci_p2pdma") != false {
		t.Errorf("properties = %v", jsonAt(m, "properties"))
	}
	if jsonAt(m, "fs", "weka", "rdma_dev_addr_list") != nil || jsonAt(m, "fs", "gpfs", "mount_table") != nil {
		t.Errorf("unmounted file systems got addresses: %v", jsonAt(m, "fs"))
	}
}

// --merge keeps the site's settings as written and may name the output
// file itself (in place).
func TestCuFileMerge(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "cufile.json")
	src := `{
  // site settings
  "logging": {"dir": "/var/log/cufile", "level": "INFO"},
  "execution": {"max_io_queue_depth": 1e3, /* tuned */ "parallel_io": true},
  "properties": {"use_pci_p2pdma": true, "allow_compat_mode": false, "rdma_dynamic_routing": true},
  "x_vendor": {"b": 2.50, "a": null}
}
`
	if err := os.WriteFile(site, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runErr(t, "cufile", "--demo", "dgx-h100", "--merge", site, "-f", site); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	b, err := os.ReadFile(site)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "logging": {
    "dir": "/var/log/cufile",
    "level": "INFO"
  },
  "execution": {
    "max_io_queue_depth": 1e3,
    "parallel_io": true
  },
  "properties": {
    "use_pci_p2pdma": false,
    "allow_compat_mode": false,
    "rdma_dynamic_routing": false
  },
  "x_vendor": {
    "b": 2.50,
    "a": null
  },
  "block": {
    "nvme": {
      "use_pci_p2pdma": false
    }
  }
}
`
	if string(b) != want {
		t.Errorf("merged:\n%s\nwant:\n%s", b, want)
	}
}

// --merge F -f F on a site file that writes an object gpuaffinity writes
// into twice fails naming the file, the key and both lines, and leaves F
// as it was (no temporary file either): the two shapes, a second
// "properties" (use_pci_p2pdma true where gpuaffinity sets false) and a
// second fs.nfs (the old NIC's address). A duplicate gpuaffinity does not
// write under is kept, with a warning.
func TestCuFileMergeDuplicate(t *testing.T) {
	for _, tc := range []struct{ demo, src, want string }{
		{"dgx-h100", `{
  "properties": {"use_pci_p2pdma": false},
  "logging": {"level": "INFO"},
  "properties": {"use_pci_p2pdma": true}
}
`, `:4:3: duplicate key "properties" (first at line 2)`},
		{"dgx-h100-gds", `{
  "fs": {
    "nfs": {"rdma_dev_addr_list": ["10.100.1.21"]},
    // the NIC before the move
    "nfs": {"rdma_dev_addr_list": ["10.99.0.1"]}
  }
}
`, `:5:5: duplicate key "fs.nfs" (first at line 3)`},
	} {
		dir := t.TempDir()
		site := filepath.Join(dir, "cufile.json")
		if err := os.WriteFile(site, []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := runErr(t, "cufile", "--demo", tc.demo, "--merge", site, "-f", site)
		if want := "--merge: " + site + tc.want + ": gpuaffinity writes under it"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v\nwant one with %q", tc.demo, err, want)
		}
		if b, err := os.ReadFile(site); err != nil || string(b) != tc.src {
			t.Errorf("%s: the site file changed (%v):\n%s", tc.demo, err, b)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("%s: %d files in the directory, want the site file alone", tc.demo, len(ents))
		}
	}
	dir := t.TempDir()
	site := filepath.Join(dir, "cufile.json")
	src := "{\n  \"logging\": {\"level\": \"INFO\"},\n  \"logging\": {\"level\": \"ERROR\"}\n}\n"
	if err := os.WriteFile(site, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runErr(t, "cufile", "--demo", "dgx-h100", "--merge", site)
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(out, "\"logging\""); c != 2 {
		t.Errorf("logging %d times, want the site's 2:\n%s", c, out)
	}
	if want := "gpuaffinity: warning: " + site + `:3:3: "logging" written twice (first at line 2): left as written`; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// --merge refuses what is not a cufile.json, quickly and by name: a FIFO
// (never opened for a blocking read), a device, a huge file, garbage, a
// missing file.
func TestCuFileMergeHostile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, []byte(`{"a": "`+strings.Repeat("x", 2<<20)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("\x7fELF\x02\x01"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{huge, "more than 1048576 bytes"},
		{garbage, garbage + ":1:1: not JSON: want an object"},
		{filepath.Join(dir, "missing.json"), "no such file"},
	} {
		out := filepath.Join(dir, "out.json")
		done := make(chan error, 1)
		go func() {
			_, _, err := runErr(t, "cufile", "--demo", "dgx-h100", "--merge", tc.file, "-f", out)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--merge") {
				t.Errorf("--merge %s: %v; want an error with %q", tc.file, err, tc.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("--merge %s does not return", tc.file)
		}
		if _, err := os.Lstat(out); err == nil {
			t.Errorf("--merge %s: wrote %s anyway", tc.file, out)
		}
	}
}

// env --write-cufile DIR writes DIR/cufile.json (what cufile prints) and
// exports CUFILE_ENV_PATH_JSON, quoted; without it env prints no such
// variable.
func TestEnvWriteCuFile(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	dir := filepath.Join(t.TempDir(), "it's here")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := mustRun(t, "env", "--demo", "dgx-h100", "--local-rank", "0")
	if strings.Contains(plain, "CUFILE") {
		t.Errorf("env without --write-cufile sets cuFile's variable:\n%s", plain)
	}
	out := mustRun(t, "env", "--demo", "dgx-h100", "--local-rank", "0", "--write-cufile", dir)
	path := filepath.Join(dir, "cufile.json")
	line := `export CUFILE_ENV_PATH_JSON='` + strings.ReplaceAll(path, `'`, `'\''`) + `'` + "\n"
	if !strings.Contains(out, line) {
		t.Errorf("env --write-cufile lacks %q:\n%s", line, out)
	}
	// The one added line, after the node-level NCCL variables and before
	// the rank's.
	if strings.Replace(out, line, "", 1) != plain {
		t.Errorf("env --write-cufile changed more than the one line:\n%s\nwithout:\n%s", out, plain)
	}
	if !strings.Contains(out, line+"export GPUAFFINITY_GPU=") {
		t.Errorf("CUFILE_ENV_PATH_JSON not right before the rank's variables:\n%s", out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustRun(t, "cufile", "--demo", "dgx-h100"); string(b) != want {
		t.Errorf("DIR/cufile.json differs from gpuaffinity cufile")
	}
	if _, _, err := runErr(t, "env", "--demo", "dgx-h100", "--write-cufile", filepath.Join(dir, "absent")); err == nil ||
		!strings.Contains(err.Error(), "--write-cufile") {
		t.Errorf("--write-cufile into a missing directory: %v", err)
	}
}
