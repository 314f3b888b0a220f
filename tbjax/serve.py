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
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rollout.engine import SamplingParams
from tbjax.engine import JaxEngine

log = logging.getLogger(__name__)
SGLANG_DEFAULTS = {"max_new_tokens": 128, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0}


def _load_tokenizer(model_dir: Path):
    if not (model_dir / "tokenizer.json").is_file():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def _sampling(params: dict[str, Any]) -> SamplingParams:
    values = {**SGLANG_DEFAULTS, **{k: v for k, v in params.items() if v is not None}}
    stop_ids = tuple(values.get("stop_token_ids") or ())
    return SamplingParams(max_new_tokens=int(values["max_new_tokens"]), temperature=float(values["temperature"]),
                          top_p=float(values["top_p"]), top_k=int(values["top_k"]), min_p=float(values["min_p"]),
                          stop_token_ids=stop_ids, seed=values.get("sampling_seed"))


def build_app(engine: JaxEngine, model_dir: Path) -> Starlette:
    state = {"model_dir": str(model_dir), "tokenizer": _load_tokenizer(model_dir)}

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
        body = await request.json()
        input_ids = body.get("input_ids")
        if not isinstance(input_ids, list) or not all(isinstance(t, int) for t in input_ids):
            return JSONResponse({"error": "this server takes `input_ids`: one list of token ids per request"},
                                status_code=400)
        try:
            sampling = _sampling(body.get("sampling_params") or {})
            result = await engine.generate(input_ids, sampling, session_id=body.get("rid"))
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        finish: dict[str, Any] = {"type": result.finish_reason}
        if result.finish_reason == "stop":
            finish["matched"] = result.output_ids[-1]
        else:
            finish["length"] = len(result.output_ids)
        meta = {"id": body.get("rid"), "finish_reason": finish, "prompt_tokens": result.prompt_tokens,
                "completion_tokens": len(result.output_ids), "cached_tokens": result.cached_tokens,
                "weight_version": result.weight_version}
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [[lp, tok, token_text(tok)]
                                             for lp, tok in zip(result.logprobs, result.output_ids, strict=True)]
            start = body.get("logprob_start_len", -1)
            if start is not None and start >= 0:
                meta["input_token_logprobs"] = (await prompt_logprobs(input_ids))[start:]
        tokenizer = state["tokenizer"]
        text = tokenizer.decode(list(result.output_ids)) if tokenizer is not None else None
        return JSONResponse({"text": text, "output_ids": list(result.output_ids), "meta_info": meta})

    async def update_weights(request: Request) -> JSONResponse:
        body = await request.json()
        path, version = body.get("model_path"), str(body.get("weight_version") or body.get("model_path"))
        try:
            await engine.update_weights(path, version)
        except (ValueError, OSError) as error:
            return JSONResponse({"success": False, "message": f"weights not updated: {error}"}, status_code=400)
        state["model_dir"] = path
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

    def memory_control(action: Callable[[list[str] | None], Awaitable[None]]):
        """An endpoint taking SGLang's {"tags": [...] | null}; an unknown tag is a 400, as a bad request."""
        async def endpoint(request: Request) -> JSONResponse:
            body = await request.json() if await request.body() else {}
            try:
                await action(body.get("tags"))
            except ValueError as error:
                return JSONResponse({"success": False, "message": str(error)}, status_code=400)
            return JSONResponse({"success": True})
        return endpoint

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        Route("/generate", generate, methods=["POST"]),
        Route("/update_weights_from_disk", update_weights, methods=["POST"]),
        Route("/pause_generation", pause, methods=["POST"]),
        Route("/continue_generation", resume, methods=["POST"]),
        Route("/flush_cache", flush, methods=["GET", "POST"]),
        Route("/release_memory_occupation", memory_control(engine.release_memory), methods=["POST"]),
        Route("/resume_memory_occupation", memory_control(engine.resume_memory), methods=["POST"]),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette):
        yield
        await engine.close()

    return Starlette(routes=routes, lifespan=lifespan)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tbjax.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", "--model-path", dest="model", required=True, type=Path, help="HF model directory")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel size (SGLang's flag); one device here")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--slots", type=int, default=8, help="concurrent sequences (KV cache rows)")
    parser.add_argument("--max-len", type=int, default=4096, help="tokens per sequence, prompt included")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--weight-version", default="0")
    parser.add_argument("--enable-memory-saver", action="store_true",
                        help="SGLang's flag that enables memory release/resume; always on here")
    args = parser.parse_args(argv)
    if args.tp != 1:
        parser.error(f"--tp {args.tp}: tbjax.serve runs each server on one device; start several servers instead")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from tbjax.models import from_pretrained

    engine = JaxEngine(from_pretrained(args.model, dtype=args.dtype), slots=args.slots, max_len=args.max_len,
                       weight_version=args.weight_version)
    uvicorn.run(build_app(engine, args.model), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
