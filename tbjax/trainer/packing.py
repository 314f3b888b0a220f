"""Packs episodes into fixed-width rows (several episodes per row, segment ids keep them apart) and rows
into micro-batches, with per-token targets, loss mask, behaviour log-probs, advantages and weights.

Position i of a row predicts token i+1 of the same episode, so every per-token array is stored at the
predicting position: the loss mask at i is the trajectory's mask of token i+1. Packing is first-fit
decreasing, so the only padding is what no episode fits into; the row count is rounded up to a multiple
of `rows_multiple` (the data-parallel width times micro-batches) with empty rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from rollout.score_rule import VERDICT, ScoreRule
from rollout.trajectory import Trajectory
from tbjax.sections.training import GRPOSection
from tbjax.trainer.objective import episode_advantages, token_weights

FIELDS = ("tokens", "positions", "segments", "targets", "mask", "behaviour_logprobs", "advantages", "weights")
FIELD_DTYPES = {name: np.dtype(np.float32 if name in ("behaviour_logprobs", "advantages", "weights") else np.int32)
                for name in FIELDS}
# [micro_batches, shards, head_tokens] int32: the trained positions of each shard's rows (see trained_positions)
HEAD_INDEX = "head_index"
# int32 like FIELDS, only in batches trained beside the rollouts (rollout.max_staleness > 0): 1 on the tokens of
# an episode with a turn sampled under older weights than the update starts from (tbjax.trainer.mismatch
# measures the engine-vs-trainer gap on the others, and reports these apart)
STALE = "stale"


@dataclasses.dataclass
class PackedBatch:
    """Arrays of shape [micro_batches, rows_per_micro, row_len] (see FIELDS) plus HEAD_INDEX, and the loss
    denominator."""

    arrays: dict[str, np.ndarray]
    denominator: float
    episodes: int
    trained_tokens: int

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.arrays["tokens"].shape


class PackingError(ValueError):
    """An episode cannot be packed as configured."""


def _first_fit_decreasing(lengths: Sequence[int], row_len: int) -> list[list[int]]:
    rows: list[list[int]] = []
    free: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, space in enumerate(free):
            if lengths[index] <= space:
                rows[r].append(index)
                free[r] -= lengths[index]
                break
        else:
            rows.append([index])
            free.append(row_len - lengths[index])
    return rows


def pack(trajectories: Sequence[Trajectory], advantages: Sequence[float] | np.ndarray,
         token_weight: Sequence[float] | np.ndarray, denominator: float, row_len: int, micro_rows: int,
         rows_multiple: int = 1, stale: Sequence[bool] | None = None) -> PackedBatch:
    """trajectories with one advantage and one token weight each (and, given `stale`, whether each is) -> a
    PackedBatch (with STALE, given `stale`).

    Each micro-batch holds micro_rows x rows_multiple rows (rows_multiple: the data-parallel width, so a
    micro-batch splits evenly over the devices); the last is filled with empty rows (mask 0, no effect).
    Memory per micro-batch is what micro_rows bounds; the number of micro-batches follows from the data.
    """
    lengths = [len(t.token_ids) for t in trajectories]
    too_long = [(t.task_id, n) for t, n in zip(trajectories, lengths, strict=True) if n > row_len]
    if too_long:
        raise PackingError(f"episode {too_long[0][0]} has {too_long[0][1]} tokens, more than a packed row "
                           f"({row_len}); raise train.row_len to at least the episode token budget")
    layout = _first_fit_decreasing(lengths, row_len)
    arrays = _empty_rows(len(layout), micro_rows * rows_multiple, row_len, (*FIELDS, STALE) if stale else FIELDS)
    trained = 0
    for r, members in enumerate(layout):
        offset = 0
        for segment, index in enumerate(members, start=1):
            t = trajectories[index]
            n = lengths[index]
            span = slice(offset, offset + n)
            arrays["tokens"][r, span] = t.token_ids
            arrays["positions"][r, span] = np.arange(n)
            arrays["segments"][r, span] = segment
            predict = slice(offset, offset + n - 1)  # position i predicts token i+1
            arrays["targets"][r, predict] = t.token_ids[1:]
            arrays["mask"][r, predict] = t.loss_mask[1:]
            arrays["behaviour_logprobs"][r, predict] = t.logprobs[1:]
            arrays["advantages"][r, predict] = advantages[index]
            arrays["weights"][r, predict] = token_weight[index]
            if stale is not None:
                arrays[STALE][r, predict] = stale[index]
            trained += int(np.sum(t.loss_mask[1:]))
            offset += n
    shaped = _micro_batches(arrays, micro_rows * rows_multiple, rows_multiple)
    return PackedBatch(shaped, float(denominator), len(trajectories), trained)


def _empty_rows(count: int, unit: int, row_len: int, names: Sequence[str] = FIELDS) -> dict[str, np.ndarray]:
    """Zeroed `names` (FIELDS, and STALE where a batch has it) for `count` rows rounded up to whole micro-batches
    of `unit` rows (at least one)."""
    rows = max(unit, math.ceil(count / unit) * unit)
    return {name: np.zeros((rows, row_len), FIELD_DTYPES.get(name, np.int32)) for name in names}


def _micro_batches(arrays: dict[str, np.ndarray], unit: int, rows_multiple: int) -> dict[str, np.ndarray]:
    """[rows, row_len] FIELDS -> [micro_batches, unit, row_len], plus their HEAD_INDEX."""
    rows, row_len = arrays["tokens"].shape
    shaped = {k: v.reshape(rows // unit, unit, row_len) for k, v in arrays.items()}
    shaped[HEAD_INDEX] = trained_positions(shaped["mask"], rows_multiple)
    return shaped


def episode_spans(batch: PackedBatch) -> list[tuple[int, int, int]]:
    """(row, start, length) of every episode of `batch`, rows counted across micro-batches."""
    row_len = batch.shape[2]
    spans = []
    for r, row in enumerate(batch.arrays["segments"].reshape(-1, row_len)):
        ids, starts, lengths = np.unique(row, return_index=True, return_counts=True)
        spans += [(r, int(start), int(n)) for i, start, n in zip(ids, starts, lengths, strict=True) if i]
    return spans


def split_episodes(batch: PackedBatch, parts: int, config: GRPOSection, rows_multiple: int = 1) -> list[PackedBatch]:
    """The batch's episodes dealt into `parts` mini-batches, each packed like the batch (row width, rows per
    micro-batch) with its own denominator for `config`'s aggregation; per-token values are copied, so advantages
    stay those of the whole groups. Episodes are dealt longest first, round robin, so the parts' token counts
    are close."""
    spans = episode_spans(batch)
    if parts > len(spans):
        raise ValueError(f"train.mini_batches={parts} exceeds the {len(spans)} episodes of this batch: every "
                         "mini-batch needs at least one episode; lower train.mini_batches")
    order = sorted(range(len(spans)), key=lambda i: -spans[i][2])
    return [_repacked(batch, [spans[i] for i in order[p::parts]], config, rows_multiple) for p in range(parts)]


def _repacked(batch: PackedBatch, spans: list[tuple[int, int, int]], config: GRPOSection,
              rows_multiple: int) -> PackedBatch:
    """The episodes at `spans` of `batch`, packed anew (first-fit decreasing) into a batch of their own."""
    _, unit, row_len = batch.shape
    source = {k: v.reshape(-1, row_len) for k, v in batch.arrays.items() if k != HEAD_INDEX}
    layout = _first_fit_decreasing([n for _, _, n in spans], row_len)
    arrays = _empty_rows(len(layout), unit, row_len, tuple(source))
    for r, members in enumerate(layout):
        offset = 0
        for segment, index in enumerate(members, start=1):
            row, start, n = spans[index]
            for name in source:
                arrays[name][r, offset:offset + n] = source[name][row, start:start + n]
            arrays["segments"][r, offset:offset + n] = segment
            offset += n
    lengths = np.asarray([source["mask"][row, start:start + n].sum() for row, start, n in spans])
    _, denominator = token_weights(lengths, config)
    return PackedBatch(_micro_batches(arrays, unit, rows_multiple), denominator, len(spans), int(lengths.sum()))


def head_tokens_bucket(count: int, cap: int) -> int:
    """The head's static width for `count` trained positions: rounded up to 4, 5, 6 or 7 times a power of two
    (at most a quarter wasted), so batches of similar size share one compiled update."""
    count = max(count, 1)
    step = max(1, 2 ** (count.bit_length() - 3))
    return min(cap, -(-count // step) * step)


def trained_positions(mask: np.ndarray, shards: int) -> np.ndarray:
    """mask [micro_batches, rows, row_len] -> [micro_batches, shards, head_tokens]: for each micro-batch and
    each data-parallel shard of its rows, the flat positions (within that shard's rows) that carry loss, padded
    with -1. The trainer computes the vocabulary head only there: prompts, tool results and padding are often
    most of an agent's tokens, and the head is the costliest layer of a small-model step."""
    micro_batches, rows, row_len = mask.shape
    per_shard = mask.reshape(micro_batches, shards, rows // shards * row_len) != 0
    width = head_tokens_bucket(int(per_shard.sum(-1).max()), per_shard.shape[-1])
    index = np.full((micro_batches, shards, width), -1, np.int32)
    for m, s in np.ndindex(micro_batches, shards):
        where = np.flatnonzero(per_shard[m, s])
        index[m, s, :len(where)] = where
    return index


def batch_from_groups(groups: Sequence[Sequence[Trajectory]], config: GRPOSection, row_len: int,
                      micro_rows: int, rows_multiple: int = 1, is_stale: Callable[[Trajectory], bool] | None = None,
                      score_rule: ScoreRule = VERDICT) -> PackedBatch | None:
    """Scored groups -> the packed batch with advantages (from `score_rule`'s shaped scores: the rule the group
    scheduler kept the groups by) and weights (none for the episodes the rule masks; STALE where `is_stale` says
    which episodes are); None when no trained token has an advantage (all scores equal in every group, or every
    unequal one masked): then there is nothing to learn and the optimizer must not step."""
    trajectories = [t for group in groups for t in group]
    advantages = episode_advantages([[score_rule.score(t) for t in group] for group in groups], config)
    trains = np.asarray([score_rule.trains(t) for t in trajectories], bool)
    if not np.any(advantages[trains]):
        return None
    lengths = np.asarray([sum(t.loss_mask[1:]) for t in trajectories]) * trains
    weights, denominator = token_weights(lengths, config)
    weights = weights * trains
    stale = None if is_stale is None else [is_stale(t) for t in trajectories]
    return pack(trajectories, advantages, weights, denominator, row_len, micro_rows, rows_multiple, stale)
