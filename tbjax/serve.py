"""`python -m tbjax.serve --model DIR --port P`: the JaxEngine behind SGLang's native HTTP API.

Endpoints (SGLang's names and payloads): GET /health, GET /get_model_info, POST /generate (input_ids in;
output_ids, meta_info.output_token_logprobs as [logprob, token_id, text] and meta_info.finish_reason out; with
logprob_start_len s >= 0 also meta_info.input_token_logprobs of prompt positions s.., untempered, position 0's
logprob null),
POST /update_weights_from_disk, POST /pause_generation, POST /continue_generation, GET|POST /flush_cache,
POST /load_lora_adapter ({"lora_name", "lora_path"}: a PEFT directory), POST /unload_lora_adapter ({"lora_name"})
and /generate's `lora_path` (the adapter's name) with --enable-lora (tbjax.engine.adapters),
POST /release_memory_occupation, POST /resume_memory_occupation (body {"tags": [...]} with SGLang's tags
"weights", "kv_cache", "cuda_graph"; null or absent: all; weights cannot be loaded while released, as in
SGLang; /get_model_info lists what is released under `memory_released`, a field of this server only).
Text fields are filled when the model directory has a tokenizer (else null, like SGLang's
--skip-tokenizer-init). It lets the SGLang client, multi-process rollouts and the colocated hand-over be
tested against a real server on this machine.

Sessions (this server's own extension; SGLang ignores the header): a /generate request may name its episode in
an `X-Session-Id` header. In deterministic mode (--run-config with rollout.deterministic) the episode then keeps
one cache row for its turns and reuses no other, so its tokens depend on it alone, as in the trainer's own engine;
the answer carries `X-Session-Held: 1`, and POST /end_session {"session_id"} frees the row when the episode ends.

`--run-config RUN_CONFIG.yaml` serves the policy as a tbjax run did: the run's model dtypes, attention and mesh,
and its rollout section's slots, sequence length, prefill chunk, decode steps and determinism (what
`rollout.evaluate --from-run` starts, so that its trials repeat the pipeline's).

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
import logging
import socket
from pathlib import Path
from typing import Any

from tbjax.config import Config, ConfigError, load_config
from tbjax.engine.hosts import bound_hosts, host_patterns
from tbjax.sections.lora import LoraError, LoraSpec

DEFAULTS = {"slots": 8, "max_len": 4096, "dtype": "float32"}  # the engine's settings without --run-config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tbjax.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", "--model-path", dest="model", required=True, type=Path, help="HF model directory")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel size (SGLang's flag); one device here")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--allowed-hosts", default="",
                        help="comma-separated host names or addresses (no port) that requests may name in their "
                             "Host and Origin headers, beside 127.0.0.1, localhost, ::1 and the --host address; "
                             "*.example.com allows its subdomains, * any host")
    parser.add_argument("--run-config", type=Path,
                        help="a run's config.yaml: the engine and the model's dtypes as that run configured them "
                             "(instead of --slots, --max-len, --dtype)")
    parser.add_argument("--slots", type=int, help=f"concurrent sequences (KV cache rows; default {DEFAULTS['slots']})")
    parser.add_argument("--max-len", type=int,
                        help=f"tokens per sequence, prompt included (default {DEFAULTS['max_len']})")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], help=f"default {DEFAULTS['dtype']}")
    parser.add_argument("--weight-version", default="0")
    parser.add_argument("--enable-memory-saver", action="store_true",
                        help="SGLang's flag that enables memory release/resume; always on here")
    parser.add_argument("--enable-lora", action="store_true",
                        help="serve LoRA adapters: /load_lora_adapter, /unload_lora_adapter, /generate's lora_path")
    parser.add_argument("--max-lora-rank", type=int, default=None,
                        help="the largest adapter rank to serve (with --enable-lora; default 16)")
    parser.add_argument("--lora-target-modules", nargs="+", default=None,
                        help="projections adapters may adapt (q_proj ... down_proj, or all; with --enable-lora; "
                             "default all)")
    parser.add_argument("--max-loaded-loras", type=int, default=None,
                        help="adapters loaded at once (with --enable-lora; default 4)")
    args = parser.parse_args(argv)
    try:
        allowed_hosts = host_patterns(args.allowed_hosts)
    except ValueError as error:
        parser.error(f"--allowed-hosts: {error}")
    if args.tp != 1:
        parser.error(f"--tp {args.tp}: tbjax.serve runs each server on one device; start several servers instead")
    lora_flags = [f for f in ("max_lora_rank", "lora_target_modules", "max_loaded_loras")
                  if getattr(args, f) is not None]
    if lora_flags and not args.enable_lora:
        parser.error(f"--{lora_flags[0].replace('_', '-')} acts only with --enable-lora")
    targets = ("attention_mlp",) if args.lora_target_modules in (None, ["all"]) else tuple(args.lora_target_modules)
    max_rank = 16 if args.max_lora_rank is None else args.max_lora_rank
    max_loaded = 4 if args.max_loaded_loras is None else args.max_loaded_loras
    try:  # refused before the model loads
        LoraSpec(rank=max_rank, alpha=1.0, targets=targets)
    except LoraError as error:
        parser.error(f"--max-lora-rank / --lora-target-modules: {error}")
    if not (args.model / "config.json").is_file():
        parser.error(f"--model {args.model}: no HF model directory there (config.json missing)")
    engine_flags = [f for f in DEFAULTS if getattr(args, f) is not None]
    if args.run_config is not None and engine_flags:
        parser.error(f"--{engine_flags[0].replace('_', '-')}: --run-config sets the engine as the run did; drop one")
    run_config = _run_config(parser, args.run_config)
    try:  # the port is taken before the model loads, which takes minutes at 27B
        listener = _listening_socket(args.host, args.port)
    except OSError as error:
        parser.error(f"cannot listen on {args.host}:{args.port} ({error.strerror or error}); is a server already "
                     "running there? Pick another --port or stop it")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import uvicorn  # JAX, the model and the server load only once the arguments are known to be usable

    from tbjax.engine.adapters import AdapterServing
    from tbjax.engine.configured import engine_settings
    from tbjax.engine.http_server import build_app
    from tbjax.engine.jax_engine import JaxEngine
    from tbjax.models import from_pretrained
    from tbjax.models.placement import load_served_policy

    settings: dict[str, Any] = {"weight_version": args.weight_version,
                                "weights_dir": args.model}  # what an update that fails midway goes back to
    if run_config is None:
        chosen = {name: DEFAULTS[name] if getattr(args, name) is None else getattr(args, name) for name in DEFAULTS}
        model = from_pretrained(args.model, dtype=chosen.pop("dtype"))
        settings |= chosen
    else:
        model = load_served_policy(args.model, run_config)
        settings |= engine_settings(run_config.rollout)
    adapters = None
    if args.enable_lora:
        try:
            adapters = AdapterServing.on(model, max_rank, targets, max_loaded, **settings)
        except LoraError as error:
            parser.error(f"--enable-lora: {error}")
        engine = adapters.engine
    else:
        engine = JaxEngine(model, **settings)
    app = build_app(engine, args.model, allowed_hosts=[*bound_hosts(args.host), *allowed_hosts], adapters=adapters)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


def _run_config(parser: argparse.ArgumentParser, path: Path | None) -> Config | None:
    """The run's config --run-config names (None without it); one that cannot be read is the flag's error."""
    if path is None:
        return None
    try:
        return load_config(path, saved_by_run=True)
    except ConfigError as error:
        parser.error(f"--run-config: {error}")


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
