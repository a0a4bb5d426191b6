// Package helm holds no code: its directory holds the Helm chart of
// `gpuaffinity agent`, gpuaffinity/ (README.md there; installed with
// `helm install gpuaffinity deploy/helm/gpuaffinity -n gpuaffinity
// --create-namespace`). The chart is the kustomize set of deploy/kubernetes
// with values; deploy/kubernetes stays the reference.
//
// Its tests render the chart with Helm's own library (helm.sh/helm/v4:
// the chart loader, value coalescing with the chart's values.schema.json,
// and the template engine, as `helm install` and `helm template` run them),
// decode every rendered object strictly into its Kubernetes or
// prometheus-operator API type, and hold the default render equal, object
// by object, to a kustomize build of deploy/kubernetes, and the render
// with fleet.enabled (the opt-in fleet labeller, off by default) equal to
// that and a kustomize build of deploy/kubernetes/fleet, and the render
// with jobs.enabled (the job audit, off by default: hostPID) equal to an
// overlay of deploy/kubernetes with its jobs component. They also render
// with every value changed and check that each change lands, that the
// schema refuses misspelt values, that README.md's values table lists
// every value, and that the chart's copy of the alerting rules is the
// rules file of deploy/kubernetes, byte for byte.
//
// Helm's lint package (pkg/chart/v2/lint) needs modules this repository
// does not require (k8s.io/apiserver, github.com/asaskevich/govalidator);
// TestLintLevel applies the checks of `helm lint` that matter here
// instead.
package helm
