"""SGLang's native /generate wire format: the request we send and the response we accept.

Pure functions, so the exact bytes on the wire are testable without a server. SGLang's server
fills any sampling value we omit from the model's generation_config.json, so every value the
sampler reads is sent, including the penalties our `SamplingParams` does not expose (they are off in
training: the trainer recomputes logprobs without them).

Stop tokens: with `no_stop_trim` the server keeps a matched stop token in `output_ids`. Some servers (or
older versions) trim it anyway; the policy sampled it, so we put it back. SGLang trims only `output_ids`,
not the logprob list, so the stop token's logprob is usually still there as one extra entry and is used.
When a server dropped it from both, its logprob is unknown and is reported as NaN: never a made-up 0.0
(probability 1), which would silently bias the importance ratio. Trainers must mask or recompute NaN
behaviour logprobs; `missing_logprobs` counts them so the episode loop can report it.

A server that sends more log-prob entries than output ids has sent the list more than once: sglang-jax
0.1.0rc0 appends a cumulative snapshot every 50 generated tokens to a non-streamed response (51 tokens come
with 50 + 51 entries). The last entries are the final snapshot; they are used, checked token by token
against the output ids like any other list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rollout.engines.protocol import EngineError, FinishReason, Generation, SamplingParams, TokenScores

FINISH_REASONS: frozenset[str] = frozenset({"stop", "length", "abort"})
# Scoring samples one greedy token (ignored): SGLang samples greedy at temperature 1, so the prompt's log-probs
# are untempered, as the trainer's side of the weight probe computes them.
SCORING = SamplingParams(max_new_tokens=1, temperature=0.0)
# how far above 0 a float32 log-softmax may round (x - logsumexp(x) of the largest logit); beyond it a log-prob
# is not one, and believing it would skew the importance ratio
LOGPROB_ROUNDING = 1e-4
# tbjax.serve's sessions (SGLang ignores both headers and has no such path): a /generate request names the
# episode it belongs to, so that a server in deterministic mode keeps that episode's cache row for its later
# turns and reuses no other; such a server says so in its answer (SESSION_HELD_HEADER), and the client ends the
# session there (POST END_SESSION_PATH {"session_id": ...}) when the episode ends, freeing the row.
SESSION_HEADER = "X-Session-Id"
SESSION_HELD_HEADER = "X-Session-Held"
END_SESSION_PATH = "/end_session"


class ProtocolError(EngineError):
    """The server answered, but not in SGLang's wire format: retrying will not help."""

    kind = "engine_protocol"


def generate_payload(input_ids: Sequence[int], sampling: SamplingParams, rid: str,
                     adapter: str | None = None) -> dict[str, Any]:
    """The JSON body of POST /generate for one prompt of token ids, under the LoRA adapter named `adapter`
    (SGLang's `lora_path` takes a loaded adapter's name; None: the base model)."""
    params: dict[str, Any] = {
        "max_new_tokens": sampling.max_new_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "stop": [],
        "stop_token_ids": list(sampling.stop_token_ids),
        "ignore_eos": False,
        "skip_special_tokens": False,
        "no_stop_trim": True,
        "repetition_penalty": 1.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
    }
    if sampling.seed is not None:
        params["sampling_seed"] = sampling.seed
    body = {
        "input_ids": [int(t) for t in input_ids],
        "sampling_params": params,
        "return_logprob": True,
        "logprob_start_len": -1,
        "rid": rid,
        "stream": False,
    }
    if adapter is not None:
        body["lora_path"] = adapter
    return body


def score_payload(input_ids: Sequence[int], rid: str, adapter: str | None = None) -> dict[str, Any]:
    """The JSON body of POST /generate that returns the prompt's own log-probs: `logprob_start_len` 0 makes
    SGLang send `meta_info.input_token_logprobs` for every prompt position."""
    return {**generate_payload(input_ids, SCORING, rid, adapter), "logprob_start_len": 0}


def parse_scores(body: Any, input_ids: Sequence[int], default_version: str, source: str) -> TokenScores:
    """A scoring response -> TokenScores of input_ids[1:]. SGLang sends one [logprob, token_id, text] entry
    per prompt token, the first with logprob null (nothing predicts it); each must name its prompt token."""
    meta = body.get("meta_info") if isinstance(body, dict) else None
    entries = meta.get("input_token_logprobs") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(entries, list) or len(entries) != len(input_ids):
        raise ProtocolError(f"a scoring /generate response needs meta_info.input_token_logprobs with one entry per "
                            f"prompt token ({len(input_ids)}), got {str(entries)[:200]}; the server must support "
                            "logprob_start_len")
    if finish_reason_of(meta)[0] == "abort":
        raise EngineError(f"{source} aborted the scoring request")
    logprobs = tuple(_logprob_entry(entries[i], int(input_ids[i]), i, "input_token_logprobs")
                     for i in range(1, len(entries)))
    version = meta.get("weight_version")
    return TokenScores(logprobs, str(version) if version is not None else default_version, source)


def finish_reason_of(meta: dict[str, Any]) -> tuple[FinishReason, Any, str]:
    """(type, matched, message) of `meta_info.finish_reason`; a missing reason is a protocol error because
    a non-streaming response always ends the request."""
    reason = meta.get("finish_reason")
    if not isinstance(reason, dict) or reason.get("type") not in FINISH_REASONS:
        raise ProtocolError(f"meta_info.finish_reason must be {{type: stop|length|abort}}, got {reason!r}")
    return reason["type"], reason.get("matched"), str(reason.get("message") or "")


def parse_generation(body: Any, default_version: str, max_new_tokens: int,
                     vocab_size: int | None = None) -> tuple[Generation, int]:
    """Turn a /generate response into a `Generation` plus the number of logprobs the server did not send
    (0 or 1: a trimmed stop token, see the module docstring). `default_version` is used when the server
    does not report `meta_info.weight_version`. What the episode would otherwise believe is checked: token
    ids are integers within the vocabulary (`vocab_size`, when known), there is at least one and at most
    `max_new_tokens` of them, log-probs are finite and at most 0, token counts are non-negative integers."""
    if not isinstance(body, dict) or not isinstance(body.get("meta_info"), dict):
        raise ProtocolError(f"/generate response needs 'output_ids' and 'meta_info', got {str(body)[:200]}")
    meta = body["meta_info"]
    output_ids = body.get("output_ids")
    entries = meta.get("output_token_logprobs")
    if not isinstance(output_ids, list) or not isinstance(entries, list):
        raise ProtocolError("/generate response lacks output_ids or meta_info.output_token_logprobs; "
                            "send return_logprob=true to a server that returns token ids")
    finish, matched, _ = finish_reason_of(meta)
    ids = [_token_id(t, vocab_size, f"output_ids[{i}]") for i, t in enumerate(output_ids)]
    trimmed = finish == "stop" and _is_integer(matched) and (not ids or ids[-1] != matched)
    if trimmed:
        ids.append(_token_id(matched, vocab_size, "finish_reason.matched"))  # the trimmed stop token the policy sampled
    if not 1 <= len(ids) <= max_new_tokens:
        raise ProtocolError(f"{len(ids)} output ids for max_new_tokens {max_new_tokens}: a finished request has "
                            "between 1 and max_new_tokens")
    if len(entries) > len(ids):
        entries = entries[len(entries) - len(ids):]  # repeated snapshots (module docstring): keep the final one
    missing = 1 if trimmed and len(entries) == len(ids) - 1 else 0
    if len(entries) + missing != len(ids):
        raise ProtocolError(f"{len(output_ids)} output ids (finish {finish}, matched {matched!r}) but "
                            f"{len(entries)} output_token_logprobs")
    logprobs = [_logprob_entry(e, ids[i], i) for i, e in enumerate(entries)] + [math.nan] * missing
    version = meta.get("weight_version")
    generation = Generation(
        output_ids=tuple(ids),
        logprobs=tuple(logprobs),
        finish_reason=finish,
        weight_version=str(version) if version is not None else default_version,
        prompt_tokens=_count(meta, "prompt_tokens"),
        cached_tokens=_count(meta, "cached_tokens"),
    )
    return generation, missing


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _token_id(value: Any, vocab_size: int | None, where: str) -> int:
    if not _is_integer(value) or value < 0 or (vocab_size is not None and value >= vocab_size):
        bound = "" if vocab_size is None else f" below the vocabulary size {vocab_size}"
        raise ProtocolError(f"{where} is {str(value)[:50]!r}: a token id is an integer >= 0{bound}")
    return value


def _count(meta: dict[str, Any], field: str) -> int:
    value = meta.get(field)
    if value is None:
        return 0
    if not _is_integer(value) or value < 0:
        raise ProtocolError(f"meta_info.{field} is {str(value)[:50]!r}: a token count is an integer >= 0")
    return value


def _logprob_entry(entry: Any, expected_id: int, position: int, field: str = "output_token_logprobs") -> float:
    """One (logprob, token_id, text) triple of `field`; its token id must be the token at the same position
    (of output_ids, or of the prompt for input_token_logprobs)."""
    if not isinstance(entry, list | tuple) or len(entry) < 2 or isinstance(entry[0], bool) \
            or not isinstance(entry[0], int | float):
        raise ProtocolError(f"{field}[{position}] must be [logprob, token_id, text], got {str(entry)[:100]}")
    if not math.isfinite(entry[0]) or entry[0] > LOGPROB_ROUNDING:
        raise ProtocolError(f"{field}[{position}] has log-prob {entry[0]!r}: a log-prob is finite and at most 0")
    if entry[1] != expected_id or not _is_integer(entry[1]):
        raise ProtocolError(f"{field}[{position}] is for token {str(entry[1])[:50]}, but the token there is "
                            f"{expected_id}")
    return float(entry[0])
