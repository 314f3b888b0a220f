"""A user simulator endpoint for scripted agents (envs.tau2.gold): a real HTTP server on 127.0.0.1 speaking
OpenAI's /v1/chat/completions wire protocol, which plays a τ² task's user side as the agent directs it.

It reads the conversation it is sent (the agent as "user", itself as "assistant", its tool results as
"tool"): it answers τ²'s greeting with a fixed opening; when the agent's latest message names user actions
(`<user_actions>[...]</user_actions>`), it makes those calls one at a time as tool calls, then says they are
done; any other message from the agent ends the conversation with `###STOP###`. It needs no model, so the
gold and spoiled trajectories run through the real episode loop, user tool calls included.

    python -m envs.tau2.directed_user --port 8011     # serves http://127.0.0.1:8011/v1 until interrupted

(a stand-in for a user simulator when only the wiring is being tried: it says almost nothing, so no agent
can do a task that needs what the user knows).
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from envs.tau2.gold import requested_actions

OPENING = "Hi, I need help with my account."
DONE = "I did that."
STOP = "Thank you. ###STOP###"


def next_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The user's next message given the conversation so far (the user model's view of it)."""
    agent_turns = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if len(agent_turns) <= 1:
        return {"role": "assistant", "content": OPENING}
    last = agent_turns[-1]
    wanted = requested_actions(str(messages[last].get("content") or ""))
    if wanted is None:
        return {"role": "assistant", "content": STOP}
    made = sum(len(m.get("tool_calls") or []) for m in messages[last + 1:] if m.get("role") == "assistant")
    if made >= len(wanted):
        return {"role": "assistant", "content": DONE}
    call = wanted[made]
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"user_call_{made}", "type": "function",
         "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            message = next_message(body["messages"])
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
            self._send(400, {"error": {"message": f"bad request: {error}"}})
            return
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        self._send(200, {"id": "directed", "object": "chat.completion", "model": body.get("model", ""),
                         "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class DirectedUser:
    """The server, started on a free port: `base_url` is what a ChatEndpointConfig points at."""

    def __init__(self, port: int = 0) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="tau2-directed-user")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> DirectedUser:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the directed user: an OpenAI-compatible stand-in user for τ²")
    parser.add_argument("--port", type=int, default=8011)
    args = parser.parse_args(argv)
    with DirectedUser(args.port) as user:
        print(f"directed user at {user.base_url} (Ctrl-C stops it)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
