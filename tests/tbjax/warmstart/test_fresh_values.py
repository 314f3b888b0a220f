"""Fresh values: long numbers get new random digits, the same number everywhere it recurs, nothing else moves."""

import numpy as np
import pytest

from rollout.trajectory import Trajectory
from tbjax.assets.tokenizer import train_tokenizer
from tbjax.warmstart.fresh_values import MIN_DIGITS, digit_token_ids, refresh_values


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer()


def trajectory(tokenizer, text: str, trained: str) -> Trajectory:
    prompt, answer = tokenizer.encode(text), tokenizer.encode(trained)
    ids = prompt + answer
    mask = [0] * len(prompt) + [1] * len(answer)
    return Trajectory("t", "g", ids, mask, [0.0] * len(ids), [], 1.0, "agent_done")


def test_recurring_ids_get_one_new_value_and_short_numbers_stay(tokenizer) -> None:
    before = trajectory(tokenizer, "My card is 29087000109394 and I owe 12 dollars.",
                        '{"card_number": "29087000109394", "pin": "1607"}')
    after = refresh_values(before, digit_token_ids(tokenizer), np.random.default_rng(0))
    old, new = tokenizer.decode(before.token_ids), tokenizer.decode(after.token_ids)
    card = [w for w in new.replace('"', " ").split() if len(w) == 14 and w.isdigit()]
    assert len(card) == 2 and card[0] == card[1] != "29087000109394"
    assert "12 dollars" in new and "1607" not in new
    assert len(new) == len(old) and after.loss_mask == before.loss_mask
    assert [c for c in new if not c.isdigit()] == [c for c in old if not c.isdigit()]


def test_numbers_shorter_than_the_threshold_are_kept(tokenizer) -> None:
    short = "1" * (MIN_DIGITS - 1)
    before = trajectory(tokenizer, f"Room {short}.", "ok")
    assert refresh_values(before, digit_token_ids(tokenizer), np.random.default_rng(0)) == before


def test_a_tokenizer_that_merges_digits_is_refused() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(["1234567890 " * 50], trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    with pytest.raises(ValueError, match="one token per digit"):
        digit_token_ids(PreTrainedTokenizerFast(tokenizer_object=bpe))
