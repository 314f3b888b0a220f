"""The request bodies `tbjax.serve` accepts, as pydantic models: every value is checked here, at the HTTP
boundary, so that the engine never sees one it cannot run or would silently change.

Strict types (no "5" for 5, no 5.0 for an id, no true for a number), integers within the engine's int32 rows,
finite floats within their ranges, token ids within the served model's vocabulary (its embedding lookup
clamps an id past its end to another token instead of failing), and a prompt that fits the engine's cache
rows. The served model's limits come in as the validation context (`Limits.context`). SGLang's field names
are kept; its fields this engine does not implement (stop strings, penalties, streaming, ...) are ignored,
as before. A body that breaks a rule is answered 400 with `errors`: one {"field", "rule", "message"} per
broken rule, `field` a path such as sampling_params.top_k or input_ids[1] ("body" for the body itself).
`answering_failures` answers every failure of an endpoint as JSON, so none closes the client's connection.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import PydanticCustomError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from rollout.engines.protocol import EngineError, SamplingParams
from tbjax.engine.request_checks import MAX_STOP_TOKENS

log = logging.getLogger(__name__)

SGLANG_DEFAULTS = {"max_new_tokens": 128, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0}
INT32_MAX = 2**31 - 1  # the engine's token, top-k and budget rows are int32
MIN_TEMPERATURE = 1e-6  # SGLang's greedy threshold; far below it logits / temperature overflow float32
MAX_TEMPERATURE = 1e6  # beyond it sampling is uniform already; far beyond, float32 overflows


MAX_NAME_CHARS = 256  # a rid or a weight version: an id, not a payload (a 100 MB rid was echoed back)
MAX_PATH_CHARS = 4096  # PATH_MAX
BODY_BYTES_PER_TOKEN = 16  # a token id in JSON is at most 7 digits and its separator: room for whitespace
BODY_BYTES_BESIDE_PROMPT = 64 * 1024  # sampling parameters, rid, flags


class BodyTooLarge(ValueError):
    """A request body past the server's limit (answered 413)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What the served engine can take: token ids below `vocab_size`, prompts of at most `max_prompt_tokens`,
    bodies of at most `max_body_bytes` (the longest prompt's JSON with room to spare: nothing larger is read)."""

    vocab_size: int
    max_prompt_tokens: int

    @property
    def max_body_bytes(self) -> int:
        return BODY_BYTES_BESIDE_PROMPT + BODY_BYTES_PER_TOKEN * self.max_prompt_tokens

    @property
    def context(self) -> dict[str, Limits]:
        """The validation context the models read these limits from."""
        return {"limits": self}


def _limits(info: ValidationInfo) -> Limits:
    """The limits a body is validated against: the server passes them as `Limits.context`."""
    if info.context is None:
        raise RuntimeError("a generate body is validated with context=Limits(...).context, the served limits")
    return info.context["limits"]


def _below_vocabulary(token: int, info: ValidationInfo) -> int:
    vocab_size = _limits(info).vocab_size
    if token >= vocab_size:
        raise PydanticCustomError("less_than", "Input should be less than {lt}, the model's vocabulary size",
                                  {"lt": vocab_size})
    return token


def _fits_the_cache(input_ids: list[int], info: ValidationInfo) -> list[int]:
    longest = _limits(info).max_prompt_tokens
    if len(input_ids) > longest:
        raise PydanticCustomError("too_long", "Prompt should have at most {max_length} tokens to fit the engine's "
                                  "max_len, not {actual_length}", {"max_length": longest,
                                                                    "actual_length": len(input_ids)})
    return input_ids


def _greedy_or_at_least_the_minimum(temperature: float) -> float:
    if 0 < temperature < MIN_TEMPERATURE:
        raise PydanticCustomError("greedy_or_greater_than_equal", "Input should be 0 (greedy) or at least {ge}",
                                  {"ge": MIN_TEMPERATURE})
    return temperature


def _off_or_positive(top_k: int) -> int:
    if top_k == 0:
        raise PydanticCustomError("off_or_greater_than_equal", "Input should be -1 (off) or at least 1")
    return top_k


TokenId = Annotated[StrictInt, Field(ge=0), AfterValidator(_below_vocabulary)]
Int32 = Annotated[StrictInt, Field(le=INT32_MAX)]
Finite = Annotated[StrictFloat, Field(allow_inf_nan=False)]


class SamplingBody(BaseModel):
    """SGLang's `sampling_params`, the part this engine implements; absent or null: SGLang's default."""

    max_new_tokens: Annotated[Int32, Field(ge=1)] | None = None
    temperature: Annotated[Finite, Field(ge=0, le=MAX_TEMPERATURE),
                           AfterValidator(_greedy_or_at_least_the_minimum)] | None = None
    top_p: Annotated[Finite, Field(gt=0, le=1)] | None = None
    top_k: Annotated[Int32, Field(ge=-1), AfterValidator(_off_or_positive)] | None = None
    min_p: Annotated[Finite, Field(ge=0, lt=1)] | None = None
    stop_token_ids: Annotated[list[TokenId], Field(max_length=MAX_STOP_TOKENS)] | None = None
    sampling_seed: Annotated[StrictInt, Field(ge=-(2**63), lt=2**64)] | None = None  # the engine keeps 31 bits

    def to_sampling(self) -> SamplingParams:
        """The engine's SamplingParams, SGLang's defaults filling what the body left out."""
        values = {**SGLANG_DEFAULTS, **self.model_dump(exclude_none=True)}
        return SamplingParams(max_new_tokens=values["max_new_tokens"], temperature=float(values["temperature"]),
                              top_p=float(values["top_p"]), top_k=values["top_k"], min_p=float(values["min_p"]),
                              stop_token_ids=tuple(values.get("stop_token_ids", ())),
                              seed=values.get("sampling_seed"))


class GenerateBody(BaseModel):
    """POST /generate: one prompt of token ids (SGLang's `text` prompts and batches are not served here)."""

    input_ids: Annotated[list[TokenId], Field(min_length=1), AfterValidator(_fits_the_cache)]
    sampling_params: SamplingBody | None = None
    rid: Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)] | None = None
    return_logprob: StrictBool | None = None
    logprob_start_len: Annotated[Int32, Field(ge=-1)] | None = None  # -1 (SGLang's default): no prompt logprobs
    lora_path: Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)] | None = None  # a loaded adapter's name


class EndSessionBody(BaseModel):
    """POST /end_session (this server's own): the episode is over, and the cache row its session held in
    deterministic mode goes back to the pool."""

    session_id: Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME_CHARS)]


def session_named(header: str | None) -> str | None:
    """The session a /generate request names in its session header (None: none), refused when it is empty or
    longer than an id (MAX_NAME_CHARS)."""
    if header is not None and not 0 < len(header) <= MAX_NAME_CHARS:
        raise ValueError(f"the session header must name a session in 1 to {MAX_NAME_CHARS} characters, got "
                         f"{len(header)}")
    return header


class UpdateWeightsBody(BaseModel):
    """POST /update_weights_from_disk: an HF directory of the served architecture, and the version it becomes
    (its path when none is given)."""

    model_path: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH_CHARS)]
    weight_version: Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)] | None = None


class LoadLoraBody(BaseModel):
    """POST /load_lora_adapter: a PEFT adapter directory, served under `lora_name` (`pinned` is accepted: this
    server never evicts an adapter)."""

    lora_name: Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME_CHARS)]
    lora_path: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH_CHARS)]
    pinned: StrictBool | None = None


class UnloadLoraBody(BaseModel):
    """POST /unload_lora_adapter: the adapter to drop."""

    lora_name: Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME_CHARS)]


class MemoryBody(BaseModel):
    """POST /release_memory_occupation and /resume_memory_occupation: SGLang's tags (null: all of them)."""

    tags: Annotated[list[Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)]], Field(max_length=8)] | None = None


def broken_rules(error: ValidationError) -> list[dict[str, Any]]:
    """One {"field", "rule", "message"} per broken rule. The offending input is not echoed (it can be any size)."""
    return [{"field": _field(e["loc"]), "rule": e["type"], "message": e["msg"]}
            for e in error.errors(include_url=False, include_input=False, include_context=False)]


def _field(location: tuple[int | str, ...]) -> str:
    """pydantic's error location as a path: ("sampling_params", "top_k") -> sampling_params.top_k,
    ("input_ids", 1) -> input_ids[1]; the body itself (not JSON, not an object) -> body."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else part
    return path or "body"


Endpoint = Callable[[Request], Awaitable[Response]]
ErrorBody = Callable[[str], dict[str, Any]]


def generate_error(message: str) -> dict[str, Any]:
    """The shape of a /generate failure."""
    return {"error": message}


def admin_error(message: str) -> dict[str, Any]:
    """SGLang's shape for its admin endpoints' failures, which the SGLang client reads."""
    return {"success": False, "message": message}


def lora_error(message: str) -> dict[str, Any]:
    """SGLang's shape for the adapter endpoints' failures."""
    return {"success": False, "error_message": message}


def answering_failures(endpoint: Endpoint, error_body: ErrorBody) -> Endpoint:
    """`endpoint` with every failure answered as JSON rather than raised: Starlette answers a raised exception
    with a 500 and raises it again, and uvicorn then closes the kept-alive connection, so the client's next
    request on it failed too. 400: the body broke a rule (ValidationError, with `errors`) or the engine refused
    the request (ValueError); 413: the body grew past the limit as it arrived (BodyTooLarge, from
    `tbjax.engine.body_limit`) and 400 for a client that left mid-body (ClientDisconnect, one INFO line); 503:
    the engine's worker is gone or its output is broken (EngineError); 500: anything else, logged."""
    @functools.wraps(endpoint)
    async def answered(request: Request) -> Response:
        try:
            return await endpoint(request)
        except BodyTooLarge as error:  # a ValueError too: caught first
            return JSONResponse(error_body(str(error)), status_code=413)
        except ValidationError as error:  # a ValueError too: caught first
            rules = broken_rules(error)
            summary = "; ".join(f"{rule['field']}: {rule['message']} ({rule['rule']})" for rule in rules)
            return JSONResponse({**error_body(f"invalid request: {summary}"), "errors": rules}, status_code=400)
        except ValueError as error:
            return JSONResponse(error_body(str(error)), status_code=400)
        except EngineError as error:
            return JSONResponse(error_body(str(error)), status_code=503)
        except ClientDisconnect:  # the client left mid-body: nobody reads the answer, and it is not our failure
            log.info("%s %s: the client disconnected before its body arrived", request.method, request.url.path)
            return JSONResponse(error_body("client disconnected"), status_code=400)
        except Exception as error:
            log.exception("%s %s failed", request.method, request.url.path)
            return JSONResponse(error_body(f"internal error: {error!r}"), status_code=500)
    return answered
