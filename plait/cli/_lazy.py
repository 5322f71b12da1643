"""Command groups whose commands are imported on first use.

``plait --version`` should not pay for Ray, Redis, the graph engine and the HTTP client
that some command somewhere needs: a :func:`lazy_group` knows each of its commands by a
:class:`LazyCommand` (where it is defined, and its one-line help), imports the module of
the one command being run, and lists every command in ``--help`` from the table alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer import _click as click  # typer's own click: typer >= 0.29 carries it inside
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """One command of a lazy group, found where it is defined when it is first used.

    Attributes:
        module: the module that defines it, imported when the command runs or shows its
            own help.
        attribute: its name in ``module``: a ``typer.Typer`` (a group of commands) or
            a command function (decorated with ``@some_app.command(...)`` or not).
        help: its one-line help, what ``--help`` of the group lists without importing
            ``module``; a test checks it against the command's own help.
        also: modules that add commands to the ``typer.Typer`` (imported before the group
            is built), for a group whose commands are spread over several modules.
    """

    module: str
    attribute: str
    help: str
    also: tuple[str, ...] = ()

    def load(self, name: str, group: TyperGroup) -> click.Command:
        """The command, imported and converted to a click command named ``name``."""
        target = getattr(importlib.import_module(self.module), self.attribute)
        for module in self.also:
            importlib.import_module(module)
        if isinstance(target, typer.Typer):
            command: click.Command = typer.main.get_group(target)
        else:
            command = typer.main.get_command_from_info(
                CommandInfo(name=name, callback=target),
                pretty_exceptions_short=True,
                rich_markup_mode=group.rich_markup_mode,
            )
        command.name = name
        return command


class LazyGroup(TyperGroup):
    """A typer group whose commands beyond those already built come from :attr:`lazy`."""

    lazy: ClassVar[Mapping[str, LazyCommand]] = {}
    """The group's commands by name; made by :func:`lazy_group`."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name: the table's, in its order, then any other built already."""
        return [*self.lazy, *(name for name in self.commands if name not in self.lazy)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, imported on first use; while the group's help is
        written, a stand-in that carries only the table's one-line help."""
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = self.lazy.get(cmd_name)
        if entry is None:
            return None
        if self._listing:
            return TyperCommand(cmd_name, help=entry.help)
        command = entry.load(cmd_name, self)
        self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The group's help, listing its commands from the table."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def lazy_group(commands: Mapping[str, LazyCommand]) -> type[LazyGroup]:
    """A :class:`LazyGroup` class for ``typer.Typer(cls=...)`` knowing ``commands``."""
    return type("LazyGroup", (LazyGroup,), {"lazy": dict(commands)})


def every_command(group: TyperGroup, ctx: Any = None) -> dict[str, click.Command]:
    """Every command of ``group`` by name, lazy ones imported (for tests and tools)."""
    context = ctx or click.Context(group)
    found = {}
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is not None:
            found[name] = command
    return found
