"""The cases of sdk/schema's validator with the reference's verdicts.

Prints JSON: [{name, schema, doc, valid}], valid as Draft 2020-12
jsonschema decides it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from jsonschema import Draft202012Validator

# What schema.For[sample] makes (sdk/schema/schema_test.go), in both modes.
SAMPLE_ARGS = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": "A name.",
            "minLength": 1,
            "maxLength": 8,
        },
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "inner": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        "any": {},
    },
    "required": ["name", "mode"],
    "additionalProperties": False,
}
SAMPLE_CONFIG = json.loads(json.dumps(SAMPLE_ARGS))
del SAMPLE_CONFIG["required"]
del SAMPLE_CONFIG["properties"]["inner"]["required"]

DOCS: list[Any] = [
    {"name": "a", "mode": "fast"},
    {"name": "", "mode": "fast"},
    {"name": "123456789", "mode": "slow"},
    {"name": "ééééééé", "mode": "slow"},
    {"name": "a"},
    {"mode": "fast"},
    {"name": "a", "mode": "medium"},
    {"name": "a", "mode": "fast", "count": 0},
    {"name": "a", "mode": "fast", "count": 1},
    {"name": "a", "mode": "fast", "count": 10},
    {"name": "a", "mode": "fast", "count": 11},
    {"name": "a", "mode": "fast", "count": 2.0},
    {"name": "a", "mode": "fast", "count": 2.5},
    {"name": "a", "mode": "fast", "count": "2"},
    {"name": "a", "mode": "fast", "count": True},
    {"name": "a", "mode": "fast", "ratio": 1},
    {"name": "a", "mode": "fast", "ratio": 0.25},
    {"name": "a", "mode": "fast", "ratio": None},
    {"name": "a", "mode": "fast", "flag": False},
    {"name": "a", "mode": "fast", "flag": 0},
    {"name": "a", "mode": "fast", "flag": None},
    {"name": "a", "mode": "fast", "tags": []},
    {"name": "a", "mode": "fast", "tags": ["x", "y"]},
    {"name": "a", "mode": "fast", "tags": ["x", 1]},
    {"name": "a", "mode": "fast", "tags": "x"},
    {"name": "a", "mode": "fast", "env": {"A": "1"}},
    {"name": "a", "mode": "fast", "env": {"A": 1}},
    {"name": "a", "mode": "fast", "inner": {"path": "/"}},
    {"name": "a", "mode": "fast", "inner": {}},
    {"name": "a", "mode": "fast", "inner": {"path": "/", "x": 1}},
    {"name": "a", "mode": "fast", "any": [1, {"b": None}]},
    {"name": "a", "mode": "fast", "bogus": 1},
    [],
    "x",
    None,
    {},
]


def main() -> None:
    cases = []
    for sname, schema in (("args", SAMPLE_ARGS), ("config", SAMPLE_CONFIG)):
        v = Draft202012Validator(schema)
        for i, doc in enumerate(DOCS):
            cases.append(
                {
                    "name": f"{sname}/{i}",
                    "schema": schema,
                    "doc": doc,
                    "valid": v.is_valid(doc),
                }
            )
    json.dump(cases, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
