package modcheck

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the product module's root, seen from this package.
const repoRoot = "../../.."

// deployOnly are the module path prefixes that belong to deploy/go.mod
// alone: what deploy/helm, deploy/kubernetes, deploy/internal/manifest,
// deploy/internal/ociimage and deploy/internal/pkgbuild use, and the
// modules those pull in. A prefix matches the path itself and the paths
// under it.
var deployOnly = []string{
	"helm.sh",                                // the chart's tests render it with Helm
	"k8s.io",                                 // api, apimachinery, client-go, ...
	"sigs.k8s.io",                            // kustomize, json, yaml, structured-merge-diff
	"github.com/prometheus-operator",         // ServiceMonitor and PrometheusRule types
	"github.com/goreleaser",                  // nFPM, for the .deb and .rpm
	"github.com/google/go-containerregistry", // the container image
	"github.com/go-logr",                     // kustomize's and apimachinery's logger
}

func deployOnlyModule(path string) bool {
	return slices.ContainsFunc(deployOnly, func(p string) bool {
		return path == p || strings.HasPrefix(path, p+"/")
	})
}

// goCmd runs go in the product module with the workspace off, so that
// deploy/go.mod's requirements cannot stand in for the product's.
func goCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// TestGoModLean fails when the product's go.mod requires, directly or
// indirectly, a module only deploy/ needs: such a requirement goes in
// deploy/go.mod.
func TestGoModLean(t *testing.T) {
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path     string
			Version  string
			Indirect bool
		}
	}
	if err := json.Unmarshal(goCmd(t, "mod", "edit", "-json", "go.mod"), &mod); err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	if mod.Module.Path != "github.com/gpuaffinity/gpuaffinity" {
		t.Fatalf("%s/go.mod is module %q, want the product", repoRoot, mod.Module.Path)
	}
	if len(mod.Require) == 0 {
		t.Fatal("go.mod requires nothing: the parse is wrong")
	}
	for _, r := range mod.Require {
		if deployOnlyModule(r.Path) {
			t.Errorf("go.mod requires %s %s (indirect: %t): only deploy/ needs it; it belongs in deploy/go.mod", r.Path, r.Version, r.Indirect)
		}
	}
}

// TestDepsLean fails when a package of the product module, or one of
// its tests, imports a package from a module only deploy/ needs, even
// through another module.
func TestDepsLean(t *testing.T) {
	out := goCmd(t, "list", "-deps", "-test", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", "./...")
	pkgs := 0
	for line := range strings.Lines(string(out)) {
		pkg, mod, _ := strings.Cut(strings.TrimSpace(line), " ")
		pkgs++
		if deployOnlyModule(mod) {
			t.Errorf("go list -deps -test ./... has %s, from %s: only deploy/ may need it", pkg, mod)
		}
	}
	if pkgs < 100 {
		t.Fatalf("go list -deps -test ./... listed %d packages, want the product's hundreds", pkgs)
	}
}
