#!/usr/bin/env bash
# apt-get for the install scripts, one call at a time: make test installs
# its prerequisites in parallel, and two apt-gets at once fail on dpkg's
# lock. As root, or through sudo.
#
# Usage:
#   apt.sh update               refresh the package lists (once an hour at most)
#   apt.sh install PKG[=V]...   update, then install these
#   apt.sh ensure PKG...        install those of PKG not installed yet
#   apt.sh version PKG          print PKG's version if it is installed
set -euo pipefail
# version prints an installed package's version. Not dpkg -s's exit status
# nor dpkg-query's bare version: both answer for a package removed but not
# purged ("rc", its config files kept), and a fresh machine's make test then
# went on without Chromium.
version() {
  local st
  st=$(dpkg-query -W -f '${db:Status-Abbrev}|${Version}' "$1" 2>/dev/null) || return 0
  case "$st" in ii*) echo "${st#*|}" ;; esac
}
if [ "${1:-}" = version ]; then
  version "${2:?usage: apt.sh version PKG}"
  exit 0
fi
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
cmd=${1:?usage: apt.sh update | install PKG... | ensure PKG... | version PKG}
shift
case "$cmd" in
update) update ;;
install)
  update
  apt install -y "$@" >&2
  ;;
ensure)
  missing=()
  for p in "$@"; do [ -n "$(version "$p")" ] || missing+=("$p"); done
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
