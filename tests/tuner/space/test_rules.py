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


@pytest.mark.parametrize(
    ("values", "holds"),
    [
        ({"moe_backend": "deep_gemm", "deep_gemm_dense": "0"}, False),
        ({"moe_backend": "deep_gemm", "deep_gemm_dense": "1"}, True),
        ({"moe_backend": "auto", "deep_gemm_dense": "0"}, True),  # the condition is not met
    ],
)
def test_a_conditional_rule_forbids_a_contradictory_pair(values, holds) -> None:
    rule = parse_rule('if moe_backend == "deep_gemm" then deep_gemm_dense == "1"')
    assert rule.holds(values) is holds
    assert rule.names == {"moe_backend", "deep_gemm_dense"}
    assert (rule.violation(values) > 0) is not holds


def test_a_quoted_value_is_compared_as_text_with_numbers_too() -> None:
    rule = parse_rule("if async_scheduling == 'on' then num_speculative_tokens == 0")
    assert not rule.holds({"async_scheduling": "on", "num_speculative_tokens": 3})
    assert rule.holds({"async_scheduling": "on", "num_speculative_tokens": 0})
    assert parse_rule('hccl_buffsize != "200"').holds({"hccl_buffsize": 512})


@pytest.mark.parametrize("text", ['a < "x"', 'if a == "x" b == 1', "if then a == 1"])
def test_quoted_and_conditional_syntax_errors(text) -> None:
    with pytest.raises(RuleSyntaxError):
        parse_rule(text)
