"""Saved program texts: a Python file whose body may ``await`` and ``return`` at top level.

The body is parsed and wrapped in an ``async def`` taking no arguments, so ``return``
ends the program with its result and every name it assigns stays local to one run; the
capabilities are its globals, beside the builtins.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from types import CodeType
from typing import Any

from plait.errors import ProgramError

_ENTRY = "__plait_program__"


def compile_text(source: str, filename: str = "<program>") -> CodeType:
    """Compile a program text into a module that defines its entry coroutine function.

    Raises:
        ProgramError: the text is not valid Python; the message gives the line.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError) as exc:  # ValueError: a null byte, on some Pythons
        raise ProgramError(_where(source, filename, exc)) from None
    body: list[ast.stmt] = list(tree.body) or [ast.Pass()]
    entry = ast.AsyncFunctionDef(
        name=_ENTRY,
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body,
        decorator_list=[],
        returns=None,
    )
    module = ast.Module(body=[entry], type_ignores=[])
    ast.copy_location(entry, body[0])
    ast.fix_missing_locations(module)
    try:
        return compile(module, filename, "exec")
    except SyntaxError as exc:
        raise ProgramError(_where(source, filename, exc)) from None


def _where(source: str, filename: str, exc: SyntaxError | ValueError) -> str:
    """One line for a text that does not compile: ``FILE:LINE: what``."""
    line = exc.lineno if isinstance(exc, SyntaxError) else None
    what = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    if line is None and "\x00" in source:  # Python names no line for a null byte
        line = source[: source.index("\x00")].count("\n") + 1
    return f"{filename}:{line}: {what}" if line is not None else f"{filename}: {what}"


async def run_text(code: CodeType, names: Mapping[str, Any]) -> Any:
    """Run compiled program text with ``names`` (the capabilities) as its globals."""
    namespace: dict[str, Any] = {"__name__": "__plait_program__", **names}
    exec(code, namespace)
    return await namespace[_ENTRY]()


__all__ = ["compile_text", "run_text"]
