// Package audit holds the processes running on a node's GPUs to the
// GPUs' locality: for each process a GPU source lists (NVML's running
// compute and graphics processes, KFD's per-process entries under
// /sys/class/kfd/kfd/proc), it reads /proc/PID under the root (status,
// cgroup, environ, the threads' status), names its user and its Slurm
// job or Kubernetes pod, and gives a verdict: aligned, partly,
// misaligned, unbound or unknown, with the reason. Where the environment
// is readable, nccl.CheckEnv holds its device and NIC variables to what
// `gpuaffinity env` would set (one set of rules).
//
// Every file is read through internal/rootfs, so a root other than /
// replays a recorded node; what could not be read is said, with why
// (permission, the process ended), never guessed. The rules and their
// limits: docs/audit.md.
//
// prometheus/procfs parses the same files, but not here: its ProcStatus
// has no Mems_allowed_list, and it opens paths under a mount point with
// os.Open, which would bypass the root reader's bounds and
// links-beneath-the-root rule and could not read an in-memory root. The
// parsing needed (a few "Key:\tvalue" lines, the cgroup lines, NUL-split
// environ) is a handful of lines.
package audit
