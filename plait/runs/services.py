"""What a serving process hands the actors it runs: :class:`RunServices`, built once.

:func:`plait.runs.serve` builds one per process and gives it to its runtime; every
actor the runtime activates reaches it through its context: a run owner asks for the
owner services (``ctx.service(OwnerServices)``, a part of it), an agent actor for the whole
(``ctx.service(RunServices)``). Nothing in it is looked up anywhere else: the programs
a process runs by name, its agents service, tools and model are what was passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from plait.actors import LeasedRuntime
from plait.models import Model
from plait.programs import AgentsPort, ProgramCatalog
from plait.runs.owner_services import OwnerServices
from plait.tools import ToolRegistry

S = TypeVar("S")


@dataclass(frozen=True)
class RunServices:
    """The services of one serving process.

    Attributes:
        owner_services: what its run owners share.
        programs: the catalog program refs are looked up in, by runs and agents alike.
        agents: the agent actors' service programs get as ``agents`` (built once per
            process); None: programs get an agents capability that refuses.
    """

    owner_services: OwnerServices
    programs: ProgramCatalog
    agents: AgentsPort | None = None

    @property
    def tools(self) -> ToolRegistry:
        """The tools this process offers."""
        return self.owner_services.tools

    @property
    def model(self) -> Model | None:
        """The model answering for every agent that names none (None: each profile's)."""
        return self.owner_services.env.model

    @property
    def cwd(self) -> Path:
        """Where tools work when nothing pins a workspace."""
        return self.owner_services.env.cwd

    def part(self, kind: type[S]) -> S | None:
        """The part of these services that is a ``kind`` (the owner services), if any."""
        return self.owner_services if isinstance(self.owner_services, kind) else None

    async def partitions_gained(self, runtime: LeasedRuntime, gained: set[int]) -> None:
        """Wake the runs of partitions the runtime took over (see :class:`OwnerServices`)."""
        await self.owner_services.partitions_gained(runtime, gained)

    async def partitions_to_avoid(self, runtime: LeasedRuntime, count: int) -> set[int]:
        """The partitions to leave to a worker with tools this one lacks (see
        :class:`OwnerServices`)."""
        return await self.owner_services.partitions_to_avoid(count)


__all__ = ["RunServices"]
