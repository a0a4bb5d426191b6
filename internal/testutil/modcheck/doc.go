// Package modcheck holds no code, only the test that keeps the product
// module lean: its go.mod requires, and its packages and their tests
// import, none of the modules that only deploy/'s tests and release
// tools need (Kubernetes, Helm, kustomize, the Prometheus operator,
// nFPM, go-containerregistry). Those live in the second module,
// github.com/gpuaffinity/gpuaffinity/deploy (deploy/go.mod, go.work at
// the repository's root).
package modcheck
