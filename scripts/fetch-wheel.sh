#!/usr/bin/env bash
# Fetch one reference wheel from PyPI into ~/.cache/prorl/wheels, pinned by
# version and sha256, without its dependencies; prints its path. Idempotent.
# Usage: fetch-wheel.sh NAME==VERSION FILE.whl SHA256
set -euo pipefail
spec=$1 file=$2 sha=$3
dir="$HOME/.cache/prorl/wheels"
whl="$dir/$file"
mkdir -p "$dir"
if ! echo "$sha  $whl" | sha256sum -c --quiet >/dev/null 2>&1; then
	venv="$HOME/.cache/prorl/venv-fetch" # a Debian python3 may have no pip of its own
	[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
	"$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary :all: "$spec" -d "$dir" >&2
	echo "$sha  $whl" | sha256sum -c --quiet
fi
echo "$whl"
