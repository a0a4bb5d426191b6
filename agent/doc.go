// Package agent will hold the gpuaffinity daemon (`gpuaffinity agent`):
// the rescan loop, the HTTP endpoints and the files under /run. It is
// empty until the agent issue lands; the folder is part of the layout in
// DESIGN.md.
package agent
