"""Math-Verify's own test suite as JSON lines: each case its tests state
(gold, prediction, the options the test passes, the expected verdict) and
Math-Verify's verdict on it.

    "$(python3 scripts/ref.py install mathverify)" scripts/mathverify/suite.py \\
        PATH/TO/Math-Verify > sdk/mathans/testdata/mathverify_suite.jsonl

PATH/TO/Math-Verify is a checkout of huggingface/Math-Verify; its tests/
files named in FILES are imported and every parametrized case is run
once, through the test's own body, with compare_strings (and parse/verify
for the tests that call them) recording what they were asked. The
verdicts are those of the installed, pinned math-verify.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from typing import Any

FILES = ["test_all", "test_numina_cases", "test_open_thoughts", "test_boxed", "test_strict", "test_yujianll"]


def cases_of(module: Any, name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    real_compare = getattr(module, "compare_strings", None)
    real_verify, real_parse = getattr(module, "verify", None), getattr(module, "parse", None)

    inside: list[bool] = []

    def compare(gold: str, pred: str, **kw: Any) -> Any:
        inside.append(True)
        try:
            res = real_compare(gold, pred, **kw)  # type: ignore[misc]
            both = real_compare(gold, pred)  # type: ignore[misc]
        finally:
            inside.pop()
        calls.append({"gold": gold, "pred": pred, "options": kw, "mathverify": int(bool(res)), "mathverify_default": int(bool(both))})
        return res

    parsed: dict[int, str] = {}

    def parse(s: str, *a: Any, **kw: Any) -> Any:
        r = real_parse(s, *a, **kw)  # type: ignore[misc]
        parsed[id(r)] = s
        return r

    def verify(g: Any, p: Any, *a: Any, **kw: Any) -> Any:
        res = real_verify(g, p, *a, **kw)  # type: ignore[misc]
        if not inside and id(g) in parsed and id(p) in parsed:
            v = int(bool(res))
            calls.append({"gold": parsed[id(g)], "pred": parsed[id(p)], "options": kw, "mathverify": v, "mathverify_default": v})
        return res

    if real_compare is not None:
        module.compare_strings = compare
    if real_verify is not None and real_parse is not None:
        module.verify, module.parse = verify, parse
    for fname, fn in inspect.getmembers(module, inspect.isfunction):
        if not fname.startswith("test_") or fn.__module__ != module.__name__:
            continue
        for mark in getattr(fn, "pytestmark", []):
            if mark.name != "parametrize":
                continue
            names = [n.strip() for n in (mark.args[0].split(",") if isinstance(mark.args[0], str) else mark.args[0])]
            for i, values in enumerate(mark.args[1]):
                values = getattr(values, "values", values)  # pytest.param
                if len(names) == 1:
                    values = (values,)
                params = dict(zip(names, values, strict=True))
                calls.clear()
                try:
                    fn(**params)
                    passed = True
                except AssertionError:
                    passed = False
                except Exception:  # noqa: BLE001 - a case the installed version cannot run
                    passed = False
                expected = params.get("expected", params.get("result"))
                for c in calls:
                    if expected is None or isinstance(expected, (list, tuple)):
                        continue  # tests of extraction only (no verdict stated)
                    out.append(
                        {
                            "file": name,
                            "test": fname,
                            "case": i,
                            "gold": c["gold"],
                            "pred": c["pred"],
                            "options": {k: v for k, v in c["options"].items() if isinstance(v, (int, float, str, bool, list))},
                            "expected": int(bool(expected)),
                            "mathverify": c["mathverify"],
                            # Its verdict with its defaults (LaTeX and expressions
                            # extracted, 6 digits), the one setting the math domain has.
                            "mathverify_default": c["mathverify_default"],
                            "test_passes": passed,
                        }
                    )
    return out


class _Mark:
    def __init__(self, name: str, args: tuple[Any, ...]) -> None:
        self.name, self.args = name, args


class _Marks:
    """pytest.mark as far as these tests use it: parametrize, recorded as
    pytest records it (the function's pytestmark); other marks ignored."""

    def __getattr__(self, name: str) -> Any:
        def mark(*args: Any, **_: Any) -> Any:
            def wrap(fn: Any) -> Any:
                fn.pytestmark = [*getattr(fn, "pytestmark", []), _Mark(name, args)]
                return fn

            return wrap

        return mark


class _Param:
    def __init__(self, *values: Any, **_: Any) -> None:
        self.values = values


def stub_pytest() -> None:
    """The reference's venv has no pytest: enough of it to import the tests."""
    import types

    m = types.ModuleType("pytest")
    m.mark = _Marks()  # type: ignore[attr-defined]
    m.param = _Param  # type: ignore[attr-defined]
    m.fixture = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)  # type: ignore[attr-defined]
    m.raises = None  # type: ignore[attr-defined]
    sys.modules["pytest"] = m


def main() -> None:
    root = sys.argv[1]
    try:
        import pytest  # noqa: F401
    except ImportError:
        stub_pytest()
    sys.path.insert(0, root)
    rows = []
    for name in FILES:
        rows += cases_of(importlib.import_module("tests." + name), name)
    for r in rows:
        sys.stdout.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    agree = sum(r["mathverify"] == r["expected"] for r in rows)
    default = sum(r["mathverify_default"] == r["expected"] for r in rows)
    sys.stderr.write(f"{len(rows)} cases; Math-Verify agrees with its tests on {agree}, with its default settings on {default}\n")


if __name__ == "__main__":
    main()
