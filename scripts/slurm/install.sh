#!/usr/bin/env bash
# Installs Slurm's controller, compute daemon and client and munge from
# Debian's packages, for the tests that run a real Slurm cluster on this
# machine (deploy/slurm/testcluster.sh). Idempotent.
#
# Pinned to one upstream release (22.05.8, Debian 12's). The exact Debian
# revision is preferred; when a security update has replaced it in the
# archive (which keeps only the newest revision of a suite), the newest
# revision of the same release is taken, and said: an exact pin alone
# would make a fresh machine's `make test` fail on the day of an update.
set -euo pipefail
WANT=${SLURM_VERSION:-22.05.8-4+deb12u3}
RELEASE=${WANT%%-*}

# pick prints the version to install: WANT if offered, else the newest
# offered revision of RELEASE; offered versions come one per line on stdin.
pick() {
  local offered
  offered=$(cat)
  if grep -qxF "$WANT" <<<"$offered"; then
    echo "$WANT"
    return
  fi
  { grep -E "^${RELEASE//./\\.}-" <<<"$offered" || true; } | sort -V | tail -n 1
}

if [ "${1:-}" = "--pick" ]; then # for the test: versions on stdin
  pick
  exit 0
fi

apt=$(dirname "$0")/../apt.sh
ok=1
for p in slurmctld slurmd slurm-client; do
  v=$(bash "$apt" version "$p")
  [ "${v%%-*}" = "$RELEASE" ] || ok=0
done
[ -n "$(bash "$apt" version munge)" ] || ok=0
if [ "$ok" = 0 ]; then
  bash "$apt" update
  version=$(apt-cache madison slurmctld | awk -F'|' '{gsub(/ /, "", $2); print $2}' | pick)
  if [ -z "$version" ]; then
    echo "slurm: Debian offers no $RELEASE revision of slurmctld (wanted $WANT); set SLURM_VERSION" >&2
    exit 1
  fi
  [ "$version" = "$WANT" ] || echo "slurm: $WANT is no longer offered; installing $version, the same release" >&2
  bash "$apt" install slurmctld="$version" slurmd="$version" slurm-client="$version" munge
fi
command -v slurmctld >/dev/null
