package nvml

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEncodeReplayOwned fails when nvml.json is laid out a second time
// outside EncodeReplay (snapshot, the fixture builder and its capture
// once each had their own json.MarshalIndent): a file that marshals
// JSON and names ReplayFile must encode through EncodeReplay.
func TestEncodeReplayOwned(t *testing.T) {
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || p == filepath.Join("..", "nvml", "replay_encode.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if s := string(b); strings.Contains(s, "json.Marshal") && strings.Contains(s, "ReplayFile") {
			t.Errorf("%s marshals a ReplayFile itself: use nvml.EncodeReplay", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
