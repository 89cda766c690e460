#!/usr/bin/env bash
# apt-get for the install scripts, one call at a time: make test installs
# its prerequisites in parallel, and two apt-gets at once fail on dpkg's
# lock. As root, or through sudo.
#
# Usage:
#   apt.sh update               refresh the package lists (once an hour at most)
#   apt.sh install PKG[=V]...   update, then install these
#   apt.sh ensure PKG...        install those of PKG not installed yet
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
dir=${TMPDIR:-/tmp}
exec 9>"$dir/prorl-apt-$(id -u).lock"
flock 9
# Another apt user (unattended-upgrades) is waited for, not failed on.
apt() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -qq "$@"; }
stamp="$dir/prorl-apt-$(id -u).updated"
update() {
  # Several scripts update before they read apt-cache; one refresh serves them.
  if [ -z "$(find "$stamp" -mmin -60 2>/dev/null)" ]; then
    apt update >&2
    touch "$stamp"
  fi
}
cmd=${1:?usage: apt.sh update | install PKG... | ensure PKG...}
shift
case "$cmd" in
update) update ;;
install)
  update
  apt install -y "$@" >&2
  ;;
ensure)
  missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "apt: installing ${missing[*]}" >&2
    update
    apt install -y "${missing[@]}" >&2
  fi
  ;;
*)
  echo "apt.sh: unknown command $cmd" >&2
  exit 2
  ;;
esac
