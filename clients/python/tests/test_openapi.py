"""The host's OpenAPI document, checked by openapi-spec-validator, and the
client's typed dicts checked against its schemas: a field the host sends
or takes that ``types.py`` lacks (or one it invents) fails here."""

from __future__ import annotations

import json
import sys
import typing
import urllib.request
from typing import Any

import pytest
from openapi_spec_validator import validate

from prorl_client import types

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pragma: no cover
    from typing_extensions import NotRequired

from conftest import Host

# Each typed dict and the document's schema of the same body (a request
# body's schema is named for its Go type, "…Input" when it has no
# "Request" in its name).
PAIRS = {
    "SubmitRequest": "SubmitRequest",
    "Sampling": "SamplingInput",
    "Harness": "HarnessRequest",
    "SessionRequest": "SessionRequest",
    "Session": "SessionResponse",
    "SubmitResponse": "SubmitResponse",
    "Failure": "Failure",
    "Attempt": "Attempt",
    "Staleness": "Staleness",
    "Tokens": "Tokens",
    "FunctionCall": "FunctionCall",
    "ToolCall": "ToolCall",
    "Message": "Message",
    "Turn": "Turn",
    "Trace": "Trace",
    "Timing": "Timing",
    "Result": "Result",
}


@pytest.fixture(scope="module")
def document(host: Host) -> dict[str, Any]:
    with urllib.request.urlopen(host.url + "/openapi.json", timeout=10) as r:
        doc: dict[str, Any] = json.load(r)
    return doc


def test_document_is_valid_openapi_31(document: dict[str, Any]) -> None:
    assert document["openapi"] == "3.1.0"
    validate(document)  # raises on any violation of the 3.1 schema
    assert len(document["paths"]) > 50


def _required(td: type) -> set[str]:
    """Keys a total typed dict requires (NotRequired excepted), or none."""
    if not getattr(td, "__total__", True):
        return set()
    hints = typing.get_type_hints(td, include_extras=True)
    return {k for k, v in hints.items() if typing.get_origin(v) is not NotRequired}


@pytest.mark.parametrize(("py", "schema"), sorted(PAIRS.items()))
def test_types_match_document(document: dict[str, Any], py: str, schema: str) -> None:
    td = getattr(types, py)
    sc = document["components"]["schemas"][schema]
    keys = set(typing.get_type_hints(td))
    props = set(sc["properties"])
    assert keys - props == set(), f"{py} has keys the host does not know"
    assert props - keys == set(), f"{py} lacks fields of the host's {schema}"
    if schema.endswith(("Request", "Input")):
        return  # a request's fields are all optional to the client
    assert _required(td) == set(sc.get("required", [])), f"{py}: required keys differ from {schema}"
