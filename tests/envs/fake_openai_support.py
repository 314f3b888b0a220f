"""A local OpenAI-compatible server for tests: a real HTTP server on 127.0.0.1 answering /v1/chat/completions
with canned replies in order, and recording what it was sent. The `fake_openai` fixture starts one per test;
tests/conftest.py offers it to every suite, and tests import `Canned` and `FakeOpenAI` from here."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Canned:
    """One canned reply: HTTP status and assistant text (or a raw body), optionally after a delay and with
    extra headers (e.g. Retry-After)."""

    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    raw_body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeOpenAI:
    """A real HTTP server on 127.0.0.1 speaking /v1/chat/completions with canned replies, in order."""

    replies: list[Canned] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() of each request
    base_url: str = ""

    def queue(self, *replies: Canned) -> None:
        self.replies.extend(replies)


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            fake.arrivals.append(time.monotonic())
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append(body)
            fake.headers.append(dict(self.headers))
            reply = fake.replies.pop(0) if fake.replies else Canned(status=500, text="no canned reply left")
            time.sleep(reply.delay_s)
            payload = reply.raw_body if reply.raw_body is not None else json.dumps(
                {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text}}]})
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload.encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up, which is what a delay test wants

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
