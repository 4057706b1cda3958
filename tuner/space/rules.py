"""Rules between parameters, parsed from plain comparisons (never ``eval``).

Grammar: ``operand OP operand`` with OP one of ``<= < >= > == !=`` and each operand a product or
quotient of names and numbers, e.g. ``long_prefill_token_threshold <= max_num_batched_tokens``
or ``parallel * 2048 <= ctx_size``. Names are parameter names of the space. A quoted value is
compared as text, with ``==`` or ``!=``: ``deep_gemm_dense != "0"``. A rule may hold only under
a condition, ``if COMPARISON then COMPARISON``, for pairs of choices that contradict each other:
``if moe_backend == "deep_gemm" then deep_gemm_dense == "1"``.
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
_IF_THEN = re.compile(r"^\s*if\s+(?P<when>.+?)\s+then\s+(?P<then>.+)$")
_QUOTED = re.compile(r"""^\s*(?P<q>["'])(?P<text>[^"']*)(?P=q)\s*$""")
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
class Literal:
    """A quoted value (``"deep_gemm"``), compared with ``==`` or ``!=`` as text."""

    text: str

    @property
    def names(self) -> set[str]:
        return set()


Operand = Term | Literal


@dataclass(frozen=True)
class Comparison:
    """``lhs OP rhs``; with a quoted side, the other side's value is compared as text."""

    lhs: Operand
    op: str
    rhs: Operand

    @property
    def names(self) -> set[str]:
        return self.lhs.names | self.rhs.names

    def holds(self, values: Mapping[str, object]) -> bool:
        if isinstance(self.lhs, Term) and isinstance(self.rhs, Term):
            return _OPS[self.op](self.lhs.value(values), self.rhs.value(values))
        same = _text(self.lhs, values) == _text(self.rhs, values)  # quoted: == or != only
        return same if self.op == "==" else not same

    def violation(self, values: Mapping[str, object]) -> float:
        """0 when it holds, else how far off: relative for numbers, 1 for text."""
        if self.holds(values):
            return 0.0
        if not (isinstance(self.lhs, Term) and isinstance(self.rhs, Term)):
            return 1.0
        lhs, rhs = self.lhs.value(values), self.rhs.value(values)
        return max(abs(lhs - rhs) / max(abs(lhs), abs(rhs), 1.0), 1e-3)


@dataclass(frozen=True)
class Rule:
    """A parsed rule: a comparison that must hold, only ``when`` another one holds if given."""

    text: str
    then: Comparison
    when: Comparison | None = None

    @property
    def names(self) -> set[str]:
        return self.then.names | (self.when.names if self.when else set())

    def holds(self, values: Mapping[str, object]) -> bool:
        return (self.when is not None and not self.when.holds(values)) or self.then.holds(values)

    def violation(self, values: Mapping[str, object]) -> float:
        """How far ``values`` are from the rule (0 when it holds), for the sampler."""
        return 0.0 if self.holds(values) else self.then.violation(values)


def parse_rule(text: str) -> Rule:
    """Parse one rule; raises ``RuleSyntaxError`` naming what is wrong."""
    cond = _IF_THEN.match(text)
    if cond is None:
        return Rule(text, _comparison(text))
    return Rule(text, _comparison(cond["then"]), _comparison(cond["when"]))


def _comparison(text: str) -> Comparison:
    match = _RULE.match(text)
    if match is None:
        raise RuleSyntaxError(f"expected 'A OP B' with OP one of {', '.join(_OPS)}")
    lhs, op, rhs = _operand(match["lhs"]), match["op"], _operand(match["rhs"])
    if (isinstance(lhs, Literal) or isinstance(rhs, Literal)) and op not in ("==", "!="):
        raise RuleSyntaxError(f"a quoted value is compared with == or != only, not {op}")
    return Comparison(lhs, op, rhs)


def _operand(text: str) -> Operand:
    quoted = _QUOTED.match(text)
    return Literal(quoted["text"]) if quoted else _term(text)


def _text(operand: Operand, values: Mapping[str, object]) -> str:
    if isinstance(operand, Literal):
        return operand.text
    if len(operand.factors) == 1 and isinstance(name := operand.factors[0][1], str):
        return str(values[name])
    return _plain(operand.value(values))


def _plain(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


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
