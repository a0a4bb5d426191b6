// Package k8slabel holds the one rule for a Kubernetes label value, which
// the NFD feature file (topology.NVLinkClique) and the fleet's node labels
// (fleet.Labels) both write. It has no dependencies, so the model can use
// it without I/O.
package k8slabel

import (
	"fmt"
	"hash/fnv"
	"regexp"
)

// MaxValue is the Kubernetes label value limit, in bytes.
const MaxValue = 63

// valueRE is a valid non-empty Kubernetes label value (labelValueFmt,
// k8s.io/apimachinery pkg/api/validate/content/kube.go): alphanumerics at
// both ends, '-', '_' and '.' between.
var valueRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// Value returns v as a Kubernetes label value and whether v was a
// non-empty one already (at most MaxValue bytes, the characters and ends
// k8s.io/apimachinery's IsValidLabelValue accepts).
//
// hash says what becomes of a v that is not. With hash, it is "x" and the
// lowercase hex of v's FNV-64a hash, the form NVIDIA topograph gives
// values over 63 characters (pkg/engines/k8s/labeler.go checkLabel), so
// that nodes sharing a long switch name still share a value: the fleet's
// placement labels. Without, it is "": no label, for a value that must be
// exactly what it names or nothing (the NVLink clique, where a hash would
// be a clique no GPU reports).
func Value(v string, hash bool) (string, bool) {
	if len(v) <= MaxValue && valueRE.MatchString(v) {
		return v, true
	}
	if !hash {
		return "", false
	}
	h := fnv.New64a()
	h.Write([]byte(v))
	return fmt.Sprintf("x%x", h.Sum64()), false
}
