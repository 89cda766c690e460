"""The reference scripts' protocol: one JSON object per line in, one out.

serve(handle) answers each input with handle's result, or {"error": ...}
when it raises: every failure is a result the Go test compares.
"""

import json
import sys
from collections.abc import Callable
from typing import Any


def serve(handle: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    for line in sys.stdin:
        try:
            out = handle(json.loads(line))
        except Exception as e:  # noqa: BLE001 - every failure is a result to compare
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
