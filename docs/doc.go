// Package docs holds gpuaffinity's documentation; it has no code. Its
// tests hold docs/architecture.md's package map and the README's Layout
// table to the packages and import edges `go list` reports, so that the
// map of the code cannot drift from the code.
package docs
