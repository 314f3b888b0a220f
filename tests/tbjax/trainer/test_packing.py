"""Packing episodes into rows: targets shifted within each episode, nothing crosses a segment."""

import pytest

from rollout.trajectory import Trajectory
from tbjax.trainer.packing import HEAD_INDEX, PackingError, head_tokens_bucket, pack


def trajectory(ids, mask, name="t"):
    logprobs = [-0.5 if m else 0.0 for m in mask]
    return Trajectory(name, "g", list(ids), list(mask), logprobs, ["0"], 1.0, "user_done")


def test_rows_hold_whole_episodes_with_shifted_targets():
    a = trajectory([10, 11, 12, 13], [0, 0, 1, 1], "a")
    b = trajectory([20, 21, 22], [0, 1, 1], "b")
    c = trajectory([30, 31, 32, 33, 34, 35], [0, 0, 0, 1, 1, 1], "c")
    batch = pack([a, b, c], [1.0, -1.0, 0.5], [1.0, 1.0, 1.0], 7.0, row_len=8, micro_rows=2)
    tokens, segments, targets, mask = (batch.arrays[k][0] for k in ("tokens", "segments", "targets", "mask"))
    assert batch.shape == (1, 2, 8) and batch.trained_tokens == 7
    # first-fit decreasing: c (6) alone would leave 2, so row 0 = c, row 1 = a + b
    assert tokens[0].tolist() == [30, 31, 32, 33, 34, 35, 0, 0]
    assert tokens[1].tolist() == [10, 11, 12, 13, 20, 21, 22, 0]
    assert segments[1].tolist() == [1, 1, 1, 1, 2, 2, 2, 0]
    assert targets[1].tolist() == [11, 12, 13, 0, 21, 22, 0, 0]  # no target crosses into episode b
    assert mask[1].tolist() == [0, 1, 1, 0, 1, 1, 0, 0]
    assert batch.arrays["advantages"][0][1].tolist()[:6] == [1.0, 1.0, 1.0, 0.0, -1.0, -1.0]
    assert batch.arrays["positions"][0][1].tolist() == [0, 1, 2, 3, 0, 1, 2, 0]


def test_rows_round_up_to_micro_batches_and_devices():
    episodes = [trajectory([1, 2, 3], [0, 1, 1]) for _ in range(3)]
    batch = pack(episodes, [1.0] * 3, [1.0] * 3, 6.0, row_len=4, micro_rows=1, rows_multiple=2)
    assert batch.shape == (2, 2, 4)  # 3 rows -> 2 micro-batches of 1 row x 2 devices
    assert batch.arrays["mask"].sum() == 6  # the extra row trains nothing


def test_episode_longer_than_a_row_is_refused():
    with pytest.raises(PackingError, match="raise train.row_len"):
        pack([trajectory(range(10), [0] * 5 + [1] * 5)], [1.0], [1.0], 5.0, row_len=8, micro_rows=1)


def test_head_index_lists_each_shards_trained_positions():
    """The first test's layout split over 2 shards (one row each): row 0 trains positions 2-4 (c's last three
    tokens are predicted from 2, 3, 4), row 1 positions 1, 2, 4, 5; padded with -1 to the widest shard."""
    a = trajectory([10, 11, 12, 13], [0, 0, 1, 1], "a")
    b = trajectory([20, 21, 22], [0, 1, 1], "b")
    c = trajectory([30, 31, 32, 33, 34, 35], [0, 0, 0, 1, 1, 1], "c")
    batch = pack([a, b, c], [1.0, -1.0, 0.5], [1.0] * 3, 7.0, row_len=8, micro_rows=1, rows_multiple=2)
    index = batch.arrays[HEAD_INDEX]
    assert index.shape == (1, 2, 4)
    assert index[0].tolist() == [[2, 3, 4, -1], [1, 2, 4, 5]]
    flat_mask = batch.arrays["mask"][0].reshape(2, -1)
    for shard, positions in enumerate(index[0]):
        listed = positions[positions >= 0]
        assert flat_mask[shard, listed].all() and len(listed) == flat_mask[shard].sum()


@pytest.mark.parametrize(("count", "width"), [(0, 1), (7, 7), (9, 10), (1100, 1280), (1280, 1280), (1281, 1536)])
def test_head_width_wastes_at_most_a_quarter(count, width):
    assert head_tokens_bucket(count, cap=4096) == width
    assert head_tokens_bucket(count, cap=1000) == min(width, 1000)
