"""Logging to the host's log: JSON lines on stderr in hclog's shape, which
go-plugin relays into the host's log at their level with their fields."""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import datetime, timezone
from typing import Any, TextIO

_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "error": 4}


class Logger:
    """``log.info("msg", key=value)``; ``with_fields`` adds fields to every line."""

    def __init__(self, name: str, fields: dict[str, Any] | None = None, out: TextIO | None = None) -> None:
        self.name = name
        self.fields = fields or {}
        self.out = out
        self.level = _LEVELS.get(os.environ.get("PRORL_LOG_LEVEL", "info").lower(), 2)

    def with_fields(self, **fields: Any) -> Logger:
        lg = Logger(self.name, {**self.fields, **fields}, self.out)
        lg.level = self.level
        return lg

    def _emit(self, level: str, msg: str, fields: dict[str, Any]) -> None:
        if _LEVELS[level] < self.level:
            return
        line = {
            "@level": level,
            "@message": msg,
            "@module": self.name,
            "@timestamp": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            **self.fields,
            **fields,
        }
        text = json.dumps(line, default=str)
        with _lock:
            out = self.out or sys.__stderr__ or sys.stderr
            out.write(text + "\n")
            out.flush()

    def trace(self, msg: str, **fields: Any) -> None:
        self._emit("trace", msg, fields)

    def debug(self, msg: str, **fields: Any) -> None:
        self._emit("debug", msg, fields)

    def info(self, msg: str, **fields: Any) -> None:
        self._emit("info", msg, fields)

    def warn(self, msg: str, **fields: Any) -> None:
        self._emit("warn", msg, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._emit("error", msg, fields)


_lock = threading.Lock()
