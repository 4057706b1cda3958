"""The stand-in tokenizer's measures of a prompt."""

from __future__ import annotations

from launchers.simengine.tokens import recurring_share


def test_recurring_share_counts_the_ngrams_a_prompt_repeats() -> None:
    assert recurring_share([1, 2, 3, 4, 5, 6]) == 0.0
    assert recurring_share([1, 2, 3, 1, 2, 3]) == 0.5  # (1,2,3) twice among four 3-grams
    assert recurring_share([7] * 10) == 1.0
    assert recurring_share([1, 2]) == 0.0
