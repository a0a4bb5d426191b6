// Package ociimage assembles the gpuaffinity container image from built
// binaries, without a container engine or a registry: each binary, the
// shared libraries its ELF dynamic section names (found as the dynamic
// loader finds them, transitively), the loader itself and the symbolic
// links on their paths, in two layers (libraries, then binaries), with
// the entrypoint and OCI labels the Kubernetes DaemonSet relies on. It
// writes a docker-archive tarball that `podman load` and `docker load`
// take.
//
// libnvidia-ml is not in the image: go-nvml dlopens it at run time, and
// the NVIDIA container runtime mounts the host driver's copy into the
// container.
package ociimage
