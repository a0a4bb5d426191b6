package prom

import (
	"bytes"
	"testing"
)

// The answer decoder reads what a server sends: whatever the bytes, it
// ends with series, an error or a status, never a panic, and it counts
// every series it hands on.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"a","instance":"n:1"},"value":[1700000000,"1"]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"],[2,"2"]]}]}}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`,
		`{"data":{"result":[{"metric":null}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		d := decoder{visit: func(s *series) error {
			n++
			return nil
		}}
		d.decode(bytes.NewReader(data))
		if n != d.series {
			t.Fatalf("visited %d series, counted %d", n, d.series)
		}
	})
}
