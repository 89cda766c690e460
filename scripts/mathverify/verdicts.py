"""Math-Verify's verdict on each (pred, gold) pair.

Reads JSON lines {"pred": str, "gold": str, "response": bool} on stdin and
writes one JSON line {"equal": bool} per pair, in order:
verify(parse(gold), parse(pred)). The gold is parsed as a LaTeX answer
($...$ wrapped); the prediction too, unless "response" is set, when it is
a whole model response that Math-Verify extracts the answer from.
"""

from __future__ import annotations

import json
import sys

from math_verify import parse, verify


def verdict(pred: str, gold: str, response: bool) -> bool:
    g = parse("$" + gold + "$")
    p = parse(pred if response else "$" + pred + "$")
    return bool(verify(g, p))


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        case = json.loads(line)
        try:
            eq = verdict(case["pred"], case["gold"], bool(case.get("response")))
        except Exception:  # noqa: BLE001 - a pair Math-Verify cannot parse is not equal
            eq = False
        sys.stdout.write(json.dumps({"equal": eq}) + "\n")


if __name__ == "__main__":
    main()
