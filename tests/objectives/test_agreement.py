"""Agreement of a launch's probe answers with the baseline's: the three figures."""

from __future__ import annotations

import pytest

from objectives.agreement import agreement, first_difference


def test_identical_answers_agree_exactly() -> None:
    a = agreement([[1, 2, 3], [4, 5, 6]], [[1, 2, 3], [4, 5, 6]])
    assert (a.probes, a.identical, a.exact, a.tokens, a.first_diff) == (2, 2, 1.0, 1.0, None)
    assert a.words() == "2/2 identical, 100.0% of tokens"


def test_a_late_difference_costs_few_tokens_and_says_where() -> None:
    a = agreement([[1, 2, 3, 4], [5, 6, 7, 8]], [[1, 2, 3, 9], [5, 0, 7, 8]])
    assert a.identical == 0 and a.exact == 0.0
    assert a.tokens == pytest.approx(6 / 8)
    assert a.first_diff == pytest.approx((3 + 1) / 2)  # over the probes that differ


def test_a_shorter_answer_differs_where_it_ends() -> None:
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert agreement([[1, 2]], [[1, 2, 3]]).tokens == pytest.approx(2 / 3)


def test_text_tokens_compare_as_ids_do() -> None:
    a = agreement([["the", "cat"], ["a", "dog"]], [["the", "cat"], ["a", "cow"]])
    assert (a.identical, a.tokens, a.first_diff) == (1, 0.75, 1.0)


def test_no_probes_is_no_disagreement() -> None:
    assert agreement([], []).exact == 1.0 and agreement([], []).tokens == 1.0
