// Package render turns a topology.Node into the pictures operators and
// tools read: a `nvidia-smi topo -m` style table (Table), a Graphviz
// digraph (DOT), a Mermaid flowchart (Mermaid) and the JSON contract
// "gpuaffinity.topology/v1" (JSON, documented in docs/topology-json.md).
//
// Every function here is a pure rendering: it reads only the Node it is
// given, writes only to the io.Writer, never reads a file, never computes
// paths or pairs (those are the model's), and prints the same bytes for the
// same Node. Names that come from the machine (interface names, model
// strings, the hostname) are escaped for each format, so a hostile name
// cannot break the syntax of the output.
//
// Errors: the only errors are the writer's, wrapped with the format's name
// ("render dot: ..."). A Node that is empty or partly filled renders
// without error; what is missing prints as "-" or "N/A".
//
// What not to add here: discovery, pairing, or anything a renderer would
// need to look up outside the Node. If a picture needs a fact the Node does
// not hold, the fact belongs in the model first.
package render
