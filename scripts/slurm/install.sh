#!/usr/bin/env bash
# Installs Slurm's controller, compute daemon and client and munge from
# Debian's packages (pinned), for the tests that run a real Slurm cluster
# on this machine (deploy/slurm/testcluster.sh). Idempotent.
set -euo pipefail
VERSION=${SLURM_VERSION:-22.05.8-4+deb12u3}
PKGS=(slurmctld="$VERSION" slurmd="$VERSION" slurm-client="$VERSION" munge)
ok=1
for p in slurmctld slurmd slurm-client; do
  [ "$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null)" = "$VERSION" ] || ok=0
done
dpkg -s munge >/dev/null 2>&1 || ok=0
if [ "$ok" = 0 ]; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${PKGS[@]}" >&2
fi
command -v slurmctld >/dev/null
