"""Programs: async Python callables and saved program texts, run with capabilities.

A program is an ``async def`` held by name in a :class:`ProgramCatalog`
(``@plait.program`` collects into :data:`DEFAULT_CATALOG`) or referred to by import
path (``pkg.module:fn``), or a saved program text whose body may ``await`` and
``return`` at top level, stored in the mesh with an immutable version and sha256
(:mod:`plait.programs.store`). Promotion is a human act (:func:`promote`).
:meth:`ProgramsCapability.run` runs one nested with the caller's capabilities, never
more, spending from the caller's budget. :func:`gather` awaits calls at once, bounded,
failing fast when asked.
"""

from __future__ import annotations

from plait.programs.budget import CallBudget, SharedBudget
from plait.programs.capabilities import (
    AgentsCapability,
    AgentsPort,
    DecisionsCapability,
    MeshCapability,
    Missing,
    Payload,
    ToolsCapability,
)
from plait.programs.gather import gather
from plait.programs.registry import (
    DEFAULT_CATALOG,
    CallableProgram,
    ProgramCatalog,
    describe,
    import_program,
    program,
)
from plait.programs.runner import (
    Grants,
    ProgramsCapability,
    grant_all,
    resolve_saved,
    run_program,
    run_source,
)
from plait.programs.store import (
    ProgramSummary,
    Promotion,
    StoredProgram,
    get_program,
    list_programs,
    promote,
    save_program,
)
from plait.programs.text import compile_text

__all__ = [
    "DEFAULT_CATALOG",
    "AgentsCapability",
    "AgentsPort",
    "CallBudget",
    "CallableProgram",
    "DecisionsCapability",
    "Grants",
    "MeshCapability",
    "Missing",
    "Payload",
    "ProgramCatalog",
    "ProgramSummary",
    "ProgramsCapability",
    "Promotion",
    "SharedBudget",
    "StoredProgram",
    "ToolsCapability",
    "compile_text",
    "describe",
    "gather",
    "get_program",
    "grant_all",
    "import_program",
    "list_programs",
    "program",
    "promote",
    "resolve_saved",
    "run_program",
    "run_source",
    "save_program",
]
