package cufile

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// edit applies old->new replacements to NVIDIA's default file, failing
// when one does not apply (so the test cannot silently test less).
func edit(t *testing.T, pairs ...string) []byte {
	t.Helper()
	src, err := os.ReadFile("testdata/cufile.default.json")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("reference lacks %q", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return []byte(s)
}

// A site's file, comments and all: every setting gpuaffinity does not own
// comes back with the bytes it was written with.
func TestMergeKeepsForeignBytes(t *testing.T) {
	src := edit(t,
		`"level": "ERROR"`, `"level": "INFO"`,
		`"max_io_queue_depth": 128,`, `"max_io_queue_depth": 1e3, /* site: deeper queue */`,
		`"max_device_pinned_mem_size_kb": 33554432,`, `"max_device_pinned_mem_size_kb": 3.3554432E7,`,
		`//"rdma_dc_key": "0xffeeddcc",`, `"rdma_dc_key": "0xffeeddcc",`,
		`"io_priority": "default",`, `"io_priority": "def\u0061ult", "x_site": {"zeta": -0.0, "alpha": [1,2 ,3], "s": "a/*b*/c//d"},`,
		`"static_routing_filepath": "/etc/topology.json"`, `"static_routing_filepath": "/etc/topology.json",`, // trailing comma
		`"use_pci_p2pdma": false,
"allow_compat_mode": true,`, `"use_pci_p2pdma": false,
"allow_compat_mode": false,
"use_pci_p2pdma": false,`, // an owned key twice
	)
	s := Settings{P2PDMA: true, DynamicRouting: true, FS: []FSAddrs{{FS: "lustre", Addrs: []string{"10.10.1.11"}}}}
	out, notes, err := Merge("site.json", src, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"level": "INFO"`,
		`"max_io_queue_depth": 1e3,`,
		`"max_device_pinned_mem_size_kb": 3.3554432E7,`,
		`"rdma_dc_key": "0xffeeddcc",`,
		`"io_priority": "def\u0061ult",`,
		"\"x_site\": {\n      \"zeta\": -0.0,\n      \"alpha\": [1, 2, 3],\n      \"s\": \"a/*b*/c//d\"\n    },",
		`"allow_compat_mode": false,`,
		"\"static_routing_filepath\": \"/etc/topology.json\"\n  }\n}\n",
		"    \"rdma_dynamic_routing\": true,\n    \"rdma_dynamic_routing_order\": [\"GPU_MEM_NVLINKS\", \"GPU_MEM\", \"SYS_MEM\", \"P2P\"]\n",
		"\"lustre\": {\n      \"posix_gds_min_kb\": 0,\n      \"rdma_dev_addr_list\": [\"10.10.1.11\"]\n    },",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("merged file lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "site: deeper queue") || strings.Contains(string(out), "// ") {
		t.Errorf("a comment survived:\n%s", out)
	}
	// The owned key once, set, in the first one's place.
	if c := strings.Count(string(out), `"use_pci_p2pdma": true`); c != 2 { // properties and block.nvme
		t.Errorf("use_pci_p2pdma true %d times, want 2:\n%s", c, out)
	}
	if strings.Contains(string(out), "\"allow_compat_mode\": false,\n    \"use_pci_p2pdma\"") {
		t.Error("the duplicate owned key survived")
	}
	if !strings.Contains(string(out), "\"poll_mode_max_size_kb\": 4,\n    \"use_pci_p2pdma\": true,\n    \"allow_compat_mode\": false,") {
		t.Errorf("properties.use_pci_p2pdma not in its place:\n%s", out)
	}
	if len(notes) != 0 {
		t.Errorf("notes %q", notes)
	}
	m := decode(t, out)
	if at(m, "profile", "cufile_stats") != float64(0) || at(m, "execution", "max_io_queue_depth") != float64(1000) {
		t.Errorf("decoded: %v", m["execution"])
	}
}

// Writing one of fs.<fs>.rdma_dev_addr_list and fs.<fs>.mount_table
// removes the other (cuFile refuses both), says so, and leaves mount
// table entries for other mount points alone.
func TestMergeNeverBoth(t *testing.T) {
	src := edit(t,
		`"posix_gds_min_kb": 0
//"rdma_dev_addr_list": [],
//"mount_table": {}
},
"lustre"`, `"posix_gds_min_kb": 0,
"rdma_dev_addr_list": ["192.168.0.9"]
},
"lustre"`,
		`"posix_gds_min_kb": 0
//"rdma_dev_addr_list": [],
//"mount_table": {}
},
"nfs"`, `"posix_gds_min_kb": 0,
"mount_table": {"/lustre/old": {"rdma_dev_addr_list": ["192.168.0.1"]}}
},
"nfs"`,
		`"use_pci_p2pdma": false
//"rdma_dev_addr_list": [],
//"mount_table": {}`, `"use_pci_p2pdma": false,
"rdma_dev_addr_list": ["192.168.0.2"],
"mount_table": {"/mnt/other": {"rdma_dev_addr_list": ["192.168.0.3"], "x": 1}, "/mnt/vast": {"x": 2, "rdma_dev_addr_list": []}}`,
	)
	s := Settings{FS: []FSAddrs{
		{FS: "beegfs", Mounts: []MountAddrs{{"/mnt/beegfs", []string{"10.0.0.1"}}}},
		{FS: "lustre", Addrs: []string{"10.10.1.11", "10.10.1.12"}},
		{FS: "nfs", Mounts: []MountAddrs{{"/mnt/vast", []string{"10.20.1.17"}}}},
	}}
	out, notes, err := Merge("site.json", src, s)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	for _, fs := range []string{"beegfs", "lustre", "nfs", "gpfs", "weka"} {
		if at(m, "fs", fs, "rdma_dev_addr_list") != nil && at(m, "fs", fs, "mount_table") != nil {
			t.Errorf("fs.%s has both a list and a mount table:\n%s", fs, out)
		}
	}
	for _, want := range []string{
		"\"beegfs\": {\n      \"posix_gds_min_kb\": 0,\n      \"mount_table\": {\n        \"/mnt/beegfs\": {\n          \"rdma_dev_addr_list\": [\"10.0.0.1\"]\n        }\n      }\n    },",
		"\"lustre\": {\n      \"posix_gds_min_kb\": 0,\n      \"rdma_dev_addr_list\": [\"10.10.1.11\", \"10.10.1.12\"]\n    },",
		// The other mount point's entry as it was; ours keeps its x and
		// its place.
		"\"/mnt/other\": {\n          \"rdma_dev_addr_list\": [\"192.168.0.3\"],\n          \"x\": 1\n        },\n" +
			"        \"/mnt/vast\": {\n          \"x\": 2,\n          \"rdma_dev_addr_list\": [\"10.20.1.17\"]\n        }",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("merged file lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "192.168.0.9") || strings.Contains(string(out), "192.168.0.2") || strings.Contains(string(out), "/lustre/old") {
		t.Errorf("a conflicting key survived:\n%s", out)
	}
	want := []string{
		"fs.beegfs.rdma_dev_addr_list removed: fs.beegfs.mount_table is set, and cuFile refuses both",
		"fs.lustre.mount_table removed: fs.lustre.rdma_dev_addr_list is set, and cuFile refuses both",
		"fs.nfs.rdma_dev_addr_list removed: fs.nfs.mount_table is set, and cuFile refuses both",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes = %q\nwant %q", notes, want)
	}
}

// Missing objects on the way to owned keys are made; a site file as small
// as "{}" gets what gpuaffinity owns and nothing else.
func TestMergeMinimal(t *testing.T) {
	out, _, err := Merge("min.json", []byte("{}"), Settings{FS: []FSAddrs{{FS: "weka", Addrs: []string{"10.0.0.5"}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "properties": {
    "use_pci_p2pdma": false,
    "rdma_dynamic_routing": false
  },
  "block": {
    "nvme": {
      "use_pci_p2pdma": false
    }
  },
  "fs": {
    "weka": {
      "rdma_dev_addr_list": ["10.0.0.5"]
    }
  }
}
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// Hostile or broken files are errors that say where and why; none
// panics or recurses without bound.
func TestMergeHostile(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	deepArr := `{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}"
	huge := `{"a": "` + strings.Repeat("x", MaxFileSize) + `"}`
	for _, tc := range []struct {
		name, src, want string
	}{
		{"empty", "", "empty file"},
		{"only a comment", "// nothing\n", "empty file"},
		{"garbage", "\x00\x01binary", `want an object ('{'), found '\x00'`},
		{"array", "[1, 2]", "want an object"},
		{"unclosed object", `{"logging": {"level": "INFO"}`, `want ',' or '}' after the value of "logging", found end of file`},
		{"unclosed comment", `{"a": 1 /* forever`, "/* comment not closed"},
		{"unclosed string", `{"a": "abc`, "string not closed"},
		{"newline in string", "{\"a\": \"ab\ncd\"}", "control character"},
		{"bad escape", `{"a": "\q"}`, "invalid string"},
		{"bad utf-8", "{\"a\": \"\xff\"}", "not UTF-8"},
		{"bad number", `{"a": 01}`, `invalid number "01"`},
		{"lone minus", `{"a": -}`, "invalid number"},
		{"word", `{"a": True}`, "want a value, found 'T'"},
		{"missing colon", `{"a" 1}`, "want ':' after key \"a\""},
		{"missing comma", "{\"a\": 1\n\"b\": 2}", "site.json:2:1"},
		{"trailing garbage", `{} {}`, "after the object"},
		{"deep objects", deep, "nested more than 64 deep"},
		{"deep arrays", deepArr, "nested more than 64 deep"},
		{"huge", huge, "more than 1048576"},
		{"properties not an object", `{"properties": []}`, "properties is not an object"},
		{"block.nvme not an object", `{"block": {"nvme": true}}`, "block.nvme is not an object"},
	} {
		_, _, err := Merge("site.json", []byte(tc.src), Settings{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "site.json") {
			t.Errorf("%s: err = %v; want one naming site.json and %q", tc.name, err, tc.want)
		}
		if strings.Contains(tc.want, "not an object") == errors.Is(err, ErrSyntax) {
			t.Errorf("%s: errors.Is(ErrSyntax) = %v", tc.name, errors.Is(err, ErrSyntax))
		}
	}
	_, _, err := Merge("site.json", []byte(`{"fs": {"lustre": 3}}`), Settings{FS: []FSAddrs{{FS: "lustre", Addrs: []string{"10.0.0.1"}}}})
	if err == nil || !strings.Contains(err.Error(), "fs.lustre is not an object") {
		t.Errorf("fs.lustre = 3: %v", err)
	}
	_, _, err = Merge("site.json", []byte(`{"fs": {"nfs": {"mount_table": {"/m": "x"}}}}`), Settings{FS: []FSAddrs{{FS: "nfs", Mounts: []MountAddrs{{"/m", []string{"10.0.0.1"}}}}}})
	if err == nil || !strings.Contains(err.Error(), `fs.nfs.mount_table./m is not an object`) {
		t.Errorf("mount entry a string: %v", err)
	}
}

// A byte order mark, CRLF line ends and comments everywhere are read.
func TestMergeTolerant(t *testing.T) {
	src := "\xef\xbb\xbf/* head */{\r\n  // c\r\n  \"logging\" /* k */ : /* v */ {\"level\": \"WARN\",},\r\n  \"denylist\": {\"mounts\": [\"/x\", /* */ ],}\r\n}// tail"
	out, _, err := Merge("site.json", []byte(src), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "logging": {
    "level": "WARN"
  },
  "denylist": {
    "mounts": ["/x"]
  },
  "properties": {
    "use_pci_p2pdma": false,
    "rdma_dynamic_routing": false
  },
  "block": {
    "nvme": {
      "use_pci_p2pdma": false
    }
  }
}
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}
