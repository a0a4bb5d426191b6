package nvml

import (
	"encoding/json"
	"fmt"
)

// EncodeReplay renders f as nvml.json is written everywhere (snapshot,
// the example machines, the test fixtures): indented JSON, fields in
// struct order, with a trailing newline. It is deterministic, so the
// same answers always give the same bytes; TestEncodeReplayOwned keeps
// it the only place that lays the file out.
func EncodeReplay(f ReplayFile) ([]byte, error) {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("nvml: encode %s: %w", ReplayFileName, err)
	}
	return append(data, '\n'), nil
}
