"""SWE-bench's harness's eval script for instances.

Reads JSON lines (SWE-bench rows: repo, version, base_commit, test_patch,
instance_id) on stdin and writes one JSON line per row: {"script": the
text TestSpec.eval_script would hold}, built by the harness's own
make_eval_script_list (make_test_spec itself also fetches the env's
requirements from GitHub, which the eval script does not use).
"""

from __future__ import annotations

import json
import sys

from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
from swebench.harness.test_spec.create_scripts import make_eval_script_list


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        row = json.loads(line)
        specs = MAP_REPO_VERSION_TO_SPECS[row["repo"]][row["version"]]
        lines = make_eval_script_list(row, specs, "testbed", "/testbed", row["base_commit"], row["test_patch"])
        script = "\n".join(["#!/bin/bash", "set -uxo pipefail"] + lines) + "\n"
        sys.stdout.write(json.dumps({"script": script}) + "\n")


if __name__ == "__main__":
    main()
