"""Request body size limits (ASGI middleware)."""

from __future__ import annotations

import json

from .errors import TooLarge

__all__ = ["BodyLimit"]

#: The CSV imports (comparisons and ballots).
_IMPORTS = ("/comparisons/import", "/rankings/import")


class BodyLimit:
    """413 for bodies above the limit: by ``Content-Length`` before reading, and by
    counting while streaming (chunked uploads). CSV imports get their own limit."""

    def __init__(self, app, limit: int, import_limit: int) -> None:
        self.app = app
        self.limit = limit
        self.import_limit = import_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.import_limit if scope["path"].endswith(_IMPORTS) else self.limit
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > limit:
                    await _reject(send, limit)
                    return
        received = 0
        over = False

        async def counted():
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    raise TooLarge(f"the request body exceeds {limit} bytes")
            return message

        started = answered = False

        async def answer(message):
            # Whoever reads the body sees TooLarge raised from receive(), and may answer it as
            # something else (FastAPI's body parsing answers 400, "not valid JSON"): once the
            # body is over the limit, the answer is the 413, whatever the application sends
            # (unless it had begun its answer before reading that far).
            nonlocal started, answered
            if not over or started:
                started = started or message["type"] == "http.response.start"
                await send(message)
            elif not answered:
                answered = True
                await _reject(send, limit)

        try:
            await self.app(scope, counted, answer)
        except TooLarge:
            if not over or started:
                raise
        if over and not started and not answered:
            await _reject(send, limit)


async def _reject(send, limit: int) -> None:
    body = json.dumps({"detail": f"the request body exceeds {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
