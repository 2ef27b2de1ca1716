"""The grid's alternating rounds (bench/compare_spargeattn.py) and how performance.md shows them
(bench/make_performance.py): pure Python, no GPU."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

from compare_spargeattn import alternating_rounds  # noqa: E402
from make_performance import rounds_note, speedup_cell  # noqa: E402


def test_rounds_flip_the_order_and_keep_every_figure():
    order = []
    figures = {"ours": iter([3.0, 1.0, 2.0]), "theirs": iter([9.0, 7.0, 8.0])}

    def run(name):
        order.append(name)
        return next(figures[name])

    out = alternating_rounds({"ours": "ours", "theirs": "theirs"}, run, 3)
    assert order == ["ours", "theirs", "theirs", "ours", "ours", "theirs"]
    assert out["ours"] == {"ms": 2.0, "ms_rounds": [3.0, 1.0, 2.0]}
    assert out["theirs"] == {"ms": 8.0, "ms_rounds": [9.0, 7.0, 8.0]}


def test_a_single_call_is_timed_once_a_round():
    out = alternating_rounds({"ours": None}, lambda _: 1.5, 4)
    assert out == {"ours": {"ms": 1.5, "ms_rounds": [1.5, 1.5, 1.5, 1.5]}}


def test_speedup_shows_the_range_of_the_rounds_ratios():
    ours = {"ms": 2.0, "ms_rounds": [2.0, 1.0, 4.0]}
    theirs = {"ms": 3.0, "ms_rounds": [3.0, 2.0, 5.0]}
    # ratios per round: 1.5, 2.0, 1.25; the cell's figure is median over median
    assert speedup_cell(ours, theirs) == "1.50 (1.25–2.00)"


def test_speedup_without_rounds_or_without_spargeattn():
    assert speedup_cell({"ms": 2.0}, {"ms": 3.0}) == "1.50"
    assert speedup_cell({"ms": 2.0}, {}) == "-"
    assert speedup_cell({"ms": 2.0, "ms_rounds": [2.0, 2.0]}, {"ms": 3.0, "ms_rounds": [3.0]}) == "1.50"


def test_the_rounds_are_named_only_where_the_bench_ran_them():
    assert rounds_note({"repeat": 10}) == ""
    assert "3 rounds" in rounds_note({"rounds": 3})
