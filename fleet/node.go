package fleet

import "github.com/gpuaffinity/gpuaffinity/fleet/nodeview"

// Node and Fact are package nodeview's, which the agent shares (it
// describes its own node with nodeview.Describe) without linking the
// writers of this package.
type (
	Node = nodeview.Node
	Fact = nodeview.Fact
)
