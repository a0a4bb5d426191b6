package fleet

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// TestReportWrite: Write is WriteText for "text" and the indented Report
// for "json", and refuses another format before writing.
func TestReportWrite(t *testing.T) {
	r := Consistency([]Node{reportNode("a"), reportNode("b"), reportNode("c", Fact{Key: "gpus", Value: "4"})})
	var text, viaWrite bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.Write(&viaWrite, "text"); err != nil || viaWrite.String() != text.String() {
		t.Errorf("Write text = %q, %v; want WriteText's %q", viaWrite.String(), err, text.String())
	}
	want, _ := json.MarshalIndent(r, "", "  ")
	var js bytes.Buffer
	if err := r.Write(&js, "json"); err != nil || js.String() != string(want)+"\n" {
		t.Errorf("Write json = %q, %v", js.String(), err)
	}
	var none bytes.Buffer
	if err := r.Write(&none, "yaml"); err == nil || err.Error() != `"yaml": want text or json` || none.Len() != 0 {
		t.Errorf("Write yaml: %v, wrote %q", err, none.String())
	}
}

// TestWriteLabels: the formats are WriteKubectl's and WriteJSON's.
func TestWriteLabels(t *testing.T) {
	nodes := []Node{{Name: "gb200-01", Cloud: "baremetal", Tiers: []string{"leaf", "spine"}, Clique: "uuid.32766"}}
	for format, write := range map[string]func(*bytes.Buffer) ([]string, error){
		"kubectl": func(b *bytes.Buffer) ([]string, error) { return WriteKubectl(b, nodes, SchemeCloud) },
		"json":    func(b *bytes.Buffer) ([]string, error) { return WriteJSON(b, nodes, SchemeCloud) },
	} {
		var want, got bytes.Buffer
		if _, err := write(&want); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteLabels(&got, nodes, SchemeCloud, format); err != nil || got.String() != want.String() {
			t.Errorf("%s: %q, %v; want %q", format, got.String(), err, want.String())
		}
	}
	if _, err := WriteLabels(new(bytes.Buffer), nodes, SchemeCloud, "yaml"); err == nil || err.Error() != `"yaml": want kubectl or json` {
		t.Errorf("yaml: %v", err)
	}
}

// outputTells are the fleet's output decisions made again by a caller:
// choosing the report's or the labels' form, or assembling the report
// from its parts. cmd once did all three itself.
var outputTells = regexp.MustCompile(`fleet\.(?:WriteJSON|WriteKubectl|Consistency)\(|want (?:text|kubectl) or json|\.Refused = append\(`)

// TestOutputOwned fails when code outside the fleet packages formats
// the report or the label list itself instead of calling Report.Write,
// WriteLabels and prom.Fleet.Consistency.
func TestOutputOwned(t *testing.T) {
	srcfiles.Product(t, "..", func(p, text string) {
		b := []byte(text)
		if m := outputTells.Find(b); m != nil {
			t.Errorf("%s decides the fleet's output itself (%q): use Report.Write, WriteLabels, prom.Fleet.Consistency", p, m)
		}
	}, "fleet")
}
