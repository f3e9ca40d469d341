"""The benchmark's paired shares (scripts/bench/measure.py): each round's rate against the comparison's rate in
the same round, so that what drifts between rounds falls out. No timing here: made-up rates."""

from __future__ import annotations

import statistics

import pytest
from bench.measure import paired


def test_a_paired_share_is_each_rounds_ratio_not_the_ratio_of_the_medians():
    # The machine's speed moves between rounds and both contenders' rates move with it; the addon is at 95%
    # of the comparison in three rounds of five. The two medians, each taken over rounds far apart, say 67%.
    base = [1000.0, 600.0, 400.0, 1100.0, 500.0]
    addon = [950.0, 330.0, 380.0, 1045.0, 400.0]
    share = paired(addon, base)
    assert share.shares == pytest.approx((0.95, 0.55, 0.95, 0.95, 0.80))
    assert share.median == pytest.approx(0.95)
    assert (share.low, share.high) == (pytest.approx(0.55), pytest.approx(0.95))
    assert statistics.median(addon) / statistics.median(base) == pytest.approx(400 / 600)
    assert share.text() == "95% (55-95)"


def test_rounds_that_do_not_pair_are_refused():
    with pytest.raises(ValueError, match="3 rounds against 2"):
        paired([1.0, 2.0, 3.0], [1.0, 2.0])


def test_a_round_in_which_the_comparison_passed_nothing_is_left_out():
    assert paired([5.0, 9.0], [0.0, 10.0]).shares == (0.9,)
