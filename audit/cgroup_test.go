package audit

import "testing"

// The shapes, written from the sources cgroup.go cites: Slurm's cgroups
// and cgroup_v2 guides, the kubelet's cgroupfs and systemd drivers.
func TestPlaceCgroup(t *testing.T) {
	v1 := func(p string) string {
		return "12:cpuset:" + p + "\n11:memory:" + p + "\n1:name=systemd:/system.slice/slurmd.service\n"
	}
	for _, tc := range []struct {
		name, data, path string
		job              *Job
		pod              *Pod
	}{
		{"slurm v1", v1("/slurm/uid_1001/job_4242/step_0/task_1"), "/slurm/uid_1001/job_4242/step_0/task_1", &Job{"4242", "0"}, nil},
		{"slurm v1 multiple slurmd", v1("/slurm_node07/uid_5/job_9/step_batch/task_0"), "/slurm_node07/uid_5/job_9/step_batch/task_0", &Job{"9", "batch"}, nil},
		{"slurm v2", "0::/system.slice/slurmstepd.scope/job_77/step_3/user/task_0\n", "/system.slice/slurmstepd.scope/job_77/step_3/user/task_0", &Job{"77", "3"}, nil},
		{"slurm v2 extern", "0::/system.slice/slurmstepd.scope/job_77/step_extern/slurm_processes\n", "/system.slice/slurmstepd.scope/job_77/step_extern/slurm_processes", &Job{"77", "extern"}, nil},
		{"slurm v2 multiple slurmd", "0::/system.slice/n1_slurmstepd.scope/job_5/step_interactive/user/task_0\n", "/system.slice/n1_slurmstepd.scope/job_5/step_interactive/user/task_0", &Job{"5", "interactive"}, nil},
		{"slurmd itself", "0::/system.slice/slurmd.service\n", "/system.slice/slurmd.service", nil, nil},
		{"kube cgroupfs guaranteed", v1("/kubepods/pod7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6/abc"), "/kubepods/pod7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6/abc", nil, &Pod{"7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6", "guaranteed"}},
		{"kube cgroupfs besteffort v2", "0::/kubepods/besteffort/pod7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6/abc\n", "/kubepods/besteffort/pod7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6/abc", nil, &Pod{"7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6", "besteffort"}},
		{"kube systemd burstable", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5a4b3c2d_1e0f_4a9b_8c7d_6e5f4a3b2c1d.slice/crio-1f2e.scope\n",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5a4b3c2d_1e0f_4a9b_8c7d_6e5f4a3b2c1d.slice/crio-1f2e.scope", nil, &Pod{"5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d", "burstable"}},
		// Read from the agent's pod, in a cgroup namespace of its own
		// (cgroup v2): a process outside it shows its path relative to
		// the reader's namespace root, going up with ".." components
		// (cgroup_namespaces(7)); the shapes are still found.
		{"kube systemd from another pod's cgroup namespace", "0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod7f0c1e2a_3b4c_4d5e_8f60_718293a4b5c6.slice/cri-containerd-abc.scope\n",
			"/../../kubepods-besteffort.slice/kubepods-besteffort-pod7f0c1e2a_3b4c_4d5e_8f60_718293a4b5c6.slice/cri-containerd-abc.scope", nil, &Pod{"7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6", "besteffort"}},
		{"slurm v2 from a pod's cgroup namespace", "0::/../../../../system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
			"/../../../../system.slice/slurmstepd.scope/job_4242/step_0/user/task_0", &Job{"4242", "0"}, nil},
		{"user session", "0::/user.slice/user-1000.slice/session-2.scope\n", "/user.slice/user-1000.slice/session-2.scope", nil, nil},
		{"docker", v1("/docker/0123abcd"), "/docker/0123abcd", nil, nil},
		{"empty", "", "", nil, nil},
	} {
		path, job, pod := placeCgroup(tc.data)
		if path != tc.path || !eqPtr(job, tc.job) || !eqPtr(pod, tc.pod) {
			t.Errorf("%s: %q %+v %+v, want %q %+v %+v", tc.name, path, job, pod, tc.path, tc.job, tc.pod)
		}
	}
}

func eqPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
