"""SWE-bench's harness parsers on test logs.

Reads JSON lines {"parser": name, "log": text} on stdin and writes one
JSON line per input: the status map swebench.harness.log_parsers.python's
parse_log_<name> returns ({"error": message} if it raises).
"""

from __future__ import annotations

import json
import sys

from swebench.harness.log_parsers import python as parsers


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        fn = getattr(parsers, "parse_log_" + case["parser"])
        try:
            out: dict[str, object] = {"statuses": fn(case["log"], None)}
        except Exception as e:  # noqa: BLE001 - the harness itself fails on this log: report it
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
