"""An ASGI app answering as vLLM's FastAPI server does, for core/httpc's test.

/json answers a JSON body with Content-Length (FastAPI's JSONResponse),
/stream a chunked body (StreamingResponse, how vLLM streams), /status a 400
with a JSON error; every answer echoes what the request carried.
"""

import json
from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            break
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    echo = {
        "method": scope["method"],
        "path": scope["path"],
        "query": scope["query_string"].decode(),
        "content_type": headers.get("content-type", ""),
        "length": len(body),
        "body": body.decode(errors="replace")[:64],
    }
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(5):
            await send({"type": "http.response.body", "body": f"data: {i}\n\n".encode(), "more_body": True})
        await send({"type": "http.response.body", "body": json.dumps(echo).encode(), "more_body": False})
        return
    status = 400 if path == "/status" else 200
    if path == "/big":
        echo["pad"] = "x" * 3_000_000
    out = json.dumps(echo).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": out})
