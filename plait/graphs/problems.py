"""Problems of a graph file: a path, a message, a hint, and where the path sits in the source.

A :class:`Problem` is a ``str`` (``path: message (hint)``), so code that reads problems
as text keeps working, and it carries its parts for ``plait graph validate --json``.
:func:`locate` finds a path's line and column in the JSON or YAML text it came from.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable
from typing import Any

import yaml

_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


class Problem(str):
    """One problem: ``path: message``, with an optional hint after it in parentheses.

    Attributes:
        path: where it is, like ``nodes[3].verdicts.fail`` (``(root)``, ``(file)``).
        message: what is wrong.
        hint: how to fix it, or None.
    """

    path: str
    message: str
    hint: str | None
    line: int | None
    column: int | None

    def __new__(
        cls,
        path: str,
        message: str,
        hint: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> Problem:
        """A problem at ``path``; its text is ``path: message (hint)``.

        ``line`` and ``column`` (1-based) are given where the reader knows them (a
        parse error); otherwise :meth:`as_dict` finds them from the path.
        """
        self = super().__new__(cls, f"{path}: {message}" + (f" ({hint})" if hint else ""))
        self.path, self.message, self.hint = path, message, hint
        self.line, self.column = line, column
        return self

    @classmethod
    def of(cls, text: str) -> Problem:
        """The problem a ``path: message`` text states (itself if it is one)."""
        if isinstance(text, Problem):
            return text
        path, sep, message = text.partition(": ")
        return cls(path, message) if sep else cls("(root)", text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Problem, (self.path, self.message, self.hint, self.line, self.column))

    def as_dict(self, source: str | None = None) -> dict[str, Any]:
        """``{path, message, line, column, hint}``; line and column from ``source`` or None."""
        line, column = self.line, self.column
        if line is None and source is not None and not self.path.startswith("("):
            line, column = locate(source, self.path)
        return {
            "path": self.path,
            "message": self.message,
            "line": line,
            "column": column,
            "hint": self.hint,
        }


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """``did you mean "x"?`` for the closest of ``known`` to ``name``, or None."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f'did you mean "{close[0]}"?' if close else None


MAX_DEPTH = 64
"""The deepest nesting of objects and lists a graph may hold (``response_format`` included)."""

MAX_VALUES = 200_000
"""The most values (objects, lists, strings, numbers) a graph may hold."""


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def shape_problems(data: Any) -> list[Problem]:
    """What makes ``data`` unsafe to read further: too deep, too large, lone surrogates.

    One walk without recursion, so a hostile value is measured, never overflows the
    stack; shared references (a graph built in Python) count each time they appear.
    """
    problems: list[Problem] = []
    count = 0
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack and len(problems) < 10:
        value, path, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return [Problem("(root)", f"the graph holds over {MAX_VALUES} values")]
        if isinstance(value, str):
            if _has_surrogate(value):
                problems.append(
                    Problem(path or "(root)", "a string holds a lone surrogate (not valid text)")
                )
            continue
        if not isinstance(value, dict | list | tuple):
            continue
        if depth >= MAX_DEPTH:
            problems.append(
                Problem(path or "(root)", f"nested over {MAX_DEPTH} levels deep (flatten it)")
            )
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _has_surrogate(key):
                    problems.append(
                        Problem(path or "(root)", "a key holds a lone surrogate (not valid text)")
                    )
                sub = f"{path}.{key}" if path else str(key)
                stack.append((item, sub, depth + 1))
        else:
            stack.extend((item, f"{path}[{k}]", depth + 1) for k, item in enumerate(value))
    return problems


def _parts(path: str) -> list[str | int]:
    if path.startswith("("):
        return []
    return [int(m.group(2)) if m.group(2) else m.group(1) for m in _PART.finditer(path)]


@functools.lru_cache(maxsize=4)
def _compose(source: str) -> yaml.Node | None:
    try:
        return yaml.compose(source, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return None


def locate(source: str, path: str) -> tuple[int | None, int | None]:
    """The 1-based line and column of ``path`` in JSON or YAML ``source``.

    The deepest part of the path found counts (a missing field is reported where its
    object starts); (None, None) when the source does not compose as YAML (JSON is
    YAML, barring rare corners) or holds no object at the top.
    """
    node = _compose(source)
    if node is None:
        return None, None
    mark = node.start_mark
    for part in _parts(path):
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    mark, child = key.start_mark, value
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part < len(node.value):
                child = node.value[part]
                mark = child.start_mark
        if child is None:
            break
        node = child
    return mark.line + 1, mark.column + 1


__all__ = ["MAX_DEPTH", "MAX_VALUES", "Problem", "did_you_mean", "locate", "shape_problems"]
