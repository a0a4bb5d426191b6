#!/bin/sh
# gpuaffinity-healthcheck: Slurm HealthCheckProgram (docs/slurm.md).
# Install as /usr/local/sbin/gpuaffinity-healthcheck (mode 0755); the .deb and .rpm
# install it as /usr/libexec/gpuaffinity/gpuaffinity-healthcheck.
#
# slurmd runs this as root every HealthCheckInterval with no environment
# but SLURMD_NODENAME, kills it after 60 s and ignores its exit status, so
# gpuaffinity check acts itself: when a check fails it drains the node with
# the reason "gpuaffinity: <check>: <reason>"; when the checks pass it
# resumes the node, but only if the drain reason starts with "gpuaffinity:".
# A node drained with another reason (an admin's, Slurm's "Prolog error")
# is never drained over or resumed.
#
# Settings: /etc/default/gpuaffinity (GPUAFFINITY_DEFAULTS names another
# file), read as shell variable assignments and exported:
#   GPUAFFINITY_BIN               gpuaffinity binary (default: from PATH)
#   GPUAFFINITY_CHECK_ARGS        extra check flags, e.g. --expect FILE
#   GPUAFFINITY_HEALTHCHECK_ARGS  extra check flags for this script only
#   GPUAFFINITY_ROOT              root to read sys/ and proc/ under (tests)
#   SLURM_CONF                    for scontrol, where not /etc/slurm/slurm.conf
PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
defaults=${GPUAFFINITY_DEFAULTS:-/etc/default/gpuaffinity}
if [ -r "$defaults" ]; then
	set -a
	. "$defaults"
	set +a
fi
# The node is Slurm's NodeName (slurmd sets SLURMD_NODENAME), which need
# not be the host name.
node=${SLURMD_NODENAME:-}
# Later flags win: the ARGS variables can override --interval. They are
# split into words on purpose.
# shellcheck disable=SC2086
exec "${GPUAFFINITY_BIN:-gpuaffinity}" check -o nhc --slurm-drain --slurm-resume \
	${node:+--slurm-node "$node"} --interval 2s \
	${GPUAFFINITY_CHECK_ARGS:-} ${GPUAFFINITY_HEALTHCHECK_ARGS:-}
