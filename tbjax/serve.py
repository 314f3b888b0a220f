"""`python -m tbjax.serve --model DIR --port P`: the JaxEngine behind SGLang's native HTTP API.

Endpoints (SGLang's names and payloads): GET /health, GET /get_model_info, POST /generate (input_ids in;
output_ids, meta_info.output_token_logprobs as [logprob, token_id, text] and meta_info.finish_reason out; with
logprob_start_len s >= 0 also meta_info.input_token_logprobs of prompt positions s.., untempered, position 0's
logprob null),
POST /update_weights_from_disk, POST /pause_generation, POST /continue_generation, GET|POST /flush_cache,
POST /release_memory_occupation, POST /resume_memory_occupation (body {"tags": [...]} with SGLang's tags
"weights", "kv_cache", "cuda_graph"; null or absent: all; weights cannot be loaded while released, as in
SGLang; /get_model_info lists what is released under `memory_released`, a field of this server only).
Text fields are filled when the model directory has a tokenizer (else null, like SGLang's
--skip-tokenizer-init). It lets the SGLang client, multi-process rollouts and the colocated hand-over be
tested against a real server on this machine.

Every body is checked by the models of `tbjax.engine.http_bodies` before the engine sees a value; one that is not
JSON or breaks a rule is answered 400 with `errors` naming each field and rule. Every failure is answered as
JSON, never raised, so the connection stays open and a client's next pooled request goes through.

A web page must not drive the server: a page's no-cors POST could otherwise pause it, release its memory or
load weights from any local path. Every request must name the server by a loopback Host (127.0.0.1,
localhost, ::1, any port; else 400, which also defeats DNS rebinding) and, when it carries an Origin (browsers
send one with every cross-site POST), by a loopback host there too (else 403). `--allowed-hosts` adds names;
a server bound to every interface also takes this machine's host name, the URL rollout.launch_sglang gives.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tbjax.engine import JaxEngine
from tbjax.engine.http_bodies import (
    Endpoint,
    GenerateBody,
    Limits,
    MemoryBody,
    SamplingBody,
    UpdateWeightsBody,
    admin_error,
    answering_failures,
    generate_error,
)

log = logging.getLogger(__name__)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
EVERY_INTERFACE = ("0.0.0.0", "::", "")


class OriginCheck:
    """403 for a request whose Origin header names a host outside `allowed_hosts` (TrustedHostMiddleware's
    patterns: a name, "*.example.com", "*"), "null" included (sandboxed pages, files). Starlette's
    CORSMiddleware only withholds the answer from such a page, after the request has run; this refuses it.
    Clients that are not browsers send no Origin and pass."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = Headers(scope=scope).get("origin") if scope["type"] == "http" else None
        if origin is not None and not self._allowed(origin):
            response = JSONResponse({"error": f"Origin {origin!r} is not allowed: this server takes requests from "
                                              "pages of its allowed hosts only (--allowed-hosts)"}, status_code=403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, origin: str) -> bool:
        try:
            host = urlsplit(origin).hostname  # lower case, an IPv6 address without brackets
        except ValueError:
            return False
        return host is not None and any(pattern == "*" or host == pattern
                                        or (pattern.startswith("*.") and host.endswith(pattern[1:]))
                                        for pattern in self.allowed_hosts)


def build_app(engine: JaxEngine, model_dir: Path, allowed_hosts: Sequence[str] = ()) -> Starlette:
    """The HTTP app over `engine`; requests must name a loopback host or one of `allowed_hosts` (host names or
    addresses without port, IPv6 without brackets; see the module docstring)."""
    state = {"model_dir": str(model_dir), "tokenizer": _load_tokenizer(model_dir)}
    limits = Limits(vocab_size=engine.config.vocab_size, max_prompt_tokens=engine.max_len - 2)
    hosts = sorted({_host_name(host) for host in (*LOOPBACK_HOSTS, *allowed_hosts)})

    def token_text(token: int) -> str | None:
        tokenizer = state["tokenizer"]
        return None if tokenizer is None else tokenizer.decode([token])

    async def prompt_logprobs(input_ids: list[int]) -> list[list[Any]]:
        """[logprob, token_id, text] of every prompt token, as SGLang sends them (the first has no logprob)."""
        scored = [None, *(await engine.score(input_ids))[0].logprobs] if len(input_ids) > 1 else [None]
        return [[lp, tok, token_text(tok)] for lp, tok in zip(scored, input_ids, strict=True)]

    async def health(_: Request) -> Response:
        return Response(status_code=200 if await engine.health() else 503)

    async def model_info(_: Request) -> JSONResponse:
        return JSONResponse({"model_path": state["model_dir"], "weight_version": engine.weight_version,
                             "is_generation": True, "memory_released": sorted(engine.released)})

    async def generate(request: Request) -> JSONResponse:
        body = GenerateBody.model_validate_json(await request.body(), context=limits.context)
        sampling = (body.sampling_params or SamplingBody()).to_sampling()
        result = await engine.generate(body.input_ids, sampling)  # a rid names one request, not a session
        finish: dict[str, Any] = {"type": result.finish_reason}
        if result.finish_reason == "stop":
            finish["matched"] = result.output_ids[-1]
        else:
            finish["length"] = len(result.output_ids)
        meta = {"id": body.rid, "finish_reason": finish, "prompt_tokens": result.prompt_tokens,
                "completion_tokens": len(result.output_ids), "cached_tokens": result.cached_tokens,
                "weight_version": result.weight_version}
        if body.return_logprob:
            meta["output_token_logprobs"] = [[lp, tok, token_text(tok)]
                                             for lp, tok in zip(result.logprobs, result.output_ids, strict=True)]
            if body.logprob_start_len is not None and body.logprob_start_len >= 0:
                meta["input_token_logprobs"] = (await prompt_logprobs(body.input_ids))[body.logprob_start_len:]
        tokenizer = state["tokenizer"]
        text = tokenizer.decode(list(result.output_ids)) if tokenizer is not None else None
        return JSONResponse({"text": text, "output_ids": list(result.output_ids), "meta_info": meta})

    async def update_weights(request: Request) -> JSONResponse:
        body = UpdateWeightsBody.model_validate_json(await request.body())
        version = body.weight_version or body.model_path
        try:
            await engine.update_weights(body.model_path, version)
        except (ValueError, OSError) as error:
            return JSONResponse({"success": False, "message": f"weights not updated: {error}"}, status_code=400)
        state["model_dir"] = body.model_path
        return JSONResponse({"success": True, "message": f"weights updated to version {version}"})

    async def pause(_: Request) -> JSONResponse:
        engine.pause()
        return JSONResponse({"success": True})

    async def resume(_: Request) -> JSONResponse:
        engine.resume()
        return JSONResponse({"success": True})

    async def flush(_: Request) -> Response:
        if engine.flush_cache():
            return Response("Cache flushed.", status_code=200)
        return Response("Cache not flushed: generations are running.", status_code=400)

    def memory_control(action: Callable[[list[str] | None], Awaitable[None]]) -> Endpoint:
        """An endpoint taking SGLang's {"tags": [...] | null} (an empty body: all tags); an unknown tag is a
        ValueError of the engine's, answered 400."""
        async def endpoint(request: Request) -> JSONResponse:
            body = MemoryBody.model_validate_json(await request.body() or b"{}")
            await action(body.tags)
            return JSONResponse({"success": True})
        return answering_failures(endpoint, admin_error)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        Route("/generate", answering_failures(generate, generate_error), methods=["POST"]),
        Route("/update_weights_from_disk", answering_failures(update_weights, admin_error), methods=["POST"]),
        Route("/pause_generation", pause, methods=["POST"]),
        Route("/continue_generation", resume, methods=["POST"]),
        Route("/flush_cache", flush, methods=["GET", "POST"]),
        Route("/release_memory_occupation", memory_control(engine.release_memory), methods=["POST"]),
        Route("/resume_memory_occupation", memory_control(engine.resume_memory), methods=["POST"]),
    ]
    middleware = [  # the first wraps the others: a request with a foreign Host is refused before anything else
        Middleware(TrustedHostMiddleware, allowed_hosts=[f"[{h}]" if ":" in h else h for h in hosts],
                   www_redirect=False),
        Middleware(OriginCheck, allowed_hosts=hosts),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette):
        yield
        await engine.close()

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def _load_tokenizer(model_dir: Path):
    if not (model_dir / "tokenizer.json").is_file():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def _host_name(host: str) -> str:
    """A host as the checks compare it: lower case, an IPv6 address without brackets."""
    return host.strip().removeprefix("[").removesuffix("]").lower()


def _host_patterns(text: str) -> list[str]:
    """--allowed-hosts: comma-separated names or addresses, without ports; "*.example.com" for its subdomains,
    "*" for any host (TrustedHostMiddleware's patterns)."""
    patterns = [_host_name(part) for part in text.split(",") if part.strip()]
    for pattern in patterns:
        if "*" in pattern and pattern != "*" and not (pattern.startswith("*.") and "*" not in pattern[1:]):
            raise argparse.ArgumentTypeError(f"{pattern!r}: a wildcard must be a leading '*.', as in *.example.com")
    return patterns


def _bound_hosts(address: str) -> list[str]:
    """The name clients reach a server bound to `address` by: the address itself, or this machine's host name
    when it binds every interface (the URL rollout.launch_sglang gives its clients then)."""
    return [socket.gethostname() if address in EVERY_INTERFACE else address]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tbjax.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", "--model-path", dest="model", required=True, type=Path, help="HF model directory")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel size (SGLang's flag); one device here")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--allowed-hosts", type=_host_patterns, default=[],
                        help="comma-separated host names or addresses (no port) that requests may name in their "
                             "Host and Origin headers, beside 127.0.0.1, localhost, ::1 and the --host address; "
                             "*.example.com allows its subdomains, * any host")
    parser.add_argument("--slots", type=int, default=8, help="concurrent sequences (KV cache rows)")
    parser.add_argument("--max-len", type=int, default=4096, help="tokens per sequence, prompt included")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--weight-version", default="0")
    parser.add_argument("--enable-memory-saver", action="store_true",
                        help="SGLang's flag that enables memory release/resume; always on here")
    args = parser.parse_args(argv)
    if args.tp != 1:
        parser.error(f"--tp {args.tp}: tbjax.serve runs each server on one device; start several servers instead")
    if not (args.model / "config.json").is_file():
        parser.error(f"--model {args.model}: no HF model directory there (config.json missing)")
    try:  # the port is taken before the model loads, which takes minutes at 27B
        listener = _listening_socket(args.host, args.port)
    except OSError as error:
        parser.error(f"cannot listen on {args.host}:{args.port} ({error.strerror or error}); is a server already "
                     "running there? Pick another --port or stop it")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from tbjax.models import from_pretrained

    engine = JaxEngine(from_pretrained(args.model, dtype=args.dtype), slots=args.slots, max_len=args.max_len,
                       weight_version=args.weight_version)
    app = build_app(engine, args.model, allowed_hosts=[*_bound_hosts(args.host), *args.allowed_hosts])
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


def _listening_socket(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError:
        listener.close()
        raise
    return listener


if __name__ == "__main__":
    main()
