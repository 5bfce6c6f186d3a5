"""Request body size limits (ASGI middleware)."""

from __future__ import annotations

import json

from ..services.errors import TooLarge

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

        async def counted():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise TooLarge(f"the request body exceeds {limit} bytes")
            return message

        await self.app(scope, counted, send)


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
