package binding

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWriteNumactlAndTaskset(t *testing.T) {
	m := compute(t, fixture(t, "numa-unknown-2s"), ModeNode, 1)
	var b bytes.Buffer
	if err := WriteNumactl(&b, m); err != nil {
		t.Fatal(err)
	}
	// GPU 3's memory node is unknown: no --membind.
	want := "--physcpubind=0-15,32-47 --membind=0\n--physcpubind=0-15,32-47 --membind=0\n--physcpubind=16-31,48-63 --membind=1\n--physcpubind=0-63\n"
	if b.String() != want {
		t.Errorf("numactl:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteTaskset(&b, m); err != nil {
		t.Fatal(err)
	}
	if want := "0-15,32-47\n0-15,32-47\n16-31,48-63\n0-63\n"; b.String() != want {
		t.Errorf("taskset:\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteJSON(t *testing.T) {
	m := compute(t, fixture(t, "unequal-nodes"), ModeExclusive, 1)
	var b bytes.Buffer
	if err := WriteJSON(&b, m); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Schema      string `json:"schema"`
		Mode        string `json:"mode"`
		RanksPerGPU int    `json:"ranks_per_gpu"`
		Ranks       []struct {
			Rank     int      `json:"rank"`
			GPU      int      `json:"gpu"`
			Node     int      `json:"node"`
			CPUs     string   `json:"cpus"`
			Mems     string   `json:"mems"`
			Mode     string   `json:"mode"`
			Warnings []string `json:"warnings"`
		} `json:"ranks"`
		Leftover string   `json:"leftover"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if got.Schema != "gpuaffinity.cpumap/v1" || got.Mode != "exclusive" || got.RanksPerGPU != 1 || len(got.Ranks) != 8 {
		t.Fatalf("%+v", got)
	}
	r := got.Ranks[6]
	if r.Rank != 6 || r.GPU != 6 || r.Node != 1 || r.CPUs != "32-47,96-111" || r.Mems != "1" || r.Mode != "exclusive" || r.Warnings == nil {
		t.Errorf("rank 6: %+v", r)
	}
	if got.Leftover != "30-31,94-95" || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "2 cores left over (CPUs 30-31,94-95)") {
		t.Errorf("leftover %q warnings %q", got.Leftover, got.Warnings)
	}
	// A zero Map still writes arrays, not null.
	b.Reset()
	if err := WriteJSON(&b, Map{}); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, `"ranks": []`) || !strings.Contains(s, `"warnings": []`) {
		t.Errorf("zero map: %s", s)
	}
}

func TestWriteTable(t *testing.T) {
	m := compute(t, fixture(t, "unequal-nodes"), ModeExclusive, 1)
	var b bytes.Buffer
	if err := WriteTable(&b, m); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "RANK GPU NODE MODE CPUS MEMS" {
		t.Errorf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); strings.Join(f, " ") != "0 0 0 exclusive 0-4,64-68 0" {
		t.Errorf("row 0 %q", lines[1])
	}
	for _, w := range []string{"Leftover CPUs: 30-31,94-95", "Warnings:", "node 0: 32 allowed cores do not split evenly among 6 ranks"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
	// Unknown node and memory print as "-".
	b.Reset()
	if err := WriteTable(&b, compute(t, fixture(t, "numa-unknown-2s"), ModeNode, 1)); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(strings.Split(b.String(), "\n")[4]); strings.Join(f, " ") != "3 3 - node 0-63 -" {
		t.Errorf("table:\n%s", b.String())
	}
}
