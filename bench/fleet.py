"""Fleets: topic fan-out to subscribed actors, and the fleet example's task loop.

- ``topic_fanout``: events per second delivered into the mailboxes of 100 actors
  subscribed to one topic (each publish reaches all 100: a delivery is one event in one
  subscriber's mailbox, committed), against a baseline of as many plain
  ``mesh.publish`` calls in the same run (100 concurrent publishers); target ratio 0.5.
- ``topic_fanout_handled``: the same deliveries counted in the subscribers' handlers,
  against as many messages told to the same actors directly: what a topic adds to the
  runtime's own cost of a message (target ratio 0.5).
- ``fleet_tasks``: tasks per second through the fleet example's claim-and-done loop
  (a dispatcher publishes ``tasks.new``; three worker agents race a CAS on
  ``tasks/<id>``; the winner publishes ``tasks.done``) with the instant scripted
  model, against a fixed floor.

Run: ``python bench/fleet.py [--json] [--seconds 1.0]``, on SQLite, and on Redis
(``PLAIT_BENCH_REDIS``, under a fresh key prefix removed afterwards) when it answers.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from _common import Figure, parse_args, redis_mesh_url, redis_scratch, report

from plait.actors import ActorContext, LeasedRuntime, Mail, TopicRouter, subscribe
from plait.mesh import Mesh, open_mesh

BENCH = "fleet"
SUBSCRIBERS = 100
TOPIC = "bench.fanout"
KIND = "bench:count"
FLEET_TASKS_FLOOR = 50.0
"""tasks/s the fleet loop should pass on either backend (three workers, one process)."""


class Counter:
    """A handler counting the events it got (acked by the runtime on return)."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = asyncio.Event()

    async def __call__(self, ctx: ActorContext, mail: Mail) -> None:
        self.count += 1
        self.changed.set()


async def wait_count(counter: Counter, target: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while counter.count < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"delivered {counter.count} of {target}")
        counter.changed.clear()
        try:
            await asyncio.wait_for(counter.changed.wait(), 1.0)
        except TimeoutError:
            continue


async def wait_forwarded(router: TopicRouter, target: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while router.forwarded < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"forwarded {router.forwarded} of {target}")
        await asyncio.sleep(0.001)


async def fanout_figures(mesh: Mesh, seconds: float, backend: str) -> list[Figure]:
    counter = Counter()
    runtime = LeasedRuntime(mesh, handlers={KIND: counter}, lease_s=5.0)
    async with runtime, TopicRouter(runtime, refresh_s=0.2) as router:
        names = [f"sub{n}" for n in range(SUBSCRIBERS)]
        for name in names:
            await runtime.create(name, KIND, exist_ok=True)
            await subscribe(mesh, name, TOPIC)
        wanted = {(n, TOPIC) for n in names}
        while not wanted <= router.forwarding:
            await router.refreshed()

        async def delivered(events: int) -> float:
            start, target = time.perf_counter(), router.forwarded + events * SUBSCRIBERS
            await asyncio.gather(*(mesh.publish(TOPIC, "e", {"n": i}) for i in range(events)))
            await wait_forwarded(router, target)
            return events * SUBSCRIBERS / (time.perf_counter() - start)

        async def published(events: int) -> float:
            async def publisher(task: int) -> None:
                for i in range(events):
                    await mesh.publish(f"bench.plain.{task}", "e", {"n": i})

            start = time.perf_counter()
            await asyncio.gather(*(publisher(t) for t in range(SUBSCRIBERS)))
            return events * SUBSCRIBERS / (time.perf_counter() - start)

        async def handled(events: int) -> float:
            start, target = time.perf_counter(), counter.count + events * SUBSCRIBERS
            await asyncio.gather(*(mesh.publish(TOPIC, "e", {"n": i}) for i in range(events)))
            await wait_count(counter, target)
            return events * SUBSCRIBERS / (time.perf_counter() - start)

        async def told(events: int) -> float:
            async def teller(name: str) -> None:
                for i in range(events):
                    await runtime.tell(name, {"n": i})

            start, target = time.perf_counter(), counter.count + events * SUBSCRIBERS
            await asyncio.gather(*(teller(n) for n in names))
            await wait_count(counter, target)
            return events * SUBSCRIBERS / (time.perf_counter() - start)

        await wait_count(counter, 0)
        await delivered(2)
        await published(2)
        await wait_count(counter, counter.count)  # settle what the warm-up sent
        probe = await published(5)
        events = max(5, int(probe * seconds / 5 / SUBSCRIBERS))
        value = baseline = 0.0
        for _ in range(5):
            value = max(value, await delivered(events))
            baseline = max(baseline, await published(events))
        await wait_count(counter, router.forwarded)
        slow = max(2, events // 10)  # handlers take ~1/10 the rate: rounds of similar time
        got = floor = 0.0
        for _ in range(3):
            got = max(got, await handled(slow))
            floor = max(floor, await told(slow))
    note = f"as many plain publishes, {SUBSCRIBERS} tasks"
    return [
        Figure(BENCH, f"{backend}_topic_fanout", value, "deliveries/s", baseline, 0.5, note),
        Figure(
            BENCH,
            f"{backend}_topic_fanout_handled",
            got,
            "handled/s",
            floor,
            0.5,
            f"as many tells to the {SUBSCRIBERS}, handled",
        ),
    ]


async def backend_figures(url: str, seconds: float, backend: str) -> list[Figure]:
    async with open_mesh(url) as mesh:
        figures = await fanout_figures(mesh, seconds, backend)
    try:
        from fleet_tasks import fleet_tasks_figure
    except ImportError:
        return figures
    figures.append(await fleet_tasks_figure(url, seconds, backend, FLEET_TASKS_FLOOR))
    return figures


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else BENCH, argv)
    figures: list[Figure] = []
    async with redis_scratch() as scratch:
        if scratch is not None:
            figures += await backend_figures(redis_mesh_url(scratch[1]), args.seconds, "redis")
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'mesh.db'}"
        figures += await backend_figures(url, args.seconds, "sqlite")
    report(figures, as_json=args.json, title="fleets: topic fan-out and the task loop")


if __name__ == "__main__":
    asyncio.run(main())
