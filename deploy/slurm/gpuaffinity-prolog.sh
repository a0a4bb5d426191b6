#!/bin/sh
# gpuaffinity-prolog: Slurm Prolog health gate (docs/slurm.md).
# Install as /usr/local/sbin/gpuaffinity-prolog (mode 0755); the .deb and .rpm
# install it as /usr/libexec/gpuaffinity/gpuaffinity-prolog.
#
# slurmd runs this as root before a job starts on the node (at allocation
# with PrologFlags=Alloc). gpuaffinity check reads the allocation's GPUs
# from SLURM_JOB_GPUS and checks only those GPUs and the NICs paired with
# them (the whole node for a job without GPUs). Exit 0 lets the job start.
# Any other exit (1 unhealthy, 2 could not check) fails the prolog: Slurm
# drains the node with the reason "Prolog error", requeues the batch job
# held (JobState=PENDING Reason=launch_failed_requeued_held) and slurmd
# logs what this printed ("error: prolog failed: rc:1 output:ERROR:  nhc:
# Health check failed:  check_gpuaffinity:  <check>: <reason>"). This script does
# not call scontrol, as Slurm advises for prologs.
#
# Settings: /etc/default/gpuaffinity (GPUAFFINITY_DEFAULTS names another
# file), read as shell variable assignments and exported:
#   GPUAFFINITY_BIN          gpuaffinity binary (default: from PATH)
#   GPUAFFINITY_CHECK_ARGS   extra check flags, e.g. --expect FILE
#   GPUAFFINITY_PROLOG_ARGS  extra check flags for this script only,
#                            e.g. --interval 0 (skip nic.errors' 1 s wait)
#   GPUAFFINITY_ROOT         root to read sys/ and proc/ under (tests)
PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
defaults=${GPUAFFINITY_DEFAULTS:-/etc/default/gpuaffinity}
if [ -r "$defaults" ]; then
	set -a
	. "$defaults"
	set +a
fi
# A job on several nodes needs the fabric: --multi-node makes the finetune
# profile enforce the fabric checks (pretrain always does).
multi=
if [ "${SLURM_JOB_NUM_NODES:-1}" -gt 1 ] 2>/dev/null; then
	multi=--multi-node
fi
# The ARGS variables are split into words on purpose.
# shellcheck disable=SC2086
exec "${GPUAFFINITY_BIN:-gpuaffinity}" check -o nhc $multi \
	${GPUAFFINITY_CHECK_ARGS:-} ${GPUAFFINITY_PROLOG_ARGS:-}
