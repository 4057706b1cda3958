from __future__ import annotations

import pytest

from tuner.space.rules import RuleSyntaxError, parse_rule


@pytest.mark.parametrize(
    ("text", "values", "holds"),
    [
        ("a <= b", {"a": 1, "b": 2}, True),
        ("a <= b", {"a": 3, "b": 2}, False),
        ("a * 2048 <= ctx", {"a": 4, "ctx": 8192}, True),
        ("a * 2048 <= ctx", {"a": 5, "ctx": 8192}, False),
        ("ctx / a >= 2048", {"a": 4, "ctx": 8192}, True),
        ("a != 0", {"a": 0}, False),
        ("a > 1.5e3", {"a": 2000}, True),
    ],
)
def test_rule_evaluation(text, values, holds) -> None:
    assert parse_rule(text).holds(values) is holds


@pytest.mark.parametrize("text", ["a <=", "a b <= c", "a ** b < c", "f(a) < 1", "a <= b <= c"])
def test_rule_syntax_errors(text) -> None:
    with pytest.raises(RuleSyntaxError):
        parse_rule(text)


def test_rule_names() -> None:
    assert parse_rule("a * 2 <= b / c").names == {"a", "b", "c"}
