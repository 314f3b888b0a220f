"""`BodyLimit`: no request body past the server's limit is read, let alone parsed (200 MB of whitespace was).

A body that declares its length (Content-Length) past the limit is answered 413 unread. One that does not
(chunked) is counted as it arrives: past the limit, reading it raises `BodyTooLarge`, which the endpoints
answer 413 (`tbjax.engine.http_bodies.answering_failures`).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tbjax.engine.http_bodies import BodyTooLarge


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> str:
        return (f"request body over the server's {self.max_bytes:,}-byte limit (the longest prompt its max_len "
                "takes, as JSON, with room to spare); send a shorter prompt")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await JSONResponse({"error": self._message()}, status_code=413)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self._message())
            return message

        await self.app(scope, counted, send)
