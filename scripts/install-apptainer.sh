#!/usr/bin/env bash
# Builds Apptainer from its Go module source once (about seven minutes on 2 cores; it is
# not packaged in Debian 12) into ~/.cache/prorl/apptainer-$VERSION, or, for
# root, /var/cache/prorl/apptainer-$VERSION: a root host runs sandboxes as
# other uids, which cannot enter /root. Later runs reuse it.
# Prints the bin directory. Recipe: ../shared/ENVIRONMENT.md.
set -euo pipefail
VERSION=${APPTAINER_VERSION:-${VERSION:?run through: python3 scripts/ref.py install apptainer}}
if [ "$(id -u)" = 0 ]; then CACHE=/var/cache; else CACHE=$HOME/.cache; fi
PREFIX=${APPTAINER_PREFIX:-$CACHE/prorl/apptainer-$VERSION}
if [ -x "$PREFIX/bin/apptainer" ]; then echo "$PREFIX/bin"; exit 0; fi
bash "$(dirname "$0")/apt.sh" ensure libseccomp-dev uidmap fakeroot cryptsetup libsubid-dev squashfs-tools \
  squashfuse fuse3 libfuse3-dev build-essential pkg-config
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GONOSUMDB=github.com/apptainer/apptainer GOMODCACHE="$work/modcache"
( cd "$work" && go mod download -json "github.com/apptainer/apptainer@v$VERSION" >"$work/dl.json" )
src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Dir"])' "$work/dl.json")
cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
cd "$work/src"
# The module zip drops executable bits: restore them on scripts.
grep -rlI --exclude-dir=vendor '^#!' . | xargs -r chmod +x
echo "$VERSION" > VERSION
export GOCACHE="$work/gocache" # its Makefile runs go clean -cache
# --without-network: its sixteen CNI plugins serve --network bridge and the
# like; prorl's sandboxes ask for --network none or the host's, neither uses
# them (22 s of a 7-minute build here).
./mconfig --without-suid --without-network -b "$work/build" -p "$PREFIX" >&2
make -C "$work/build" -j2 >&2
make -C "$work/build" install >&2
echo "$PREFIX/bin"
