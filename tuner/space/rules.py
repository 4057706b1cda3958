"""Rules between parameters, parsed from plain comparisons (never ``eval``).

Grammar: ``operand OP operand`` with OP one of ``<= < >= > == !=`` and each operand a product or
quotient of names and numbers, e.g. ``long_prefill_token_threshold <= max_num_batched_tokens``
or ``parallel * 2048 <= ctx_size``. Names are parameter names of the space.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_RULE = re.compile(r"^\s*(?P<lhs>[^<>=!]+?)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<rhs>[^<>=!]+?)\s*$")
_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>[*/]))"
)


class RuleSyntaxError(ValueError):
    """The rule text does not follow the grammar above."""


@dataclass(frozen=True)
class Term:
    """A product of factors; each factor is a name or a number, multiplied or divided."""

    factors: tuple[tuple[str, str | float], ...]  # (op, name-or-number), first op is "*"

    @property
    def names(self) -> set[str]:
        return {f for _, f in self.factors if isinstance(f, str)}

    def value(self, values: Mapping[str, object]) -> float:
        total = 1.0
        for op, factor in self.factors:
            x = _number(values[factor]) if isinstance(factor, str) else factor
            total = total * x if op == "*" else total / x
        return total


@dataclass(frozen=True)
class Rule:
    """A parsed comparison between two terms."""

    text: str
    lhs: Term
    op: str
    rhs: Term

    @property
    def names(self) -> set[str]:
        return self.lhs.names | self.rhs.names

    def holds(self, values: Mapping[str, object]) -> bool:
        return _OPS[self.op](self.lhs.value(values), self.rhs.value(values))


def parse_rule(text: str) -> Rule:
    """Parse one rule; raises ``RuleSyntaxError`` naming what is wrong."""
    match = _RULE.match(text)
    if match is None:
        raise RuleSyntaxError(f"expected 'A OP B' with OP one of {', '.join(_OPS)}")
    return Rule(text, _term(match["lhs"]), match["op"], _term(match["rhs"]))


def _term(text: str) -> Term:
    factors: list[tuple[str, str | float]] = []
    pos, want_operand, op = 0, True, "*"
    while pos < len(text):
        tok = _TOKEN.match(text, pos)
        if tok is None or (tok["op"] is not None) == want_operand:
            raise RuleSyntaxError(f"cannot read {text.strip()!r} at {text[pos:].strip()!r}")
        if tok["op"]:
            op = tok["op"]
        else:
            factors.append((op, tok["name"] or float(tok["num"])))
        want_operand = tok["op"] is not None
        pos = tok.end()
    if want_operand:
        raise RuleSyntaxError(f"{text.strip()!r} ends without an operand")
    return Term(tuple(factors))


def _number(value: object) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"value {value!r} is not a number")
