package kube

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/srcfiles"
)

// Apply lists once, patches only the nodes that need it, and where a
// patch meets a node changed since the list (409 on its
// resourceVersion) reads it again and patches what is still needed; a
// Kubernetes node the fleet lacks is never touched, and a fleet node
// Kubernetes lacks is named.
func TestApply(t *testing.T) {
	var mu sync.Mutex
	labels := map[string]map[string]string{
		"t1": {},
		"t2": {"gpuaffinity.io/network.tier-0": "leaf2"},
		"x9": {"gpuaffinity.io/network.tier-0": "stale"},
	}
	version := map[string]string{"t1": "1", "t2": "2", "x9": "3"}
	var patches []string
	conflictOnce := true
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		meta := func(n string) map[string]any {
			return map[string]any{"name": n, "resourceVersion": version[n], "labels": labels[n]}
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes":
			var items []any
			for _, n := range []string{"t1", "t2", "x9"} {
				items = append(items, map[string]any{"metadata": meta(n)})
			}
			json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{}, "items": items})
		case r.Method == http.MethodGet:
			n := strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/")
			json.NewEncoder(w).Encode(map[string]any{"metadata": meta(n)})
		case r.Method == http.MethodPatch:
			n := strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/")
			b, _ := io.ReadAll(r.Body)
			patches = append(patches, n+" "+string(b))
			if n == "t1" && conflictOnce {
				// Someone labelled t1 meanwhile, as the fleet would.
				conflictOnce = false
				labels["t1"] = map[string]string{"gpuaffinity.io/network.tier-0": "leaf1"}
				version["t1"] = "4"
				w.WriteHeader(http.StatusConflict)
				io.WriteString(w, `{"kind":"Status","message":"the object has been modified"}`)
				return
			}
			io.WriteString(w, "{}")
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, serviceAccount(t, srv, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []fleet.Node{
		{Name: "t1", Cloud: "baremetal", Tiers: []string{"leaf1"}},
		{Name: "t2", Cloud: "baremetal", Tiers: []string{"leaf2"}},
		{Name: "gone-1", Cloud: "baremetal", Tiers: []string{"leaf3"}},
	}
	r, err := Apply(context.Background(), c, nodes, fleet.SchemeCloud, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`t1 {"metadata":{"annotations":{"gpuaffinity.io/fleet-labels":"gpuaffinity.io/network.tier-0"},"labels":{"gpuaffinity.io/network.tier-0":"leaf1"},"resourceVersion":"1"}}`,
		`t1 {"metadata":{"annotations":{"gpuaffinity.io/fleet-labels":"gpuaffinity.io/network.tier-0"},"labels":{},"resourceVersion":"4"}}`,
		`t2 {"metadata":{"annotations":{"gpuaffinity.io/fleet-labels":"gpuaffinity.io/network.tier-0"},"labels":{},"resourceVersion":"2"}}`,
	}
	sort.Strings(patches) // two workers: t1's two patches keep their order
	if strings.Join(patches, "\n") != strings.Join(want, "\n") {
		t.Errorf("patches:\n%s\nwant:\n%s", strings.Join(patches, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Patched) != 2 || r.NoAgent != 1 || len(r.Absent) != 1 || r.Absent[0] != "gone-1" || len(r.Failed) != 0 {
		t.Errorf("result %+v", r)
	}
}

// TestApplyResultText: the problems, the summary line and the error of
// a run, as labels --apply prints them.
func TestApplyResultText(t *testing.T) {
	r := ApplyResult{Patched: []string{"a", "b"}, Unchanged: 3, Absent: []string{"x", "y"}, NoAgent: 4, Failed: []string{"node c: patch: 500"}}
	if got, want := r.Problems(), []string{"node c: patch: 500", "2 nodes of the fleet are not Kubernetes nodes: x, y"}; !slices.Equal(got, want) {
		t.Errorf("Problems = %q, want %q", got, want)
	}
	if got, want := r.Summary(), "2 nodes patched, 3 unchanged, 1 failed; 4 Kubernetes nodes without agent series left as they are"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if err := r.Err(); err == nil || err.Error() != "1 of 3 nodes not labelled" {
		t.Errorf("Err = %v", err)
	}
	if p, err := (ApplyResult{Patched: []string{"a"}}).Problems(), (ApplyResult{}).Err(); len(p) != 0 || err != nil {
		t.Errorf("a clean run: %q, %v", p, err)
	}
}

// TestApplyTextOwned fails when code outside this package words a run's
// result itself (cmd once counted the failures and named the absent
// nodes).
func TestApplyTextOwned(t *testing.T) {
	tell := regexp.MustCompile(`not Kubernetes nodes|nodes not labelled|len\(\w+\.Failed\)`)
	srcfiles.Product(t, "../..", func(p, text string) {
		b := []byte(text)
		if m := tell.Find(b); m != nil {
			t.Errorf("%s words a label run's result itself (%q): use ApplyResult's Problems, Summary, Err", p, m)
		}
	}, "fleet/kube")
}
