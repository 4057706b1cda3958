"""YAML text -> data, within limits, with no key given twice.

``yaml.safe_load`` builds whatever a file asks for: a few KB of nested aliases (each level
naming the one below ten times) stand for billions of values, which pydantic then copies out
until memory runs out; and a key given twice keeps the last value without a word. Space files
(and a study's stored copy of one) are read here instead: at most ``MAX_BYTES`` of text and
``MAX_NODES`` values once every alias is expanded, no alias inside what it names, no mapping
with a key twice (the YAML path of the second one is named).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 1024 * 1024  # the largest shipped space is a few KB
MAX_NODES = 100_000  # values once every alias is expanded; a large space has a few hundred
_MERGE = "tag:yaml.org,2002:merge"


class YamlLimitError(ValueError):
    """The text is over a limit, or gives a key twice; the message says which and where."""


def read_yaml_text(text: str) -> Any:
    """The data of one YAML document, checked as the module docstring says.

    Raises:
        YamlLimitError: over a limit, an alias inside what it names, or a key given twice.
        yaml.YAMLError: not YAML.
    """
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise YamlLimitError(f"larger than {MAX_BYTES // 1024} KiB; a space file is a few KB")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise YamlLimitError("nested deeper than YAML can be read") from None
    if node is None:
        return None
    _check_keys(node)
    if (size := _expanded_size(node, {}, set())) > MAX_NODES:
        raise YamlLimitError(
            f"its aliases expand to {size:,} values or more (at most {MAX_NODES:,}): an "
            "anchor is used inside itself, many times over"
        )
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_keys(root: Node) -> None:
    """Each mapping once (an alias's target is checked where it is defined)."""
    seen: set[int] = set()
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            stack.extend(_mapping_children(node, path))
        elif isinstance(node, SequenceNode):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node.value))


def _mapping_children(node: MappingNode, path: str) -> list[tuple[Node, str]]:
    first: dict[tuple[str, str], int] = {}
    children: list[tuple[Node, str]] = []
    for key, value in node.value:
        if key.tag == _MERGE or not isinstance(key, ScalarNode):
            children.append((value, path))
            continue
        where = f"{path}.{key.value}" if path else str(key.value)
        line = first.setdefault((key.tag, key.value), key.start_mark.line + 1)
        if line != key.start_mark.line + 1:
            raise YamlLimitError(
                f"{where}: given twice (line {line} and line {key.start_mark.line + 1}); "
                "the second would silently replace the first"
            )
        children.append((value, where))
    return children


def _expanded_size(node: Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Values under ``node`` with aliases expanded; stops counting past ``MAX_NODES``."""
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in open_:
        raise YamlLimitError("an alias is used inside the anchor it names")
    open_.add(id(node))
    total = 1
    if isinstance(node, MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, SequenceNode):
        children = list(node.value)
    else:
        children = []
    for child in children:
        total += _expanded_size(child, sizes, open_)
        if total > MAX_NODES:
            break
    open_.discard(id(node))
    sizes[id(node)] = total
    return total
