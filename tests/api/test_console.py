"""The web console end to end in headless Chromium (Debian's, driven by Playwright)
against ``plait serve --serve-runs``: a run waits, is answered in the page, finishes;
hostile run data shows as text. Screenshots go to $PLAIT_TEST_ARTIFACTS (default
tests/artifacts/)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from plait.errors import VersionConflict
from plait.mesh import open_mesh
from plait.schedules.model import Schedule, ScheduledRun, schedule_key
from tests._support.timing import scaled

from .browser import ARTIFACTS, CHROMIUM, playwright_or_skip
from .helpers import HOSTILE, asking_graph, asking_rules
from .server import serving

pytestmark = pytest.mark.slow

playwright_sync = playwright_or_skip()


def ms(seconds: float) -> float:
    """A Playwright timeout of ``seconds`` on a quiet machine, stretched on a busy one."""
    return scaled(seconds) * 1000


@pytest.fixture(autouse=True)
def stretched_expect() -> None:
    """Each ``expect`` without a timeout of its own waits 5 s, stretched on a busy machine."""
    playwright_sync.expect.set_options(timeout=ms(5))


def test_a_run_waits_is_answered_in_the_page_and_finishes(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(tmp_path, asking_rules(draft=HOSTILE)) as served:
        api = served.client
        assert api.post("/api/graphs", json=asking_graph()).status_code == 201
        started = api.post(
            "/api/runs", json={"agent": "assistant", "name": "review", "input": HOSTILE}
        )
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on(
                "console",
                lambda msg: errors.append(msg.text) if msg.type == "error" else None,
            )
            page.goto(served.url + "/")
            page.fill("#token", served.token)
            page.click("#login-form button")
            expect = playwright_sync.expect
            expect(page.locator("#who")).to_have_text("human ana")
            row = page.locator(f'tr[data-run="{run_id}"]')
            expect(row).to_contain_text("waiting_human", timeout=ms(15))
            page.click("#filters button[data-status='waiting_human']")
            expect(row).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "console-runs.png"), full_page=True)

            row.locator("a").click()
            expect(page.locator("#asking")).to_be_visible(timeout=ms(15))
            expect(page.locator("#ask-text")).to_have_text(f"Ship {HOSTILE}?")
            expect(page.locator("#graph g.node.current")).to_have_attribute("data-node", "approve")
            timeline = page.locator("#timeline")
            expect(timeline).to_contain_text(f"Draft {HOSTILE}")
            expect(timeline).to_contain_text(HOSTILE)
            assert page.locator("#timeline img, #asking img, #timeline script").count() == 0
            assert page.evaluate("window.__pwned") is None
            page.screenshot(path=str(ARTIFACTS / "console-run-waiting.png"), full_page=True)

            page.click("#ask-buttons button[data-option='approve']")
            expect(page.locator("#run-status")).to_have_text("done", timeout=ms(15))
            expect(page.locator("#asking")).to_be_hidden()
            expect(page.locator("#run-output")).to_have_text("shipped")
            expect(page.locator("#timeline li")).to_have_count(3)
            expect(page.locator("#graph g.node.current")).to_have_count(0)
            page.screenshot(path=str(ARTIFACTS / "console-run-done.png"), full_page=True)
            assert page.evaluate("window.__pwned") is None
            browser.close()
        decision = api.get("/api/decisions", params={"run_id": run_id}).json()[0]
        assert decision["answer"]["option"] == "approve" and decision["answer"]["by"] == "ana"
        assert not errors, errors


CHAIN = {
    "name": "chain",
    "agent": "assistant",
    "entry": "a",
    "nodes": [
        {"id": "a", "type": "agent", "prompt": "Begin with {{input}}", "next": "b"},
        {"id": "b", "type": "agent", "prompt": "Go on from {{a}}"},
    ],
}
CHAIN_RULES = [
    {"node": "a", "text": HOSTILE},
    {"node": "b", "match": "forked", "text": "b of the fork"},
    {"node": "b", "visit": 1, "error": HOSTILE},
    {"node": "b", "text": "b retried"},
]


async def _delivered(mesh_url: str, schedule_id: str, run_id: str) -> None:
    """Record ``run_id`` as a run the schedule started whose delivery failed with
    hostile text (as a webhook's answer may be), to see the page show it as text."""
    async with open_mesh(mesh_url) as mesh:
        while True:
            entry = await mesh.get(schedule_key(schedule_id))
            assert entry is not None
            schedule = Schedule.model_validate(entry.value)
            schedule.runs.append(
                ScheduledRun(run_id=run_id, fire_at=0.0, status="undeliverable", last_error=HOSTILE)
            )
            try:
                await mesh.put(entry.key, schedule.model_dump(), if_version=entry.version)
                return
            except VersionConflict:
                continue


def test_retry_fork_and_schedules_in_the_page(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    graph = {**CHAIN, "nodes": [CHAIN["nodes"][0], {**CHAIN["nodes"][1],
             "prompt": "Go on from {{a}} {{input}}"}]}  # fmt: skip
    with serving(tmp_path, CHAIN_RULES) as served:
        api = served.client
        assert api.post("/api/graphs", json=graph).status_code == 201
        run_id = api.post("/api/runs", json={"agent": "assistant", "name": "chain"}).json()[
            "run_id"
        ]
        schedule = api.post(
            "/api/schedules",
            json={"agent": "assistant", "name": "chain", "cron": "0 8 * * 1",
                  "tz": "Europe/Berlin", "input": HOSTILE, "deliver": "stdout"},
        )  # fmt: skip
        assert schedule.status_code == 201, schedule.text
        schedule_id = schedule.json()["id"]
        anyio.run(_delivered, served.mesh_url, schedule_id, run_id)
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(served.url + "/#/run/" + run_id)
            page.fill("#token", served.token)
            page.click("#login-form button")
            expect = playwright_sync.expect

            # A failed run: its error shows as text, and Retry continues it.
            expect(page.locator("#run-status")).to_have_text("failed", timeout=ms(15))
            expect(page.locator("#timeline li.step-failed")).to_contain_text(HOSTILE)
            expect(page.locator("#retry")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "console-run-failed.png"), full_page=True)
            page.click("#retry")
            expect(page.locator("#run-status")).to_have_text("done", timeout=ms(15))
            expect(page.locator("#retry")).to_be_hidden()
            expect(page.locator("#run-output")).to_have_text("b retried")
            expect(page.locator("#timeline li")).to_have_count(3)  # a:1, b:1 failed, b:2

            # Fork after a:1 with a new input: a new run that runs only b.
            expect(page.locator("#fork-at option")).to_have_count(3)
            page.select_option("#fork-at", "a:1")
            page.fill("#fork-input", "forked")
            page.click("#fork-send")
            expect(page.locator("#run-title")).not_to_have_text(run_id, timeout=ms(15))
            expect(page.locator("#run-status")).to_have_text("done", timeout=ms(15))
            expect(page.locator("#run-output")).to_have_text("b of the fork")
            expect(page.locator("#timeline li")).to_have_count(1)
            expect(page.locator("#run-origin")).to_contain_text(f"forked from {run_id} after a:1")
            fork_id = page.locator("#run-title").text_content()
            page.screenshot(path=str(ARTIFACTS / "console-run-forked.png"), full_page=True)

            # Schedules: listed with their data as text; paused and resumed in the page.
            page.click("#nav-schedules")
            row = page.locator(f'tr[data-schedule="{schedule_id}"]')
            expect(row).to_contain_text(HOSTILE, timeout=ms(15))
            expect(row).to_contain_text("0 8 * * 1 (Europe/Berlin)")
            expect(row).to_contain_text("active")
            expect(row.locator(f'a[href="#/run/{run_id}"]')).to_have_text(run_id)
            expect(row).to_contain_text(f"undeliverable: {HOSTILE}")
            page.screenshot(path=str(ARTIFACTS / "console-schedules.png"), full_page=True)
            row.locator("button[data-act='pause']").click()
            expect(row).to_contain_text("paused")
            assert api.get(f"/api/schedules/{schedule_id}").json()["paused"] is True
            row.locator("button[data-act='resume']").click()
            expect(row).to_contain_text("active")
            assert api.get(f"/api/schedules/{schedule_id}").json()["paused"] is False
            assert page.locator("#timeline img, #schedules img, script:not([src])").count() == 0
            assert page.evaluate("window.__pwned") is None
            browser.close()
        assert fork_id and fork_id != run_id
        assert api.get(f"/api/runs/{fork_id}/verify").json()["verified"] is True
        assert not errors, errors


STREAM_TEXT = "".join(f"word{n} " for n in range(120))


def test_the_run_page_shows_a_reply_as_it_streams(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    graph = {
        "name": "draft",
        "agent": "assistant",
        "entry": "draft",
        "nodes": [{"id": "draft", "type": "agent", "prompt": "{{input}}"}],
    }
    # The reply streams for 120 x 40 ms (longer on a busy machine, so that the page,
    # loaded as slowly as everything else there, still finds it mid-reply).
    delay_ms = round(40 * scaled(1))
    rules = [{"node": "draft", "text": "{{prompt}}", "chunks": 120, "chunk_delay_ms": delay_ms}]
    with serving(tmp_path, rules) as served:
        api = served.client
        assert api.post("/api/graphs", json=graph).status_code == 201
        run_id = api.post(
            "/api/runs", json={"agent": "assistant", "name": "draft", "input": STREAM_TEXT}
        ).json()["run_id"]
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(served.url + "/#/run/" + run_id)
            page.fill("#token", served.token)
            page.click("#login-form button")
            expect = playwright_sync.expect
            live = page.locator("#run-live section pre")
            expect(live).to_contain_text("word10 ", timeout=ms(15))
            shown = live.text_content() or ""
            assert STREAM_TEXT.startswith(shown) and len(shown) < len(STREAM_TEXT)  # mid-reply
            expect(page.locator("#run-status")).to_have_text("running")
            page.screenshot(path=str(ARTIFACTS / "console-run-streaming.png"), full_page=True)
            expect(page.locator("#run-status")).to_have_text("done", timeout=ms(30))
            expect(live).to_have_text(STREAM_TEXT)
            expect(page.locator("#run-live section.committed")).to_have_count(1)
            expect(page.locator("#run-output")).to_have_text(STREAM_TEXT)
            page.screenshot(path=str(ARTIFACTS / "console-run-streamed.png"), full_page=True)
            browser.close()
        assert not errors, errors
