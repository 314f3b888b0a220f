"""The HTTP server of `python -m tbjax.serve`: the JaxEngine behind SGLang's native API, every body checked
(tbjax.engine.http_bodies) and every request held to loopback or allowed hosts (the endpoints and the rules are
in tbjax.serve's help)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from rollout.engines.sglang_wire import END_SESSION_PATH, SESSION_HEADER, SESSION_HELD_HEADER
from tbjax.engine.adapters import AdapterServing
from tbjax.engine.body_limit import BodyLimit
from tbjax.engine.hosts import LOOPBACK_HOSTS, host_name
from tbjax.engine.http_bodies import (
    Endpoint,
    EndSessionBody,
    GenerateBody,
    Limits,
    LoadLoraBody,
    MemoryBody,
    SamplingBody,
    UnloadLoraBody,
    UpdateWeightsBody,
    admin_error,
    answering_failures,
    generate_error,
    lora_error,
    session_named,
)
from tbjax.engine.jax_engine import JaxEngine

log = logging.getLogger(__name__)


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


def build_app(engine: JaxEngine, model_dir: Path, allowed_hosts: Sequence[str] = (),
              adapters: AdapterServing | None = None) -> Starlette:
    """The HTTP app over `engine`; requests must name a loopback host or one of `allowed_hosts` (host names or
    addresses without port, IPv6 without brackets; see the module docstring). With `adapters` (the engine's),
    it serves LoRA adapters too (tbjax.engine.adapters)."""
    state = {"model_dir": str(model_dir), "tokenizer": _load_tokenizer(model_dir)}
    limits = Limits(vocab_size=engine.config.vocab_size, max_prompt_tokens=engine.max_len - 2)
    hosts = sorted({host_name(host) for host in (*LOOPBACK_HOSTS, *allowed_hosts)})

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
                             "is_generation": True, "memory_released": sorted(engine.released),
                             "loaded_adapters": loaded()})

    def under_adapter(name: str | None) -> contextlib.AbstractAsyncContextManager[None]:
        if adapters is not None:
            return adapters.serving(name)
        if name is not None:
            raise ValueError(f"lora_path {name!r}: this server serves no adapters; start it with --enable-lora")
        return contextlib.nullcontext()

    async def generate(request: Request) -> JSONResponse:
        body = GenerateBody.model_validate_json(await request.body(), context=limits.context)
        session = session_named(request.headers.get(SESSION_HEADER))  # a rid names one request, not a session
        async with under_adapter(body.lora_path):
            answer = await generate_from(body, session)
        if session is not None and engine.deterministic:  # the session keeps its row until /end_session
            answer.headers[SESSION_HELD_HEADER] = "1"
        return answer

    async def end_session(request: Request) -> JSONResponse:
        body = EndSessionBody.model_validate_json(await request.body())
        await engine.end_session(body.session_id)
        return JSONResponse({"success": True})

    async def generate_from(body: GenerateBody, session: str | None) -> JSONResponse:
        sampling = (body.sampling_params or SamplingBody()).to_sampling()
        result = await engine.generate(body.input_ids, sampling, session_id=session)
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
            await (adapters or engine).update_weights(body.model_path, version)
        except (ValueError, OSError) as error:
            return JSONResponse({"success": False, "message": f"weights not updated: {error}"}, status_code=400)
        state["model_dir"] = body.model_path
        return JSONResponse({"success": True, "message": f"weights updated to version {version}"})

    def loaded() -> dict[str, str]:
        return {} if adapters is None else {name: a.path for name, a in adapters.loaded.items()}

    async def load_adapter(request: Request) -> JSONResponse:
        body = LoadLoraBody.model_validate_json(await request.body())
        if adapters is None:
            raise ValueError("this server serves no adapters; start it with --enable-lora")
        await adapters.load(body.lora_name, body.lora_path)
        return JSONResponse({"success": True, "error_message": None, "loaded_adapters": loaded()})

    async def unload_adapter(request: Request) -> JSONResponse:
        body = UnloadLoraBody.model_validate_json(await request.body())
        if adapters is None:
            raise ValueError("this server serves no adapters; start it with --enable-lora")
        adapters.unload(body.lora_name)
        return JSONResponse({"success": True, "error_message": None, "loaded_adapters": loaded()})

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
        Route(END_SESSION_PATH, answering_failures(end_session, admin_error), methods=["POST"]),
        Route("/update_weights_from_disk", answering_failures(update_weights, admin_error), methods=["POST"]),
        Route("/load_lora_adapter", answering_failures(load_adapter, lora_error), methods=["POST"]),
        Route("/unload_lora_adapter", answering_failures(unload_adapter, lora_error), methods=["POST"]),
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
        Middleware(BodyLimit, max_bytes=limits.max_body_bytes),
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
