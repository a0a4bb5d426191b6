package nvml

import (
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// TestEncodeReplayOwned fails when nvml.json is laid out a second time
// outside EncodeReplay (snapshot, the fixture builder and its capture
// once each had their own json.MarshalIndent): a file that marshals
// JSON and names ReplayFile must encode through EncodeReplay.
func TestEncodeReplayOwned(t *testing.T) {
	srcfiles.Product(t, "..", func(p, text string) {
		if s := text; strings.Contains(s, "json.Marshal") && strings.Contains(s, "ReplayFile") {
			t.Errorf("%s marshals a ReplayFile itself: use nvml.EncodeReplay", p)
		}
	}, "nvml/replay_encode.go")
}
