package cufile

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
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

// Settings the duplicate-key tests merge: a per-fs list for Lustre and a
// mount table for NFS, both file systems gpuaffinity then owns keys in.
var (
	lustreList = FSAddrs{FS: "lustre", Addrs: []string{"10.0.0.1"}}
	nfsTable   = FSAddrs{FS: "nfs", Mounts: []MountAddrs{{"/mnt/vast", []string{"10.0.0.2"}}}}
)

// dupRefused are site files that write an object on the way to a key
// gpuaffinity owns twice in one parent, at each level of Owned's paths,
// with the settings that make gpuaffinity write under it and the error
// Merge must give. Lines and columns are counted by hand: the second
// copy's key, and the first copy's line.
var dupRefused = []struct {
	name, src string
	s         Settings
	want      string
}{
	{"properties twice", `{
  "properties": {"use_pci_p2pdma": true},
  "logging": {"level": "INFO"},
  "properties": {"use_pci_p2pdma": true, "allow_compat_mode": false}
}`, Settings{}, `site.json:4:3: duplicate key "properties" (first at line 2)`},
	{"block twice", `{
  "block": {"nvme": {"use_pci_p2pdma": true}},
  "block": {"nvmeof": {"use_pci_p2pdma": true}}
}`, Settings{}, `site.json:3:3: duplicate key "block" (first at line 2)`},
	{"block.nvme twice", `{
  "block": {
    "nvme": {"use_pci_p2pdma": true},
    "raid": {"use_pci_p2pdma": false},
    "nvme": {"use_pci_p2pdma": true}
  }
}`, Settings{}, `site.json:5:5: duplicate key "block.nvme" (first at line 3)`},
	{"fs twice", `{
  "fs": {"lustre": {"rdma_dev_addr_list": ["192.168.0.9"]}},
  "fs": {"nfs": {"rdma_dev_addr_list": ["192.168.0.9"]}}
}`, Settings{FS: []FSAddrs{lustreList}}, `site.json:3:3: duplicate key "fs" (first at line 2)`},
	{"fs.nfs twice", `{
  "fs": {
    "nfs": {"rdma_dev_addr_list": ["192.168.0.1"]},
    "lustre": {"posix_gds_min_kb": 0},
    "nfs": {"rdma_dev_addr_list": ["192.168.0.2"]}
  }
}`, Settings{FS: []FSAddrs{nfsTable}}, `site.json:5:5: duplicate key "fs.nfs" (first at line 3)`},
	{"fs.nfs.mount_table twice", `{
  "fs": {
    "nfs": {
      "mount_table": {"/mnt/a": {"rdma_dev_addr_list": ["192.168.0.1"]}},
      "mount_table": {"/mnt/vast": {"rdma_dev_addr_list": ["192.168.0.2"]}}
    }
  }
}`, Settings{FS: []FSAddrs{nfsTable}}, `site.json:5:7: duplicate key "fs.nfs.mount_table" (first at line 4)`},
	{"mount point twice", `{
  "fs": {
    "nfs": {
      "mount_table": {
        "/mnt/vast": {"rdma_dev_addr_list": ["192.168.0.1"]},
        "/mnt/vast": {"rdma_dev_addr_list": ["192.168.0.2"], "x": 1}
      }
    }
  }
}`, Settings{FS: []FSAddrs{nfsTable}}, `site.json:6:9: duplicate key "fs.nfs.mount_table./mnt/vast" (first at line 5)`},
	{"the same key escaped", `{
  "properties": {},
  "propert\u0069es": {"use_pci_p2pdma": true}
}`, Settings{}, `site.json:3:3: duplicate key "properties" (first at line 2)`},
	// Comments before a key and keys inside comments count for neither
	// the line nor the duplicate.
	{"with comments", `// site file, "fs": {} here is a comment
/* "properties": {} */ {
  "properties": {}, // "fs": {}
  /* two */ "fs": {"nfs": {}},
  "fs": {"nfs": {"rdma_dev_addr_list": ["192.168.0.2"]}}
}`, Settings{FS: []FSAddrs{nfsTable}}, `site.json:5:3: duplicate key "fs" (first at line 4)`},
}

// The tail every refusal carries after the key and lines.
const dupRefusedTail = ": gpuaffinity writes under it, and cuFile does not document which copy it reads; join the two by hand"

// An object on the way to an owned key written twice in its parent is
// refused, naming the file, the key and both lines: writing into one copy
// would leave the other's stale values for a reader that takes it.
func TestMergeDuplicateRefused(t *testing.T) {
	for _, tc := range dupRefused {
		t.Run(tc.name, func(t *testing.T) {
			out, notes, err := Merge("site.json", []byte(tc.src), tc.s)
			if err == nil || err.Error() != tc.want+dupRefusedTail {
				t.Errorf("err = %v\nwant %s", err, tc.want+dupRefusedTail)
			}
			if !errors.Is(err, ErrDuplicateKey) || errors.Is(err, ErrSyntax) {
				t.Errorf("errors.Is(ErrDuplicateKey) = %v, errors.Is(ErrSyntax) = %v", errors.Is(err, ErrDuplicateKey), errors.Is(err, ErrSyntax))
			}
			if out != nil || notes != nil {
				t.Errorf("a refused merge gave output %q, notes %q", out, notes)
			}
		})
	}
}

// NVIDIA's default file, comments and all, with a second "fs" the site
// added at its end: the line is the reference's (cufile.default.json has
// "fs" on line 61, the closing brace of "miscellaneous" on line 111).
func TestMergeDuplicateInReference(t *testing.T) {
	src := edit(t, "\"/etc/topology.json\"\n}\n}", "\"/etc/topology.json\"\n}, // the NFS NIC before the move\n/* site */ \"fs\": {\"nfs\": {\"rdma_dev_addr_list\": [\"192.168.0.9\"]}}\n}")
	_, _, err := Merge("/etc/cufile.json", src, Settings{FS: []FSAddrs{{FS: "nfs", Addrs: []string{"10.0.0.2"}}}})
	want := `/etc/cufile.json:112:12: duplicate key "fs" (first at line 61)` + dupRefusedTail
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	// Without a network mount gpuaffinity writes nothing under fs: the
	// site's two copies stay, with a note.
	out, notes, err := Merge("/etc/cufile.json", src, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(string(out), "\n  \"fs\": {\n"); c != 2 {
		t.Errorf("fs %d times, want the site's 2:\n%s", c, out)
	}
	wantNotes := []string{`/etc/cufile.json:112:12: "fs" written twice (first at line 61): left as written, gpuaffinity does not own it; cuFile does not document which copy it reads`}
	if strings.Join(notes, "\n") != strings.Join(wantNotes, "\n") {
		t.Errorf("notes = %q\nwant %q", notes, wantNotes)
	}
}

// dupMerged are site files with duplicates Merge resolves or leaves, and
// the whole output and notes, written by hand: an owned key written twice
// is set once in the first one's place, a conflicting key written twice
// is removed with every copy, and a duplicate off gpuaffinity's paths is
// left as written, with a note.
var dupMerged = []struct {
	name, src string
	s         Settings
	want      string
	notes     []string
}{
	{"owned key twice at each level", `{
  "properties": {
    "use_pci_p2pdma": true,
    "io_batchsize": 128,
    "use_pci_p2pdma": true,
    "rdma_dynamic_routing": true,
    "rdma_dynamic_routing": true
  },
  "block": {"nvme": {"use_pci_p2pdma": true, "use_pci_p2pdma": true}},
  "fs": {
    "lustre": {"rdma_dev_addr_list": ["192.168.0.1"], "posix_gds_min_kb": 0, "rdma_dev_addr_list": ["192.168.0.2"]},
    "nfs": {"mount_table": {"/mnt/vast": {"rdma_dev_addr_list": ["192.168.0.3"], "rdma_dev_addr_list": ["192.168.0.4"]}}}
  }
}`, Settings{FS: []FSAddrs{lustreList, nfsTable}}, `{
  "properties": {
    "use_pci_p2pdma": false,
    "io_batchsize": 128,
    "rdma_dynamic_routing": false
  },
  "block": {
    "nvme": {
      "use_pci_p2pdma": false
    }
  },
  "fs": {
    "lustre": {
      "rdma_dev_addr_list": ["10.0.0.1"],
      "posix_gds_min_kb": 0
    },
    "nfs": {
      "mount_table": {
        "/mnt/vast": {
          "rdma_dev_addr_list": ["10.0.0.2"]
        }
      }
    }
  }
}
`, nil},
	{"conflicting key twice", `{
  "fs": {
    "lustre": {"mount_table": {"/a": {}}, "mount_table": {"/b": {}}},
    "nfs": {"rdma_dev_addr_list": ["192.168.0.1"], "rdma_dev_addr_list": ["192.168.0.2"]}
  }
}`, Settings{FS: []FSAddrs{lustreList, nfsTable}}, `{
  "fs": {
    "lustre": {
      "rdma_dev_addr_list": ["10.0.0.1"]
    },
    "nfs": {
      "mount_table": {
        "/mnt/vast": {
          "rdma_dev_addr_list": ["10.0.0.2"]
        }
      }
    }
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
`, []string{
		"fs.lustre.mount_table removed: fs.lustre.rdma_dev_addr_list is set, and cuFile refuses both",
		"fs.nfs.rdma_dev_addr_list removed: fs.nfs.mount_table is set, and cuFile refuses both",
	}},
	{"owned key twice with comments", `// site file
{
  "properties": {
    /* "use_pci_p2pdma": false, */
    "use_pci_p2pdma": true, // on
    "use_pci_p2pdma": true
  }
}`, Settings{}, `{
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
`, nil},
	{"duplicates off gpuaffinity's paths", `{
  "logging": {
    "level": "ERROR",
    "level": "INFO"
  },
  "properties": {
    "allow_compat_mode": true,
    "allow_compat_mode": false,
    "use_pci_p2pdma": false,
    "rdma_dynamic_routing": false
  },
  "block": {
    "nvme": {"use_pci_p2pdma": false},
    "raid": {"use_pci_p2pdma": true},
    "raid": {"use_pci_p2pdma": false}
  },
  "fs": {
    "gpfs": {"rdma_dev_addr_list": []},
    "gpfs": {"gds_write_support": true}
  },
  "denylist": {"mounts": [{
    "a": 1,
    "a": 2}]},
  "denylist": {"drivers": []}
}`, Settings{FS: []FSAddrs{lustreList}}, `{
  "logging": {
    "level": "ERROR",
    "level": "INFO"
  },
  "properties": {
    "allow_compat_mode": true,
    "allow_compat_mode": false,
    "use_pci_p2pdma": false,
    "rdma_dynamic_routing": false
  },
  "block": {
    "nvme": {
      "use_pci_p2pdma": false
    },
    "raid": {
      "use_pci_p2pdma": true
    },
    "raid": {
      "use_pci_p2pdma": false
    }
  },
  "fs": {
    "gpfs": {
      "rdma_dev_addr_list": []
    },
    "gpfs": {
      "gds_write_support": true
    },
    "lustre": {
      "rdma_dev_addr_list": ["10.0.0.1"]
    }
  },
  "denylist": {
    "mounts": [
      {
        "a": 1,
        "a": 2
      }
    ]
  },
  "denylist": {
    "drivers": []
  }
}
`, []string{
		`site.json:4:5: "logging.level" written twice (first at line 3)`,
		`site.json:8:5: "properties.allow_compat_mode" written twice (first at line 7)`,
		`site.json:15:5: "block.raid" written twice (first at line 14)`,
		`site.json:19:5: "fs.gpfs" written twice (first at line 18)`,
		`site.json:23:5: "denylist.mounts[0].a" written twice (first at line 22)`,
		`site.json:24:3: "denylist" written twice (first at line 21)`,
	}},
	{"fs twice without a network mount", `{
  "fs": {"nfs": {"rdma_dev_addr_list": ["192.168.0.1"]}},
  "fs": {"nfs": {"rdma_dev_addr_list": ["192.168.0.2"]}}
}`, Settings{P2PDMA: true}, `{
  "fs": {
    "nfs": {
      "rdma_dev_addr_list": ["192.168.0.1"]
    }
  },
  "fs": {
    "nfs": {
      "rdma_dev_addr_list": ["192.168.0.2"]
    }
  },
  "properties": {
    "use_pci_p2pdma": true,
    "rdma_dynamic_routing": false
  },
  "block": {
    "nvme": {
      "use_pci_p2pdma": true
    }
  }
}
`, []string{`site.json:3:3: "fs" written twice (first at line 2)`}},
	{"fs.nfs twice, only Lustre mounted", `{
  "fs": {
    "nfs": {"rdma_dev_addr_list": ["192.168.0.1"]},
    "nfs": {"rdma_dev_addr_list": ["192.168.0.2"]}
  }
}`, Settings{FS: []FSAddrs{lustreList}}, `{
  "fs": {
    "nfs": {
      "rdma_dev_addr_list": ["192.168.0.1"]
    },
    "nfs": {
      "rdma_dev_addr_list": ["192.168.0.2"]
    },
    "lustre": {
      "rdma_dev_addr_list": ["10.0.0.1"]
    }
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
`, []string{`site.json:4:5: "fs.nfs" written twice (first at line 3)`}},
}

// The tail of every note for a duplicate left as written.
const dupLeftTail = ": left as written, gpuaffinity does not own it; cuFile does not document which copy it reads"

func TestMergeDuplicateMerged(t *testing.T) {
	for _, tc := range dupMerged {
		t.Run(tc.name, func(t *testing.T) {
			out, notes, err := Merge("site.json", []byte(tc.src), tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out, tc.want)
			}
			var want []string
			for _, n := range tc.notes {
				if strings.HasPrefix(n, "site.json:") {
					n += dupLeftTail
				}
				want = append(want, n)
			}
			if strings.Join(notes, "\n") != strings.Join(want, "\n") {
				t.Errorf("notes = %q\nwant %q", notes, want)
			}
		})
	}
}

// A file with many duplicates gets ten notes and a count, not one note
// each.
func TestMergeDuplicateNotesBounded(t *testing.T) {
	src := `{"x": {"a": 1` + strings.Repeat(`, "a": 1`, 12) + `}}`
	_, notes, err := Merge("site.json", []byte(src), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 11 || notes[10] != "site.json: 2 more keys written twice, left as written" {
		t.Errorf("%d notes, last %q; want 11, the last counting 2 more", len(notes), notes[len(notes)-1])
	}
	// The first of the twelve duplicates: `{"x": {"a": 1, ` is 15 bytes.
	if want := `site.json:1:16: "x.a" written twice (first at line 1)` + dupLeftTail; notes[0] != want {
		t.Errorf("note %q\nwant %q", notes[0], want)
	}
}

// fuzzSettings are the settings FuzzMerge merges, picked by its mode
// argument: P2PDMA and dynamic routing on or off, and no network file
// system, a Lustre list, an NFS mount table of two mount points, or both.
func fuzzSettings(mode uint8) Settings {
	s := Settings{P2PDMA: mode&1 != 0, DynamicRouting: mode&2 != 0}
	nfs := FSAddrs{FS: "nfs", Mounts: []MountAddrs{{"/mnt/vast", []string{"10.0.0.2"}}, {"/mnt/a", []string{"10.0.0.3", "10.0.0.4"}}}}
	switch mode >> 2 & 3 {
	case 1:
		s.FS = []FSAddrs{lustreList}
	case 2:
		s.FS = []FSAddrs{nfs}
	case 3:
		s.FS = []FSAddrs{lustreList, nfs}
	}
	return s
}

// FuzzMerge merges arbitrary files and checks, with encoding/json's
// token reader (which keeps duplicate keys, unlike its Unmarshal): Merge
// never panics; a file it refuses gets an error naming the file; and a
// file it merges comes out as JSON in which every object on the way to an
// owned key and every owned key is written exactly once, holding
// gpuaffinity's value, whichever copy a reader would take. Merging the
// output again changes nothing.
func FuzzMerge(f *testing.F) {
	ref, err := os.ReadFile("testdata/cufile.default.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ref, uint8(15))
	f.Add([]byte("{}"), uint8(0))
	// Each shape with no network file system and with both (15: fs,
	// fs.lustre, fs.nfs and its mount table written).
	for _, tc := range dupRefused {
		f.Add([]byte(tc.src), uint8(0))
		f.Add([]byte(tc.src), uint8(15))
	}
	for _, tc := range dupMerged {
		f.Add([]byte(tc.src), uint8(0))
		f.Add([]byte(tc.src), uint8(15))
	}
	f.Fuzz(func(t *testing.T, src []byte, mode uint8) {
		s := fuzzSettings(mode)
		out, _, err := Merge("site.json", src, s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "site.json:") {
				t.Errorf("error does not name the file: %v", err)
			}
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrDuplicateKey) && !strings.Contains(err.Error(), "is not an object") {
				t.Errorf("unexpected error: %v", err)
			}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber() // 1e700 is JSON, if no float64
		root, err := readTokens(dec)
		if err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		checkOwned(t, root, s)
		again, _, err := Merge("site.json", out, s)
		if err != nil || !bytes.Equal(again, out) {
			t.Errorf("merging the output again: %v\n%s\nwant\n%s", err, again, out)
		}
	})
}

// jnode is a JSON value as encoding/json's tokens give it, an object's
// members in order, duplicates included.
type jnode struct {
	obj     bool
	members []jmember
	scalar  any // a scalar's value; arrays keep their elements' scalars
	elems   []*jnode
}

type jmember struct {
	key string
	val *jnode
}

func readTokens(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return &jnode{scalar: tok}, nil
	}
	n := &jnode{obj: d == '{'}
	for dec.More() {
		var key string
		if n.obj {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key = k.(string)
		}
		v, err := readTokens(dec)
		if err != nil {
			return nil, err
		}
		if n.obj {
			n.members = append(n.members, jmember{key, v})
		} else {
			n.elems = append(n.elems, v)
		}
	}
	_, err = dec.Token() // } or ]
	return n, err
}

// count is how many members of n are named key.
func (n *jnode) count(key string) int {
	c := 0
	for _, m := range n.members {
		if m.key == key {
			c++
		}
	}
	return c
}

// one is the only member of n named key; it fails the test (and returns
// nil) where there are none or several, or where want says it must be an
// object and it is not.
func (n *jnode) one(t *testing.T, path, key string, object bool) *jnode {
	t.Helper()
	if n == nil {
		return nil
	}
	if c := n.count(key); c != 1 {
		t.Errorf("%s%s written %d times, want once", path, key, c)
		return nil
	}
	for _, m := range n.members {
		if m.key == key {
			if object && !m.val.obj {
				t.Errorf("%s%s is not an object", path, key)
				return nil
			}
			return m.val
		}
	}
	return nil
}

func (n *jnode) strings() []string {
	var out []string
	for _, e := range n.elems {
		s, _ := e.scalar.(string)
		out = append(out, s)
	}
	return out
}

// checkOwned checks every key Owned names that s writes: once, on a path
// of objects each written once, with s's value.
func checkOwned(t *testing.T, root *jnode, s Settings) {
	t.Helper()
	bools := func(n *jnode, path, key string, want bool) {
		if v := n.one(t, path, key, false); v != nil && v.scalar != want {
			t.Errorf("%s%s = %v, want %v", path, key, v.scalar, want)
		}
	}
	props := root.one(t, "", "properties", true)
	bools(props, "properties.", "use_pci_p2pdma", s.P2PDMA)
	bools(props, "properties.", "rdma_dynamic_routing", s.DynamicRouting)
	nvme := root.one(t, "", "block", true).one(t, "block.", "nvme", true)
	bools(nvme, "block.nvme.", "use_pci_p2pdma", s.P2PDMA)
	if len(s.FS) == 0 {
		return
	}
	fs := root.one(t, "", "fs", true)
	for _, f := range s.FS {
		path := "fs." + f.FS + "."
		obj := fs.one(t, "fs.", f.FS, true)
		if obj == nil {
			continue
		}
		if f.Mounts == nil {
			if obj.count("mount_table") != 0 {
				t.Errorf("%smount_table beside %srdma_dev_addr_list", path, path)
			}
			if l := obj.one(t, path, "rdma_dev_addr_list", false); l != nil && !slices.Equal(l.strings(), f.Addrs) {
				t.Errorf("%srdma_dev_addr_list = %q, want %q", path, l.strings(), f.Addrs)
			}
			continue
		}
		if obj.count("rdma_dev_addr_list") != 0 {
			t.Errorf("%srdma_dev_addr_list beside %smount_table", path, path)
		}
		table := obj.one(t, path, "mount_table", true)
		for _, m := range f.Mounts {
			entry := table.one(t, path+"mount_table.", m.Target, true)
			if l := entry.one(t, path+"mount_table."+m.Target+".", "rdma_dev_addr_list", false); l != nil && !slices.Equal(l.strings(), m.Addrs) {
				t.Errorf("%smount_table.%s.rdma_dev_addr_list = %q, want %q", path, m.Target, l.strings(), m.Addrs)
			}
		}
	}
}
