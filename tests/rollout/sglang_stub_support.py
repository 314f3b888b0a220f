"""A stand-in SGLang server for tests: SGLang's native HTTP API (/generate, /health, weight loads), with a
deterministic fake "model", so the client's wire format, retries and publishes are tested over real
HTTP on 127.0.0.1 without a GPU.

The fake model: after a prompt whose ids sum to S it samples token 100 + (S + k) % 50 at step k with
logprob -0.25 * (k + 1), `length` tokens long; then it samples the first requested stop token (logprob
-0.125) if max_new_tokens leaves room, else it stops for length. Asked for the prompt's log-probs too
(return_logprob with logprob_start_len s >= 0), it scores prompt token i >= 1 at -0.25 * ((ids[i-1] + ids[i]) % 8
+ 1), minus `score_shift` (weights that are not what was published), and sends `input_token_logprobs` from
position s on, position 0's log-prob null, as SGLang does.

Run in-process with `serve_in_thread(StubModel())`, or as a process (the launcher tests' stand-in for
`python -m sglang.launch_server`): `python -m tests.rollout.sglang_stub_support --port P [--delay-s 0.2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

STOP_LOGPROB = -0.125


@dataclasses.dataclass
class StubModel:
    """Behaviour switches and a record of what the server received (read by the tests)."""

    length: int = 4
    delay_s: float = 0.0
    trim_stop: bool = False  # drop a matched stop token from output_ids, as servers do without no_stop_trim
    trim_stop_logprob: bool = False  # ... and from output_token_logprobs too
    text_in_logprobs: bool = True  # False: the text of each triple is null (--skip-tokenizer-init)
    report_version: bool = True
    fail_generate: int = 0  # answer the next N /generate calls with HTTP `fail_status`
    fail_status: int = 500
    fail_every: int = 0  # answer every N-th /generate call (the 1st, N+1-th, ...) with HTTP `fail_status`
    abort_generate: int = 0  # answer the next N /generate calls with finish_reason abort
    update_ok: bool = True
    update_endpoint: bool = True  # False: /update_weights_from_disk answers 404, as sglang-jax's does
    score_shift: float = 0.0  # added to every prompt log-prob the fake model scores
    corrupt: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # rewrites each /generate answer (faults)
    weight_version: str = "default"
    model_path: str = "stub-model"
    received: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    events: list[tuple[str, str, dict]] = dataclasses.field(default_factory=list)  # (name, path, body)
    name: str = "stub"
    paused: bool = False
    _previous_input: list[int] = dataclasses.field(default_factory=list)

    def reset(self, **changes: Any) -> None:
        """Back to the defaults (a module's servers are shared by its tests), then apply `changes`."""
        for field in dataclasses.fields(self):
            if field.name != "name":
                default = field.default_factory() if callable(field.default_factory) else field.default
                setattr(self, field.name, default)
        for key, value in changes.items():
            setattr(self, key, value)

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        ids: list[int] = body["input_ids"]
        params = body["sampling_params"]
        start = sum(ids)
        n = min(self.length, params["max_new_tokens"])
        tokens = [100 + (start + k) % 50 for k in range(n)]
        logprobs = [-0.25 * (k + 1) for k in range(n)]
        finish: dict[str, Any] = {"type": "length"}
        if params["stop_token_ids"] and n < params["max_new_tokens"]:
            tokens.append(params["stop_token_ids"][0])
            logprobs.append(STOP_LOGPROB)
            finish = {"type": "stop", "matched": tokens[-1]}
        entries = [[lp, tok, f"<{tok}>" if self.text_in_logprobs else None]
                   for lp, tok in zip(logprobs, tokens, strict=True)]
        if finish["type"] == "stop" and self.trim_stop:
            tokens = tokens[:-1]
            entries = entries[:-1] if self.trim_stop_logprob else entries
        cached = next(  # longest common prefix with the previous sequence
            (i for i, (a, b) in enumerate(zip(ids, self._previous_input, strict=False)) if a != b),
            min(len(ids), len(self._previous_input)))
        self._previous_input = ids + tokens  # a radix cache holds the prompt and what was sampled
        meta: dict[str, Any] = {"id": body["rid"], "finish_reason": finish, "prompt_tokens": len(ids),
                                "completion_tokens": len(tokens), "cached_tokens": cached,
                                "output_token_logprobs": entries}
        if body.get("return_logprob") and body.get("logprob_start_len", -1) >= 0:
            meta["input_token_logprobs"] = self.prompt_logprobs(ids, body["logprob_start_len"])
        if self.report_version:
            meta["weight_version"] = self.weight_version
        return {"text": "".join(f"<{t}>" for t in tokens), "output_ids": tokens, "meta_info": meta}

    def prompt_logprobs(self, ids: list[int], start: int) -> list[list[Any]]:
        """[logprob, token_id, text] of prompt positions start.. (position 0: logprob null)."""
        scored = [None] + [-0.25 * ((a + b) % 8 + 1) - self.score_shift for a, b in zip(ids, ids[1:], strict=False)]
        return [[lp, tok, f"<{tok}>" if self.text_in_logprobs else None]
                for lp, tok in zip(scored[start:], ids[start:], strict=True)]


def make_app(model: StubModel) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        model.received.append(body)
        if not isinstance(body.get("input_ids"), list) or not isinstance(body.get("sampling_params"), dict):
            return JSONResponse({"error": "input_ids and sampling_params are required"}, status_code=400)
        while model.paused:  # SGLang holds new requests while generation is paused
            await asyncio.sleep(0.01)
        await asyncio.sleep(model.delay_s)
        if model.fail_every and len(model.received) % model.fail_every == 1 % model.fail_every:
            return JSONResponse({"error": "stub failure"}, status_code=model.fail_status)
        if model.fail_generate > 0:
            model.fail_generate -= 1
            return JSONResponse({"error": "stub failure"}, status_code=model.fail_status)
        if model.abort_generate > 0:
            model.abort_generate -= 1
            meta = {"id": body["rid"], "finish_reason": {"type": "abort", "message": "paused for update"},
                    "output_token_logprobs": []}
            return JSONResponse({"text": "", "output_ids": [], "meta_info": meta})
        answer = model.generate(body)
        return JSONResponse(answer if model.corrupt is None else model.corrupt(answer))

    async def admin(request: Request) -> Response:
        path = request.url.path
        body = await request.json()
        model.events.append((model.name, path, body))
        if path == "/pause_generation":
            model.paused = True
        elif path == "/continue_generation":
            model.paused = False
        elif path == "/update_weights_from_disk":
            if not model.update_endpoint:
                return JSONResponse({"detail": "Not Found"}, status_code=404)
            if not model.update_ok:
                return JSONResponse({"success": False, "message": f"cannot load {body['model_path']}"},
                                    status_code=400)
            model.model_path, model.weight_version = body["model_path"], body["weight_version"]
            return JSONResponse({"success": True, "message": "Succeeded to update model weights."})
        return JSONResponse({})

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def model_info(request: Request) -> Response:
        return JSONResponse({"model_path": model.model_path, "weight_version": model.weight_version,
                             "is_generation": True, "pid": os.getpid(),
                             "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")})

    admin_paths = ["/pause_generation", "/continue_generation", "/update_weights_from_disk"]
    return Starlette(routes=[Route("/generate", generate, methods=["POST"]),
                             *(Route(p, admin, methods=["POST"]) for p in admin_paths),
                             Route("/health", health), Route("/get_model_info", model_info)])


class ThreadServer:
    """A stub served by uvicorn in a daemon thread on a free 127.0.0.1 port."""

    def __init__(self, model: StubModel) -> None:
        self.model = model
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        config = uvicorn.Config(make_app(model), log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("stub server did not start within 10 s")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def command(*extra: str) -> list[str]:
    """The stand-in for `python -m sglang.launch_server` (run from the repository root)."""
    return [sys.executable, "-m", "tests.rollout.sglang_stub_support", *extra]


def wait_healthy(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not become healthy within {timeout_s} s")


def main(argv: list[str] | None = None) -> None:
    """Accepts the launch_server flags the launcher passes (and ignores the ones a stub has no use for)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model-path", default="stub-model")
    parser.add_argument("--delay-s", type=float, default=0.0)
    parser.add_argument("--exit-after-s", type=float, default=0.0, help="crash after this long (restart tests)")
    args, _ = parser.parse_known_args(argv)
    model = StubModel(delay_s=args.delay_s, model_path=args.model_path, name=str(args.port))
    if args.exit_after_s:
        threading.Timer(args.exit_after_s, lambda: os._exit(3)).start()
    uvicorn.run(make_app(model), host=args.host, port=args.port, log_level="warning", lifespan="off")


if __name__ == "__main__":
    main(sys.argv[1:])


def on_engine(urls, scenario, **settings):
    """Runs `scenario(engine)` on an SGLangEngine over `urls` (settings: SGLangConfig fields) and closes it."""
    from rollout.engines.sglang import SGLangEngine

    async def main():
        engine = SGLangEngine.from_urls(urls, **settings)
        try:
            return await scenario(engine)
        finally:
            await engine.close()
    return asyncio.run(main())
