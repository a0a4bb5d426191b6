package promtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A real Prometheus scrapes a target serving one hand-written gauge; its
// API answers the sample with the job and instance labels Prometheus
// adds, the label values of the series, and refuses a parse error and a
// scalar result.
func TestStartQueries(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE promtest_answer gauge\npromtest_answer{kind=\"test\"} 42\n")
	}))
	t.Cleanup(target.Close)
	addr := strings.TrimPrefix(target.URL, "http://")

	s := Start(t, "promtest", addr)
	s.WaitScrapes(t, 2, 30*time.Second)

	got, err := s.Query(`promtest_answer`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"__name__": "promtest_answer", "kind": "test", "job": "promtest", "instance": addr}
	if len(got) != 1 || got[0].Value != 42 || fmt.Sprint(got[0].Metric) != fmt.Sprint(want) {
		t.Errorf("promtest_answer = %+v, want one sample 42 with labels %v", got, want)
	}
	vals, err := s.LabelValues("instance", `promtest_answer{job="promtest"}`)
	if err != nil || len(vals) != 1 || vals[0] != addr {
		t.Errorf("instance values = %q, %v; want [%s]", vals, err, addr)
	}
	if _, err := s.Query(`sum(promtest_answer`); err == nil || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("unclosed parenthesis: %v, want a parse error", err)
	}
	if _, err := s.Query(`scalar(promtest_answer)`); err == nil || !strings.Contains(err.Error(), `"scalar"`) {
		t.Errorf("scalar result: %v, want it refused", err)
	}
	if got, err := s.Query(`promtest_answer{kind="none"}`); err != nil || len(got) != 0 {
		t.Errorf("a selector matching nothing = %v, %v; want an empty vector", got, err)
	}
}
