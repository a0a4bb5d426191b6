// Package slurm holds no code: its directory ships the Slurm integration
// (gpuaffinity-healthcheck.sh, gpuaffinity-prolog.sh, gpuaffinity.default,
// slurm.conf.example, gres.conf.example; docs/slurm.md), and its test runs
// them under a real one-node Slurm cluster (slurmctld, slurmd, munged) on
// localhost.
package slurm
