"""Schemas generated from type hints, and values checked against them."""

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pytest

import prorl_sdk as sdk
from prorl_sdk import schema


def f(
    r: Any,
    word: Annotated[str, "A word."],
    n: Annotated[int, sdk.Field("How many.", minimum=1, maximum=5)] = 1,
    mode: Literal["a", "b"] = "a",
    tags: list[str] | None = None,
) -> str:
    return ""


def test_params_schema() -> None:
    assert schema.params_schema(f, skip=1) == {
        "type": "object",
        "properties": {
            "word": {"type": "string", "description": "A word."},
            "n": {"type": "integer", "description": "How many.", "minimum": 1, "maximum": 5},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["word"],
        "additionalProperties": False,
    }


@dataclass
class Inner:
    x: float


@dataclass
class Config:
    turns: Annotated[int, sdk.Field(minimum=1)] = 3
    inner: Inner = field(default_factory=lambda: Inner(1.0))
    flags: dict[str, bool] = field(default_factory=dict)


def test_config_schema_has_no_required_keys() -> None:
    s = schema.dataclass_schema(Config, optional=True)
    assert "required" not in s
    assert s["properties"]["inner"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert s["properties"]["flags"] == {"type": "object", "additionalProperties": {"type": "boolean"}}


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ({"word": "w"}, None),
        ({"word": "w", "n": 5, "mode": "b", "tags": ["t"]}, None),
        ({}, ("word", "is required")),
        ({"word": 1}, ("word", "1 is not of type 'string'")),
        ({"word": "w", "n": 0}, ("n", "0 is less than the minimum of 1")),
        ({"word": "w", "n": 2.5}, ("n", "2.5 is not of type 'integer'")),
        ({"word": "w", "mode": "c"}, ("mode", "'c' is not one of ['a', 'b']")),
        ({"word": "w", "wrod": "x"}, ("wrod", "is not a known key (known: word, n, mode, tags)")),
        ([1], ("", "[1] is not of type 'object'")),
    ],
)
def test_check(value: Any, want: tuple[str, str] | None) -> None:
    assert schema.check(schema.params_schema(f, skip=1), value) == want


def test_bool_is_not_an_integer() -> None:
    assert schema.check({"type": "integer"}, True) is not None


@pytest.mark.parametrize("tp", [set[int], tuple[int, int], dict[int, str], object, Literal[1, "a"]])
def test_types_without_schema_are_refused(tp: Any) -> None:
    with pytest.raises(sdk.SchemaError):
        schema.type_schema(tp, "x")


def test_from_json_builds_nested_dataclasses_and_drops_extra_keys() -> None:
    c = schema.from_json(Config, {"turns": 2, "inner": {"x": 2.0}, "data_source": "x"})
    assert c == Config(turns=2, inner=Inner(2.0))
