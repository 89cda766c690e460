"""Writes plugins/swe/specs.json: what SWE-bench's harness (swebench 4.1.0)
needs to write an instance's eval script and read its log, per repository
and version, taken from the harness's own tables (MAP_REPO_VERSION_TO_SPECS,
MAP_REPO_TO_PARSER, NON_TEST_EXTS, the test output markers).

Run with the venv `python3 scripts/ref.py install swebench` makes (make swe-specs).
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version

from swebench.harness.constants import END_TEST_OUTPUT, NON_TEST_EXTS, START_TEST_OUTPUT
from swebench.harness.constants.python import MAP_REPO_VERSION_TO_SPECS_PY
from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY


def main() -> None:
    repos: dict[str, object] = {}
    for repo, versions in sorted(MAP_REPO_VERSION_TO_SPECS_PY.items()):
        parser = MAP_REPO_TO_PARSER_PY.get(repo)
        if parser is None:
            continue  # the harness cannot grade it either
        vs: dict[str, object] = {}
        for v, spec in sorted(versions.items()):
            if "test_cmd" not in spec:
                continue
            entry: dict[str, object] = {"test_cmd": spec["test_cmd"]}
            for key in ("eval_commands", "install"):
                if key in spec:
                    entry[key] = spec[key]
            vs[v] = entry
        repos[repo] = {"parser": parser.__name__.removeprefix("parse_log_"), "versions": vs}
    out = {
        "generated_by": "scripts/swebench/make_specs.py",
        "swebench": version("swebench"),
        "start_marker": START_TEST_OUTPUT,
        "end_marker": END_TEST_OUTPUT,
        "non_test_exts": NON_TEST_EXTS,
        "repos": repos,
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
