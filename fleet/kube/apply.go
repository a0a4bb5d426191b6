package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuaffinity/gpuaffinity/fleet"
)

// ApplyOptions shape Apply.
type ApplyOptions struct {
	// Workers is how many patches are in flight at once; default 8.
	Workers int
	// Timeout bounds one request; default 30 s.
	Timeout time.Duration
}

// ApplyResult is what Apply did.
type ApplyResult struct {
	// Patched are the nodes whose labels changed, sorted; Unchanged
	// counts those that already had them.
	Patched   []string
	Unchanged int
	// Absent are the fleet's nodes with no Kubernetes node of their
	// name, sorted.
	Absent []string
	// NoAgent counts the Kubernetes nodes with no node in the fleet (no
	// agent series, or refused): left as they are.
	NoAgent int
	// Failed are the nodes that could not be patched, one line each.
	Failed []string
	// Warnings are fleet.Reconcile's (labels another component owns
	// that disagree) and the names Kubernetes cannot take.
	Warnings []string
}

// Problems are what the operator is warned of after a run, in order: a
// line per node that could not be patched (Failed), then one naming the
// fleet's nodes that are not Kubernetes nodes (Absent).
func (r ApplyResult) Problems() []string {
	out := slices.Clone(r.Failed)
	if len(r.Absent) > 0 {
		out = append(out, fmt.Sprintf("%d nodes of the fleet are not Kubernetes nodes: %s", len(r.Absent), strings.Join(r.Absent, ", ")))
	}
	return out
}

// Summary is the run in one line: how many nodes were patched, left
// unchanged and failed, and how many Kubernetes nodes had no agent.
func (r ApplyResult) Summary() string {
	return fmt.Sprintf("%d nodes patched, %d unchanged, %d failed; %d Kubernetes nodes without agent series left as they are",
		len(r.Patched), r.Unchanged, len(r.Failed), r.NoAgent)
}

// Err is the run's failure: nil when every node it meant to patch was
// patched.
func (r ApplyResult) Err() error {
	if len(r.Failed) > 0 {
		return fmt.Errorf("%d of %d nodes not labelled", len(r.Failed), len(r.Failed)+len(r.Patched))
	}
	return nil
}

// maxConflictTries is how many times a node that changed while it was
// being patched is read and patched anew.
const maxConflictTries = 3

// Apply gives every Kubernetes node that is in the fleet the labels of
// its placement in scheme s, as fleet.Reconcile decides them against the
// node's labels and OwnedAnnotation: it lists the nodes' metadata once,
// patches only the nodes whose labels differ (one JSON merge patch each,
// with the resourceVersion it was made against; a node that changed in
// between is read again and patched anew), and never touches a node the
// fleet does not hold. It fails only where the nodes cannot be listed.
func Apply(ctx context.Context, c *Client, nodes []fleet.Node, s fleet.Scheme, o ApplyOptions) (ApplyResult, error) {
	var r ApplyResult
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	byName := make(map[string]fleet.Node, len(nodes))
	for _, n := range nodes {
		if !fleet.ValidNodeName(n.Name) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("node %.80q (target %.80q): not a valid Kubernetes node name; skipped", n.Name, n.Target))
			continue
		}
		byName[n.Name] = n
	}
	seen := make(map[string]bool, len(byName))
	type job struct {
		n fleet.Node
		p fleet.Patch
	}
	var jobs []job
	lctx, cancel := context.WithTimeout(ctx, max(o.Timeout, 5*time.Minute))
	err := c.ListNodes(lctx, fleet.LabelKeys, fleet.OwnedAnnotation, func(kn Node) error {
		n, ok := byName[kn.Name]
		if !ok {
			r.NoAgent++
			return nil
		}
		seen[kn.Name] = true
		p, changed, warns := fleet.Reconcile(n, s, meta(kn))
		r.Warnings = append(r.Warnings, warns...)
		if changed {
			jobs = append(jobs, job{n, p})
		} else {
			r.Unchanged++
		}
		return nil
	})
	cancel()
	if err != nil {
		return r, err
	}
	for name := range byName {
		if !seen[name] {
			r.Absent = append(r.Absent, name)
		}
	}
	sort.Strings(r.Absent)

	var mu sync.Mutex
	work := make(chan job)
	var wg sync.WaitGroup
	for range min(o.Workers, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				err := c.patchReconciled(ctx, j.n, s, j.p, o.Timeout)
				mu.Lock()
				if err != nil {
					r.Failed = append(r.Failed, err.Error())
				} else {
					r.Patched = append(r.Patched, j.n.Name)
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	sort.Strings(r.Patched)
	sort.Strings(r.Failed)
	return r, nil
}

// patchReconciled sends p; where the node changed since it was read, it
// reads it again and sends the patch Reconcile makes then.
func (c *Client) patchReconciled(ctx context.Context, n fleet.Node, s fleet.Scheme, p fleet.Patch, timeout time.Duration) error {
	for try := 1; ; try++ {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.PatchNode(pctx, p.Node, p.Body())
		cancel()
		if !errors.Is(err, ErrConflict) || try == maxConflictTries {
			return err
		}
		gctx, cancel := context.WithTimeout(ctx, timeout)
		kn, gerr := c.GetNode(gctx, p.Node, fleet.LabelKeys, fleet.OwnedAnnotation)
		cancel()
		if gerr != nil {
			return gerr
		}
		var changed bool
		if p, changed, _ = fleet.Reconcile(n, s, meta(kn)); !changed {
			return nil
		}
	}
}

// meta is a listed node as fleet.Reconcile takes it.
func meta(kn Node) fleet.NodeMeta {
	v, set := kn.Annotations[fleet.OwnedAnnotation]
	return fleet.NodeMeta{Name: kn.Name, Labels: kn.Labels, Owned: fleet.ParseOwned(v), OwnedSet: set, ResourceVersion: kn.ResourceVersion}
}
