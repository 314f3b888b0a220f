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
import logging
import socket
from pathlib import Path

from tbjax.engine.hosts import bound_hosts, host_patterns


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
    parser.add_argument("--slots", type=int, default=8, help="concurrent sequences (KV cache rows)")
    parser.add_argument("--max-len", type=int, default=4096, help="tokens per sequence, prompt included")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--weight-version", default="0")
    parser.add_argument("--enable-memory-saver", action="store_true",
                        help="SGLang's flag that enables memory release/resume; always on here")
    args = parser.parse_args(argv)
    try:
        allowed_hosts = host_patterns(args.allowed_hosts)
    except ValueError as error:
        parser.error(f"--allowed-hosts: {error}")
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
    import uvicorn  # JAX, the model and the server load only once the arguments are known to be usable

    from tbjax.engine.http_server import build_app
    from tbjax.engine.jax_engine import JaxEngine
    from tbjax.models import from_pretrained

    engine = JaxEngine(from_pretrained(args.model, dtype=args.dtype), slots=args.slots, max_len=args.max_len,
                       weight_version=args.weight_version)
    app = build_app(engine, args.model, allowed_hosts=[*bound_hosts(args.host), *allowed_hosts])
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
