"""Python client for the prorl rollout host (v1 API), sync and asyncio."""

from .adapters import group_advantages, to_slime, to_verl
from .client import AsyncClient, Client, Page, ProrlError, finished
from .types import Result, SubmitRequest, SubmitResponse, failures, usable, whole

__all__ = [
    "AsyncClient",
    "Client",
    "Page",
    "ProrlError",
    "Result",
    "SubmitRequest",
    "SubmitResponse",
    "failures",
    "finished",
    "group_advantages",
    "to_slime",
    "to_verl",
    "usable",
    "whole",
]
