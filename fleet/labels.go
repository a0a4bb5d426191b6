package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/k8slabel"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Scheme is a set of Kubernetes node label keys the fleet's placement is
// written in.
type Scheme string

const (
	// SchemeCloud (the default, also the empty Scheme) uses the cloud's own
	// keys where the cloud has them, so that pods already written for GKE
	// or OKE affinity work unchanged, GPU Feature Discovery's key for the
	// NVLink clique, and gpuaffinity.io keys for the rest:
	//
	//   - gcp: cloud.google.com/gce-topology-subblock = Tiers[0],
	//     cloud.google.com/gce-topology-block = Tiers[1],
	//     cloud.google.com/gce-topology-host = HostID (the keys GKE sets on
	//     A3 Ultra and A4 nodes: cloud.google.com/ai-hypercomputer/docs/
	//     workloads/schedule-gke-workloads-tas; topograph
	//     docs/reference/node-labels.md, "Without Topograph").
	//   - oci: oci.oraclecloud.com/rdma.local_block_id = Tiers[0],
	//     rdma.network_block_id = Tiers[1], rdma.hpc_island_id = Tiers[2],
	//     rdma.host_id = HostID (the keys OKE sets at bootstrap from
	//     rdmaTopologyData: OguzPastirmaci/misc oke-topology-aware/README.md,
	//     which also names local block tier 0, network block tier 1, HPC
	//     island tier 2).
	//   - any tier the cloud has no key for (bare metal and a site's own
	//     switches, aws, azure, a GCP or OCI tier beyond those above):
	//     gpuaffinity.io/network.tier-N, N numbered as topograph numbers
	//     fabric tiers (0 = the switch closest to the node); a HostID
	//     outside gcp and oci: gpuaffinity.io/host-id.
	//   - Clique: nvidia.com/gpu.clique, "<ClusterUUID>.<CliqueID>", the
	//     label and form GFD writes (NVIDIA/k8s-device-plugin
	//     internal/lm/imex.go). Where GFD runs it writes the same value, so
	//     the two agree.
	//   - GPUMemoryFabric (OCI GB200): gpuaffinity.io/gpu-memory-fabric; no
	//     OCI node label for it is documented.
	//
	// gpuaffinity.io/nvlink.clique is not written: the agent's NFD feature
	// file writes it (health.NFDFeatures), and nfd-master owns the labels
	// of its feature files, so a second writer would only race it.
	SchemeCloud Scheme = "cloud"
	// SchemeTopograph writes the labels NVIDIA topograph's Kubernetes
	// engine writes (docs/reference/node-labels.md; pkg/engines/k8s/
	// labeler.go; pkg/topology/topology.go): fabric.topograph.run/tier-N
	// = Tiers[N], tier 0 the switch closest to the node (topograph's GCP
	// provider puts the sub-block at tier 0, its OCI provider the local
	// block, as Node.Tiers does), and accelerator.topograph.run/domain =
	// Clique, or GPUMemoryFabric where the node has no clique (topograph's
	// OCI provider's domain is GpuMemoryFabricId). HostID is not written:
	// topograph has no host label.
	SchemeTopograph Scheme = "topograph"
)

// Label keys, sources in the Scheme constants' comments.
const (
	keyGCPSubblock     = "cloud.google.com/gce-topology-subblock"
	keyGCPBlock        = "cloud.google.com/gce-topology-block"
	keyGCPHost         = "cloud.google.com/gce-topology-host"
	keyOCILocalBlock   = "oci.oraclecloud.com/rdma.local_block_id"
	keyOCINetworkBlock = "oci.oraclecloud.com/rdma.network_block_id"
	keyOCIHPCIsland    = "oci.oraclecloud.com/rdma.hpc_island_id"
	keyOCIHost         = "oci.oraclecloud.com/rdma.host_id"
	keyGFDClique       = "nvidia.com/gpu.clique"
	keyOwnTierPrefix   = "gpuaffinity.io/network.tier-"
	keyOwnHost         = "gpuaffinity.io/host-id"
	keyOwnMemFabric    = "gpuaffinity.io/gpu-memory-fabric"
	keyTopographTier   = "fabric.topograph.run/tier-"
	keyTopographDomain = "accelerator.topograph.run/domain"
)

// ParseScheme returns the Scheme s names: "cloud" (or ""), "topograph".
func ParseScheme(s string) (Scheme, error) {
	switch Scheme(s) {
	case "", SchemeCloud:
		return SchemeCloud, nil
	case SchemeTopograph:
		return SchemeTopograph, nil
	}
	return "", fmt.Errorf("label scheme %q: want cloud or topograph", s)
}

// Label is one Kubernetes node label.
type Label struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Labels returns node n's placement labels in scheme s, sorted by key,
// and warnings naming the node for what it could not label as given.
// Empty values give no label. A value Kubernetes would refuse (over 63
// characters, or anything but [A-Za-z0-9._-] with an alphanumeric at
// both ends) is never passed through: it is replaced by LabelValue's
// hash, so that nodes sharing a switch still share a value. Labels does
// not check n.Name; the writers do.
func Labels(n Node, s Scheme) ([]Label, []string) {
	s, err := ParseScheme(string(s))
	if err != nil {
		return nil, []string{fmt.Sprintf("node %q: %v", n.Name, err)}
	}
	var ls []Label
	var warns []string
	add := func(key, value string) {
		if value == "" {
			return
		}
		v, ok := LabelValue(value)
		if !ok && len(value) <= k8slabel.MaxValue {
			// Topograph hashes only values over 63 characters (long
			// OCIDs are normal); a short value that is still invalid is
			// hostile or broken, so it is worth a word.
			warns = append(warns, fmt.Sprintf("node %q: %s value %.64q is not a valid label value; labeled %s",
				n.Name, key, value, v))
		}
		ls = append(ls, Label{Key: key, Value: v})
	}
	switch s {
	case SchemeTopograph:
		for i, t := range n.Tiers {
			add(keyTopographTier+strconv.Itoa(i), t)
		}
		if n.Clique != "" {
			add(keyTopographDomain, n.Clique)
		} else {
			add(keyTopographDomain, n.GPUMemoryFabric)
		}
	default:
		var tierKeys []string
		hostKey := keyOwnHost
		switch topology.Cloud(n.Cloud) {
		case topology.CloudGCP:
			tierKeys = []string{keyGCPSubblock, keyGCPBlock}
			hostKey = keyGCPHost
		case topology.CloudOCI:
			tierKeys = []string{keyOCILocalBlock, keyOCINetworkBlock, keyOCIHPCIsland}
			hostKey = keyOCIHost
		}
		for i, t := range n.Tiers {
			key := keyOwnTierPrefix + strconv.Itoa(i)
			if i < len(tierKeys) {
				key = tierKeys[i]
			}
			add(key, t)
		}
		add(hostKey, n.HostID)
		add(keyGFDClique, n.Clique)
		add(keyOwnMemFabric, n.GPUMemoryFabric)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Key < ls[j].Key })
	return ls, warns
}

// maxLabelTiers is how many tiers a node carries (placement_info's
// tier0 to tier2), so how many tier keys a scheme owns.
const maxLabelTiers = 3

// ownedKeys are the keys Labels can give a node of n's cloud in scheme s.
func ownedKeys(n Node, s Scheme) []string {
	var keys []string
	if s == SchemeTopograph {
		for i := range maxLabelTiers {
			keys = append(keys, keyTopographTier+strconv.Itoa(i))
		}
		return append(keys, keyTopographDomain)
	}
	var tierKeys []string
	hostKey := keyOwnHost
	switch topology.Cloud(n.Cloud) {
	case topology.CloudGCP:
		tierKeys, hostKey = []string{keyGCPSubblock, keyGCPBlock}, keyGCPHost
	case topology.CloudOCI:
		tierKeys, hostKey = []string{keyOCILocalBlock, keyOCINetworkBlock, keyOCIHPCIsland}, keyOCIHost
	}
	for i := range maxLabelTiers {
		if i < len(tierKeys) {
			keys = append(keys, tierKeys[i])
		} else {
			keys = append(keys, keyOwnTierPrefix+strconv.Itoa(i))
		}
	}
	return append(keys, hostKey, keyGFDClique, keyOwnMemFabric)
}

// ForeignOwner names the component that owns key where another one does
// (GKE's topology keys, OKE's RDMA keys, GPU Feature Discovery's clique):
// a label of such a key is set where the node lacks it, never changed
// where another component set it, and never deleted. "" for the keys
// gpuaffinity or topograph's scheme own.
func ForeignOwner(key string) string {
	switch key {
	case keyGCPSubblock, keyGCPBlock, keyGCPHost:
		return "GKE"
	case keyOCILocalBlock, keyOCINetworkBlock, keyOCIHPCIsland, keyOCIHost:
		return "OKE"
	case keyGFDClique:
		return "GPU Feature Discovery"
	}
	return ""
}

// Removals are the keys scheme s gives nodes of n's cloud that its labels
// ls do not set and that no other component owns (ForeignOwner), sorted:
// labels an earlier run may have set that no longer hold (a tray out of
// its NVLink domain keeps no memory-fabric label). A node whose placement
// is empty (Node.PlacementEmpty: its agent has not read one yet) or
// stale (its series missing now) has none: a label is never deleted
// because a node's series say nothing.
func Removals(n Node, s Scheme, ls []Label) []string {
	s, err := ParseScheme(string(s))
	if err != nil || n.Stale || n.PlacementEmpty() {
		return nil
	}
	set := make(map[string]bool, len(ls))
	for _, l := range ls {
		set[l.Key] = true
	}
	var out []string
	for _, k := range ownedKeys(n, s) {
		if !set[k] && ForeignOwner(k) == "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ownPrefix is gpuaffinity's own label namespace: no other component
// sets keys under it.
const ownPrefix = "gpuaffinity.io/"

// OwnedAnnotation is the node annotation `labels --apply` records the
// label keys it set in (comma-separated, sorted): the keys it may later
// change or delete. A key it did not set is never deleted.
const OwnedAnnotation = "gpuaffinity.io/fleet-labels"

// NodeMeta is what Reconcile needs of a Kubernetes node: its name, the
// labels of the keys a scheme can set (LabelKeys), the keys
// OwnedAnnotation lists, and the resourceVersion the patch is made
// against.
type NodeMeta struct {
	Name            string
	Labels          map[string]string
	Owned           []string
	OwnedSet        bool // the node has the annotation
	ResourceVersion string
}

// LabelKeys reports whether a node label key is one some scheme can set:
// the labels Reconcile reads.
func LabelKeys(key string) bool {
	return ForeignOwner(key) != "" || strings.HasPrefix(key, ownPrefix) ||
		strings.HasPrefix(key, keyTopographTier) || key == keyTopographDomain
}

// ParseOwned reads OwnedAnnotation's value.
func ParseOwned(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// Reconcile returns the change that gives node cur (as the API server
// has it) the labels of fleet node n in scheme s, and whether there is
// one. It sets every label of Labels(n, s) the node lacks or holds with
// another value, except a key another component owns (ForeignOwner)
// that the node holds and gpuaffinity did not set: that one stays, and
// a warning says the two disagree. It deletes a key only where
// gpuaffinity set it (OwnedAnnotation lists it, or it is one of
// gpuaffinity.io's own), no other component owns it, n is scraped now
// and its placement says something: a node whose series are missing
// (Stale: its placement kept from the lookback) or whose agent has not
// read a placement yet keeps every label. The patch records the keys
// gpuaffinity now owns on the node.
func Reconcile(n Node, s Scheme, cur NodeMeta) (Patch, bool, []string) {
	ls, warns := Labels(n, s)
	p := Patch{Node: cur.Name, Labels: map[string]string{}, ResourceVersion: cur.ResourceVersion}
	owned := make(map[string]bool, len(cur.Owned))
	for _, k := range cur.Owned {
		owned[k] = true
	}
	want := make(map[string]bool, len(ls))
	for _, l := range ls {
		want[l.Key] = true
		v, has := cur.Labels[l.Key]
		switch {
		case has && v == l.Value:
			if strings.HasPrefix(l.Key, ownPrefix) {
				owned[l.Key] = true // gpuaffinity's own namespace: an earlier run's
			}
		case has && ForeignOwner(l.Key) != "" && !owned[l.Key]:
			warns = append(warns, fmt.Sprintf("node %q: label %s=%q is %s's; left as it is (the agent's placement says %q)",
				cur.Name, l.Key, clipValue(v), ForeignOwner(l.Key), l.Value))
		default:
			p.Labels[l.Key] = l.Value
			p.labels = append(p.labels, l)
			owned[l.Key] = true
		}
	}
	if !n.Stale && !n.PlacementEmpty() {
		for _, k := range ownedKeys(n, s) {
			if strings.HasPrefix(k, ownPrefix) {
				if _, has := cur.Labels[k]; has {
					owned[k] = true // gpuaffinity's own namespace: set by an earlier run
				}
			}
		}
		for k := range owned {
			if want[k] || ForeignOwner(k) != "" {
				continue
			}
			if _, has := cur.Labels[k]; has {
				p.Remove = append(p.Remove, k)
			}
			delete(owned, k)
		}
	}
	sort.Strings(p.Remove)
	keys := make([]string, 0, len(owned))
	for k := range owned {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if v := strings.Join(keys, ","); v != strings.Join(cur.Owned, ",") || (len(keys) > 0) != cur.OwnedSet {
		p.Owned = &v
	}
	return p, len(p.Labels) > 0 || len(p.Remove) > 0 || p.Owned != nil, warns
}

// clipValue is a label value for a message.
func clipValue(v string) string {
	if len(v) > 64 {
		return v[:64] + "…"
	}
	return v
}

// LabelValue returns v as a Kubernetes label value and whether v was one
// already: k8slabel.Value with its hash. A value that is not (over 63
// characters, or with characters or ends Kubernetes refuses) becomes "x"
// and the lowercase hex of its FNV-64a hash, the form NVIDIA topograph
// gives values over 63 characters (pkg/engines/k8s/labeler.go
// checkLabel; docs/reference/node-labels.md, "Label value behavior"), so
// a long switch name gets the value topograph would give it. Topograph
// passes a short invalid value through, for the API server to refuse;
// LabelValue hashes it too.
func LabelValue(v string) (string, bool) { return k8slabel.Value(v, true) }

// nodeNameRE is a DNS-1123 subdomain, the form of a Kubernetes node name
// (dns1123SubdomainFmt, k8s.io/apimachinery pkg/util/validation).
var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// ValidNodeName reports whether name can be a Kubernetes node's name.
func ValidNodeName(name string) bool {
	return len(name) <= 253 && nodeNameRE.MatchString(name)
}

// nodeLabelSet is one node's labels, for the writers.
type nodeLabelSet struct {
	name   string
	labels []Label
	remove []string // Removals
}

// labelSets returns the labels of the nodes the writers write, in the
// order given, and the warnings: a node whose name is not a valid
// Kubernetes node name is skipped (labeling it would fail or, quoted
// wrongly, do something else), as is a second node of one name and a
// node with no labels.
func labelSets(nodes []Node, s Scheme) ([]nodeLabelSet, []string, error) {
	s, err := ParseScheme(string(s))
	if err != nil {
		return nil, nil, err
	}
	var sets []nodeLabelSet
	var warns []string
	seen := make(map[string]bool)
	for _, n := range nodes {
		if !ValidNodeName(n.Name) {
			warns = append(warns, fmt.Sprintf("node %q (target %q): not a valid Kubernetes node name; skipped", n.Name, n.Target))
			continue
		}
		if seen[n.Name] {
			warns = append(warns, fmt.Sprintf("node %q (target %q): a second node of this name; skipped", n.Name, n.Target))
			continue
		}
		seen[n.Name] = true
		ls, w := Labels(n, s)
		warns = append(warns, w...)
		if len(ls) == 0 {
			warns = append(warns, fmt.Sprintf("node %q: no placement to label", n.Name))
		}
		sets = append(sets, nodeLabelSet{name: n.Name, labels: ls, remove: Removals(n, s, ls)})
	}
	return sets, warns, nil
}

// LabelFormats are the forms WriteLabels writes: "kubectl"
// (WriteKubectl) and "json" (WriteJSON).
var LabelFormats = []string{"kubectl", "json"}

// CheckLabelFormat refuses a format WriteLabels does not write.
func CheckLabelFormat(format string) error {
	if !slices.Contains(LabelFormats, format) {
		return fmt.Errorf("%q: want kubectl or json", format)
	}
	return nil
}

// WriteLabels writes the nodes' labels in format (LabelFormats), as
// WriteKubectl or WriteJSON do, and returns the warnings.
func WriteLabels(w io.Writer, nodes []Node, s Scheme, format string) ([]string, error) {
	if err := CheckLabelFormat(format); err != nil {
		return nil, err
	}
	if format == "json" {
		return WriteJSON(w, nodes, s)
	}
	return WriteKubectl(w, nodes, s)
}

// WriteKubectl writes one `kubectl label node NAME --overwrite K=V ...`
// line per node with labels, every word shell-quoted where it is not
// plainly safe, and returns the warnings. The commands only set labels:
// removing stale ones (Removals) is for WriteJSON's list and `labels
// --apply`, since kubectl reports every absent label it is asked to
// remove. It fails only on an unknown
// scheme or a failed write.
func WriteKubectl(w io.Writer, nodes []Node, s Scheme) ([]string, error) {
	sets, warns, err := labelSets(nodes, s)
	if err != nil {
		return nil, err
	}
	b := bufio.NewWriter(w)
	for _, set := range sets {
		if len(set.labels) == 0 {
			continue
		}
		b.WriteString("kubectl label node " + shellQuote(set.name) + " --overwrite")
		for _, l := range set.labels {
			b.WriteString(" " + shellQuote(l.Key+"="+l.Value))
		}
		b.WriteString("\n")
	}
	if err := b.Flush(); err != nil {
		return warns, fmt.Errorf("writing kubectl label commands: %w", err)
	}
	return warns, nil
}

// shellQuote returns s as one POSIX shell word: s itself when it holds
// only characters no shell treats specially, else s in single quotes,
// each ' written as (close the quotes, an escaped ', reopen them):
//
//	'\''
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/=:@+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Patch is one node's label change: an entry of WriteJSON's list, and
// what `labels --apply` sends (Body).
type Patch struct {
	Node   string            `json:"node"`
	Labels map[string]string `json:"labels"`
	// Remove are the keys to delete: in WriteJSON's list Removals, in
	// Reconcile's those gpuaffinity set that the node no longer has.
	Remove []string `json:"remove,omitempty"`
	// Owned, when set, is OwnedAnnotation's new value ("" removes it);
	// ResourceVersion the node's version the patch was made against (the
	// API server refuses it, 409, where the node changed since).
	Owned           *string `json:"-"`
	ResourceVersion string  `json:"-"`
	labels          []Label
}

// Body is the patch's JSON merge patch: MergePatch's, with the
// annotation and the resourceVersion precondition where set.
func (p Patch) Body() []byte {
	meta := map[string]any{"labels": labelMap(p.labels, p.Remove)}
	if p.Owned != nil {
		var v any = *p.Owned
		if *p.Owned == "" {
			v = nil
		}
		meta["annotations"] = map[string]any{OwnedAnnotation: v}
	}
	if p.ResourceVersion != "" {
		meta["resourceVersion"] = p.ResourceVersion
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return b
}

// Patches returns the label change of every node the writers write, in
// the nodes' order (labelSets: a name Kubernetes cannot take and a second
// node of one name are left out, with a warning), and the warnings. It
// fails only on an unknown scheme.
func Patches(nodes []Node, s Scheme) ([]Patch, []string, error) {
	sets, warns, err := labelSets(nodes, s)
	if err != nil {
		return nil, nil, err
	}
	list := make([]Patch, 0, len(sets))
	for _, set := range sets {
		if p, ok := set.patch(); ok {
			list = append(list, p)
		}
	}
	return list, warns, nil
}

// patch is the set's Patch; false where it neither sets nor removes.
func (set nodeLabelSet) patch() (Patch, bool) {
	if len(set.labels) == 0 && len(set.remove) == 0 {
		return Patch{}, false
	}
	p := Patch{Node: set.name, Labels: make(map[string]string, len(set.labels)), Remove: set.remove, labels: set.labels}
	for _, l := range set.labels {
		p.Labels[l.Key] = l.Value
	}
	return p, true
}

// WriteJSON writes Patches as a JSON list, [{"node": NAME, "labels":
// {KEY: VALUE, ...}, "remove": [KEY, ...]}, ...], and returns the
// warnings. It fails only on an unknown scheme or a failed write.
func WriteJSON(w io.Writer, nodes []Node, s Scheme) ([]string, error) {
	sets, warns, err := labelSets(nodes, s)
	if err != nil {
		return nil, err
	}
	// One entry at a time, as json.MarshalIndent(Patches(...), "", "  ")
	// would write the whole: a fleet's list is never held.
	b := bufio.NewWriter(w)
	b.WriteString("[")
	n := 0
	for _, set := range sets {
		p, ok := set.patch()
		if !ok {
			continue
		}
		e, err := json.MarshalIndent(p, "  ", "  ")
		if err != nil {
			return warns, fmt.Errorf("encoding label patch list: %w", err)
		}
		if n > 0 {
			b.WriteString(",")
		}
		n++
		b.WriteString("\n  ")
		b.Write(e)
	}
	if n > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	if err := b.Flush(); err != nil {
		return warns, fmt.Errorf("writing label patch list: %w", err)
	}
	return warns, nil
}

// MergePatch returns the body of a Kubernetes JSON merge patch
// (Content-Type application/merge-patch+json) that sets labels on a node
// and deletes the labels remove names (RFC 7386: a null member deletes),
// {"metadata":{"labels":{KEY:VALUE,...,GONE:null}}}, keys sorted. It
// leaves the node's other labels alone.
func MergePatch(labels []Label, remove ...string) []byte {
	// A map of strings and nils always encodes (invalid UTF-8 becomes
	// U+FFFD).
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labelMap(labels, remove)}})
	return b
}

// labelMap is a merge patch's labels: the values to set, null for the
// keys to delete.
func labelMap(labels []Label, remove []string) map[string]any {
	m := make(map[string]any, len(labels)+len(remove))
	for _, k := range remove {
		m[k] = nil
	}
	for _, l := range labels {
		m[l.Key] = l.Value
	}
	return m
}
