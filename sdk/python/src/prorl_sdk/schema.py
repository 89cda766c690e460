"""JSON Schema from Python type hints, the way the Go SDK generates it from
struct tags: tool arguments from a function's parameters, the config table
from a dataclass. Values are checked against the schema with the
``jsonschema`` library (the reference the Go validator's goldens come from).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import types
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import jsonschema


class SchemaError(TypeError):
    """A type that has no JSON Schema: a programming error found at start."""


@dataclasses.dataclass(frozen=True)
class Field:
    """What a type alone cannot say: ``Annotated[int, Field("Turns.", minimum=1)]``.
    A plain string in ``Annotated`` is the description."""

    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None


_SCALARS: dict[Any, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _optional(tp: Any) -> tuple[Any, bool]:
    """Strips ``| None``: the type and whether None was allowed."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) < len(get_args(tp)) and len(args) == 1:
            return args[0], True
    return tp, False


def type_schema(tp: Any, where: str) -> dict[str, Any]:
    """The JSON Schema of one type; ``where`` names it in errors."""
    tp, _ = _optional(tp)
    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        s = type_schema(base, where)
        for m in meta:
            if isinstance(m, str):
                s["description"] = m
            elif isinstance(m, Field):
                if m.description:
                    s["description"] = m.description
                for key, val in (
                    ("minimum", m.minimum),
                    ("maximum", m.maximum),
                    ("minLength", m.min_length),
                    ("maxLength", m.max_length),
                ):
                    if val is not None:
                        s[key] = val
        return s
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if tp is Any:
        return {}
    if origin is Literal:
        vals = list(get_args(tp))
        kinds = {_SCALARS.get(type(v)) for v in vals}
        if len(kinds) != 1 or None in kinds:
            raise SchemaError(f"{where}: a Literal's values must be of one scalar type")
        return {"type": kinds.pop(), "enum": vals}
    if origin in (list, collections.abc.Sequence):
        (item,) = get_args(tp) or (Any,)
        return {"type": "array", "items": type_schema(item, where + "[]")}
    if origin is dict:
        key, val = get_args(tp) or (str, Any)
        if key is not str:
            raise SchemaError(f"{where}: object keys must be str")
        return {"type": "object", "additionalProperties": type_schema(val, where + "{}")}
    if origin in (Union, types.UnionType):
        return {"anyOf": [type_schema(a, where) for a in get_args(tp)]}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return dataclass_schema(tp, optional=False)
    raise SchemaError(f"{where}: {tp!r} has no JSON Schema (use str, int, float, bool, Literal, list, dict or a dataclass)")


def _object(props: list[tuple[str, Any, bool]], where: str, closed: bool) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "object", "properties": {}}
    required = []
    for name, tp, has_default in props:
        s["properties"][name] = type_schema(tp, f"{where}.{name}")
        if not has_default and not _optional(tp)[1]:
            required.append(name)
    if required:
        s["required"] = required
    if closed:
        s["additionalProperties"] = False
    return s


def dataclass_schema(cls: type, optional: bool, closed: bool = True) -> dict[str, Any]:
    """A dataclass as an object; with ``optional`` no field is required (a
    config table is decoded over its defaults)."""
    hints = get_type_hints(cls, include_extras=True)
    props = []
    for f in dataclasses.fields(cls):
        has_default = optional or f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        props.append((f.name, hints[f.name], has_default))
    return _object(props, cls.__name__, closed)


def params_schema(fn: Callable[..., Any], skip: int) -> dict[str, Any]:
    """The schema of a function's parameters after the first ``skip``."""
    hints = get_type_hints(fn, include_extras=True)
    props = []
    for p in list(inspect.signature(fn).parameters.values())[skip:]:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise SchemaError(f"{fn.__name__}: parameter {p.name} must be a plain or keyword parameter")
        if p.name not in hints:
            raise SchemaError(f"{fn.__name__}: parameter {p.name} needs a type annotation")
        props.append((p.name, hints[p.name], p.default is not p.empty))
    return _object(props, fn.__name__, closed=True)


def check(schema: dict[str, Any], value: Any) -> tuple[str, str] | None:
    """None if value satisfies schema, else the first error as (field, message);
    the field is a dotted path ("" for the value itself)."""
    v = jsonschema.Draft202012Validator(schema)
    errs = sorted(v.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    if not errs:
        return None
    e = errs[0]
    path = [str(p) for p in e.absolute_path]
    if e.validator == "required" and isinstance(e.validator_value, list):
        missing = [k for k in e.validator_value if isinstance(e.instance, dict) and k not in e.instance]
        if missing:
            return ".".join([*path, missing[0]]), "is required"
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        props = e.schema.get("properties", {}) if isinstance(e.schema, dict) else {}
        extra = [k for k in e.instance if k not in props]
        if extra:
            return ".".join([*path, extra[0]]), "is not a known key (known: " + ", ".join(props) + ")"
    return ".".join(path), e.message


def from_json(cls: type, value: dict[str, Any]) -> Any:
    """Builds a dataclass from a checked JSON object (nested dataclasses
    too); keys the class does not have are left out."""
    hints = get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name in value:
            tp, _ = _optional(hints[f.name])
            v = value[f.name]
            if dataclasses.is_dataclass(tp) and isinstance(tp, type) and isinstance(v, dict):
                v = from_json(tp, v)
            kw[f.name] = v
    return cls(**kw)


__all__ = ["Field", "SchemaError", "check", "dataclass_schema", "from_json", "params_schema", "type_schema"]
