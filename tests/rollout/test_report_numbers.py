"""rollout.report_numbers: how shares, their deltas and large counts read in reports and on the console."""

import pytest

from rollout.report_numbers import count, interval, pct, points


@pytest.mark.parametrize("value, text", [(0, "0"), (999, "999"), (1_000, "1.0K"), (999_960, "1.0M"),
                                         (1_180_000, "1.2M"), (8_030_000_000, "8.0B"), (27_230_000_000, "27.2B")])
def test_counts_read_like_model_sizes(value, text):
    # the tiny model read "0.00118B parameters"
    assert count(value) == text


def test_shares_in_percent_and_deltas_in_points():
    assert (pct(0.557), points(0.0964), interval([0.042, 0.151])) == ("55.7%", "+9.6 pts", "[+4.2, +15.1]")
    assert (pct(None), points(None), interval(None)) == ("n/a", "n/a", "n/a")
