package ncclxml

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

const rcclRefs = "testdata/rccl-topo-refs"

// TestCheckRCCL: RCCL's loader rules (rccl@0cbce2a src/graph/xml.cc,
// xml.h, topo.h), by hand.
func TestCheckRCCL(t *testing.T) {
	const cpu = `<cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="AuthenticAMD" familyid="175" modelid="17">`
	const gpu = `<pci busid="0000:05:00.0" class="0x120000" link_speed="32.0 GT/s PCIe" link_width="16">`
	doc := func(version, body string) string {
		return "<system version=\"" + version + "\">\n  " + cpu + "\n    " + body + "\n  </cpu>\n</system>\n"
	}
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(`<pci busid="0000:` + hex2(i/32) + `:` + hex2(i%32) + `.0" class="0x020000" link_speed="" link_width="0"/>`)
		}
		return b.String()
	}
	tests := []struct {
		name, in string
		kind     error
		msg      string
	}{
		{"pci only", doc("2", gpu+"</pci>"), nil, ""},
		{"gpu with xgmi", doc("2", gpu+`<gpu dev="0" sm="304" gcn="gfx942" arch="38911" rank="0" gdr="1"><xgmi target="0000:2b:00.0" count="1" tclass="0x120000"/></gpu></pci>`), nil, ""},
		{"version 1", doc("1", gpu+"</pci>"), ErrInvalid, `version "1": RCCL reads only version 2`},
		{"no version", "<system/>", ErrInvalid, `RCCL needs version="2"`},
		{"nvlink under gpu", doc("2", gpu+`<gpu dev="0"><nvlink target="0000:2b:00.0" count="1"/></gpu></pci>`), ErrInvalid, "RCCL does not load <nvlink> inside <gpu>"},
		{"pcilink under pci", doc("2", gpu+`<pcilink target="0000:2b:00.0"/></pci>`), ErrInvalid, "RCCL does not load <pcilink> inside <pci>"},
		// MAX_SUBS 512: 512 children load, 513 do not; 600 elements are
		// far below RCCL's 8192 but over NCCL's 256.
		{"512 children", doc("2", many(512)), nil, ""},
		{"513 children", doc("2", many(513)), ErrLimit, "513 children: RCCL's limit is 512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFor([]byte(tt.in), RCCL)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("CheckFor RCCL: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("CheckFor RCCL = %v, want %v with %q", err, tt.kind, tt.msg)
			}
		})
	}
	// The same gpu/xgmi file is not one NCCL reads.
	err := Check([]byte(doc("2", gpu+`<gpu dev="0"><xgmi target="0000:2b:00.0" count="1"/></gpu></pci>`)))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "NCCL reads only version 1") || !strings.Contains(err.Error(), "NCCL does not load <xgmi> inside <gpu>") {
		t.Errorf("Check (NCCL) of an RCCL file: %v", err)
	}
	if RCCL.Version() != 2 || NCCL.Version() != 1 || RCCL.String() != "RCCL" || NCCL.String() != "NCCL" {
		t.Errorf("dialects: %v %d, %v %d", NCCL, NCCL.Version(), RCCL, RCCL.Version())
	}
}

// TestRCCLFiles: RCCL's own MI300X/MI300A models parse, pass RCCL's
// checker, come back unchanged from a write, and fail NCCL's.
func TestRCCLFiles(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(rcclRefs, "*.xml"))
	if len(files) != 3 {
		t.Fatalf("found %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data := readFile(t, f)
			root, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckElementFor(root, RCCL); err != nil {
				t.Errorf("CheckElementFor RCCL: %v", err)
			}
			if err := CheckElement(root); !errors.Is(err, ErrInvalid) {
				t.Errorf("CheckElement (NCCL): %v, want ErrInvalid", err)
			}
			again, err := Parse([]byte(root.String()))
			if err != nil {
				t.Fatal(err)
			}
			if again.String() != root.String() {
				t.Error("Write(Parse) is not stable")
			}
		})
	}
}
