package audit

import (
	"regexp"
	"strings"
)

// The cgroup path shapes that place a process in a job. /proc/PID/cgroup
// (cgroups(7)) has one "hierarchy-ID:controllers:path" line per v1
// hierarchy, and "0::path" for v2; a path is relative to the reader's
// cgroup namespace, so an auditor in its own namespace sees less.
var (
	// slurmJob is a Slurm step's cgroup. cgroup v1 (Slurm's cgroup/v1
	// plugin, https://slurm.schedmd.com/cgroups.html):
	// /slurm/uid_<uid>/job_<id>/step_<step>/task_<n> in each controller's
	// hierarchy (/slurm_<nodename>/ with several slurmd per host);
	// cgroup v2 (https://slurm.schedmd.com/cgroup_v2.html, "Slurm
	// hierarchy"): /system.slice/slurmstepd.scope/job_<id>/step_<step>/user/task_<n>
	// (<nodename>_slurmstepd.scope with several slurmd). Steps are
	// numbers or batch, extern, interactive.
	slurmJob = regexp.MustCompile(`(?:^|/)(?:slurm(?:_[^/]+)?/uid_\d+|(?:[^/]+_)?slurmstepd\.scope)/job_(\d+)(?:/step_([^/]+))?(?:/|$)`)
	// kubePodfs is a pod's cgroup under the kubelet's cgroupfs driver
	// (kubelet pkg/kubelet/cm: qos_container_manager_linux.go puts
	// burstable and besteffort pods under kubepods/<qos>, guaranteed
	// ones under kubepods; pod_container_manager_linux.go names the pod's
	// "pod"+UID): /kubepods[/burstable|/besteffort]/pod<uid>/<container>.
	kubePodfs = regexp.MustCompile(`(?:^|/)kubepods(?:/(burstable|besteffort))?/pod([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:/|$)`)
	// kubePodSystemd is the same under the systemd driver
	// (cgroup_manager_linux.go ToSystemd: each level a slice named by
	// its parents joined with '-', the UID's '-' escaped to '_'):
	// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope.
	kubePodSystemd = regexp.MustCompile(`(?:^|/)kubepods(?:-(burstable|besteffort))?-pod([0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12})\.slice(?:/|$)`)
)

// placeCgroup picks the cgroup path that says most (the v2 line, else the
// v1 cpuset hierarchy's, else the first) and the Slurm step or
// Kubernetes pod any line places the process in.
func placeCgroup(data string) (path string, job *Job, pod *Pod) {
	rank := -1
	for line := range strings.SplitSeq(data, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		r := 0
		switch {
		case parts[0] == "0" && parts[1] == "":
			r = 2
		case strings.Contains(","+parts[1]+",", ",cpuset,"):
			r = 1
		}
		if r > rank {
			rank, path = r, parts[2]
		}
		if job == nil {
			job = slurmOf(parts[2])
		}
		if pod == nil {
			pod = podOf(parts[2])
		}
	}
	return path, job, pod
}

// slurmOf is the Slurm step of a cgroup path; nil for none.
func slurmOf(path string) *Job {
	m := slurmJob.FindStringSubmatch(path)
	if m == nil {
		return nil
	}
	return &Job{ID: m[1], Step: m[2]}
}

// podOf is the Kubernetes pod of a cgroup path; nil for none.
func podOf(path string) *Pod {
	if m := kubePodfs.FindStringSubmatch(path); m != nil {
		return &Pod{UID: m[2], QoS: qos(m[1])}
	}
	if m := kubePodSystemd.FindStringSubmatch(path); m != nil {
		return &Pod{UID: strings.ReplaceAll(m[2], "_", "-"), QoS: qos(m[1])}
	}
	return nil
}

// qos names a pod's QoS class from its QoS cgroup level: none is
// guaranteed.
func qos(level string) string {
	if level == "" {
		return "guaranteed"
	}
	return level
}
