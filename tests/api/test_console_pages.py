"""The console's pages in headless Chromium (Debian's, driven by Playwright) against a
real ``plait serve``: the decisions inbox answered in place, runs searched by id prefix
and paged, a run cancelled and its budget raised, its graph drawn with the current
node, schedules created and deleted, a run started from the page; every page at 1280
and 390 px wide without horizontal overflow. Screenshots go to $PLAIT_TEST_ARTIFACTS
(default tests/artifacts/)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from runs.helpers import poll

from .browser import ARTIFACTS, CHROMIUM, playwright_or_skip
from .helpers import HOSTILE, asking_graph, asking_rules
from .server import Served, serving

pytestmark = pytest.mark.slow

playwright_sync = playwright_or_skip()
expect = playwright_sync.expect

WIDTHS = (1280, 390)
PAGES = ("#/", "#/inbox", "#/schedules", "#/graphs", "#/agents", "#/topics", "#/cluster")


@contextmanager
def browser_page(
    served: Served, width: int = 1280, at: str = "#/", refused: str | None = None
) -> Iterator[Any]:
    """A signed-in console page at ``at``; fails the test on any page error but the
    browser's note of a response with the status ``refused`` (one the test provokes)."""
    expected = f"the server responded with a status of {refused} "
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console",
            lambda m: (
                errors.append(m.text)
                if m.type == "error" and not (refused and expected in m.text)
                else None
            ),
        )
        page.goto(served.url + "/" + at)
        page.fill("#token", served.token)
        page.click("#login-form button")
        expect(page.locator("#who")).to_have_text("human ana")
        yield page
        assert page.evaluate("window.__pwned") is None
        assert page.locator("main img, main script").count() == 0
        browser.close()
        assert not errors, errors


def start_waiting(served: Served, count: int, name: str = "review") -> list[str]:
    """Start ``count`` runs of the asking graph; their ids once each waits on a person."""
    api = served.client
    if api.get(f"/api/graphs/assistant/{name}").status_code == 404:
        assert api.post("/api/graphs", json=asking_graph(name)).status_code == 201
    ids = []
    for n in range(count):
        got = api.post("/api/runs", json={"agent": "assistant", "name": name, "input": f"r{n}"})
        assert got.status_code == 201, got.text
        ids.append(got.json()["run_id"])
    for run_id in ids:
        poll(lambda r=run_id: api.get(f"/api/runs/{r}").json()["status"] == "waiting_human")
    return ids


def fits(page: Any) -> None:
    """The page is no wider than its viewport."""
    wide, view = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert wide <= view, f"{page.url}: {wide} px wide at {view} px"


def test_the_inbox_answers_decisions_in_place(tmp_path: Path) -> None:
    with serving(tmp_path, asking_rules(draft=HOSTILE)) as served:
        first, second = start_waiting(served, 2)
        with browser_page(served, at="#/inbox") as page:
            cards = page.locator("#inbox-list li.card")
            expect(cards).to_have_count(2, timeout=15_000)
            expect(page.locator("#inbox-count")).to_have_text("2")
            card = page.locator(f'#inbox-list li.card:has(a[href="#/run/{first}"])')
            expect(card.locator("pre.ask")).to_have_text(f"Ship {HOSTILE}?")
            page.screenshot(path=str(ARTIFACTS / "console-inbox.png"), full_page=True)
            card.locator("button[data-option='approve']").click()
            expect(card.locator(".answered-line")).to_have_text("Answered: approve")
            expect(card.locator(".warning")).to_have_count(0)  # this process serves runs
            poll(lambda: served.client.get(f"/api/runs/{first}").json()["status"] == "done")
            expect(page.locator("#inbox-count")).to_have_text("1", timeout=15_000)
            other = page.locator(f'#inbox-list li.card:has(a[href="#/run/{second}"])')
            expect(other.locator("button[data-option='reject']")).to_be_visible()
        decision = served.client.get("/api/decisions", params={"run_id": first}).json()[0]
        assert decision["answer"] == {**decision["answer"], "option": "approve", "by": "ana"}


def test_answering_with_no_process_serving_says_the_run_waits(tmp_path: Path) -> None:
    with serving(tmp_path, asking_rules()) as served:
        (run_id,) = start_waiting(served, 1)
    with serving(tmp_path, asking_rules(), serve_runs=False) as served:
        poll(lambda: "hosting no runs" in (tmp_path / "serve.log").read_text())
        with browser_page(served, at="#/inbox") as page:
            expect(page.locator("#unserved")).to_contain_text("No process serves this mesh")
            card = page.locator("#inbox-list li.card")
            expect(card).to_have_count(1, timeout=15_000)
            card.locator("button[data-option='approve']").click()
            expect(card.locator(".warning")).to_contain_text(
                "no process serves this mesh: the run waits until one starts"
            )
            page.screenshot(path=str(ARTIFACTS / "console-inbox-unserved.png"), full_page=True)
            # A run started in the page says it too, on its own page.
            page.click("#nav-runs")
            page.click("#start-box summary")
            expect(page.locator("#start-graph option")).to_have_count(1)
            page.click("#start-send")
            expect(page.locator("#action-note")).to_contain_text(
                "Started, but no process serves this mesh", timeout=15_000
            )
            expect(page.locator("#run-status")).to_have_text("running")
        assert served.client.get(f"/api/runs/{run_id}").json()["status"] == "waiting_human"


def test_runs_search_paging_graph_budget_and_cancel(tmp_path: Path) -> None:
    with serving(tmp_path, asking_rules()) as served:
        ids = start_waiting(served, 12)
        target = ids[4]
        with browser_page(served) as page:
            rows = page.locator("#runs-body tr")
            expect(rows).to_have_count(12, timeout=15_000)
            # Paging: 10 a page, the older two on the next, and back.
            page.select_option("#runs-limit", "10")
            expect(rows).to_have_count(10)
            expect(page.locator("#runs-count")).to_have_text("runs 1–10 of 12")
            expect(page.locator("#runs-newer")).to_be_disabled()
            page.click("#runs-older")
            expect(rows).to_have_count(2)
            expect(page.locator("#runs-count")).to_have_text("runs 11–12 of 12")
            assert page.locator("#runs-body tr").evaluate_all(
                "rows => rows.map(r => r.dataset.run)"
            ) == [ids[1], ids[0]]
            expect(page.locator("#runs-older")).to_be_disabled()
            page.click("#runs-newer")
            expect(rows).to_have_count(10)
            # Search by an id prefix: the one run.
            page.fill("#q", target[:-5])
            page.click("#search-send")
            expect(rows).to_have_count(1)
            expect(rows.first).to_have_attribute("data-run", target)
            expect(rows.first).to_contain_text("waiting_human")
            page.screenshot(path=str(ARTIFACTS / "console-runs-search.png"), full_page=True)

            # The run: its graph drawn, the current node marked, visits counted.
            rows.first.locator("a").click()
            current = page.locator("#graph svg g.node.current")
            expect(current).to_have_count(1, timeout=15_000)
            expect(current).to_have_attribute("data-node", "approve")
            expect(page.locator('#graph g.node[data-node="draft"]')).to_have_attribute(
                "data-visits", "1"
            )
            expect(page.locator('#graph g.node[data-node="ship"]')).to_have_attribute(
                "data-visits", "0"
            )
            expect(page.locator("#graph g.edge")).to_have_count(2)
            expect(page.locator("#run-times")).to_contain_text("so far")
            time_text = page.locator("#run-times time").first.get_attribute("datetime") or ""
            assert time_text[:2] == "20" and ("+" in time_text[10:] or time_text[-1] in "Z0")
            # Raise the budget, then cancel.
            page.select_option("#budget-limit", "steps")
            page.fill("#budget-amount", "5")
            page.click("#budget-send")
            expect(page.locator("#action-note")).to_have_text("Raised steps by 5.")
            expect(page.locator("#run-usage")).to_contain_text("budget raised: steps +5")
            assert served.client.get(f"/api/runs/{target}").json()["budget_raised"] == {"steps": 5}
            page.screenshot(path=str(ARTIFACTS / "console-run-graph.png"), full_page=True)
            page.click("#cancel")
            expect(page.locator("#run-status")).to_have_text("cancelled", timeout=15_000)
            expect(page.locator("#cancel")).to_be_hidden()
            expect(page.locator("#run-duration")).to_contain_text("took ")
            expect(page.locator("#graph svg g.node.current")).to_have_count(0)
        assert served.client.get(f"/api/runs/{target}").json()["status"] == "cancelled"


def test_schedules_are_created_and_deleted_and_a_run_started_in_the_page(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, asking_rules()) as served:
        assert served.client.post("/api/graphs", json=asking_graph()).status_code == 201
        with browser_page(served, at="#/schedules", refused="422") as page:
            expect(page.locator("#schedules-empty")).to_be_visible(timeout=15_000)
            page.click("#schedule-box summary")
            expect(page.locator("#schedule-graph option")).to_have_count(1)
            page.fill("#schedule-cron", "61 * * * *")
            page.click("#schedule-send")
            expect(page.locator("#schedule-form-error")).not_to_be_empty()
            page.fill("#schedule-cron", "0 8 * * 1")
            page.fill("#schedule-tz", "Europe/Berlin")
            page.fill("#schedule-input", HOSTILE)
            page.click("#schedule-send")
            row = page.locator("#schedules-body tr")
            expect(row).to_have_count(1, timeout=15_000)
            expect(row).to_contain_text(HOSTILE)
            expect(row).to_contain_text("0 8 * * 1 (Europe/Berlin)")
            (created,) = served.client.get("/api/schedules").json()
            assert created["input"] == HOSTILE and created["created_by"] == "ana"
            page.screenshot(path=str(ARTIFACTS / "console-schedule-created.png"), full_page=True)
            delete = row.locator("button[data-act='delete']")
            delete.click()
            expect(row.locator("button[data-act='confirm-delete']")).to_have_text("Really delete?")
            row.locator("button[data-act='confirm-delete']").click()
            expect(row).to_have_count(0, timeout=15_000)
            assert served.client.get("/api/schedules").json() == []

            # Start a run from the runs page: it opens, waits on its person.
            page.click("#nav-runs")
            page.click("#start-box summary")
            expect(page.locator("#start-graph option")).to_have_count(1)
            page.fill("#start-input", '{"topic": "notes"}')
            page.check("#start-json")
            page.click("#start-send")
            expect(page.locator("#run-status")).to_have_text("waiting_human", timeout=15_000)
            run_id = page.locator("#run-title").text_content() or ""
        assert run_id.startswith("grun_")
        steps = served.client.get(f"/api/runs/{run_id}/trajectory").json()
        assert "notes" in steps[0]["prompt"]


def test_every_page_fits_at_1280_and_390_px(tmp_path: Path) -> None:
    long_input = "x" * 300 + " " + HOSTILE
    with serving(tmp_path, asking_rules(draft="y" * 400)) as served:
        ids = start_waiting(served, 3)
        made = served.client.post(
            "/api/schedules",
            json={"agent": "assistant", "name": "review", "cron": "0 8 * * 1",
                  "tz": "Europe/Berlin", "input": long_input, "deliver": "stdout"},
        )  # fmt: skip
        assert made.status_code == 201, made.text
        for width in WIDTHS:
            with browser_page(served, width=width) as page:
                for at in (*PAGES, f"#/run/{ids[0]}"):
                    page.evaluate(f"location.hash = {at!r}")
                    expect(page.locator("body")).to_have_attribute(
                        "data-loaded", at, timeout=15_000
                    )
                    if at == "#/graphs":
                        page.locator("#graphs-body a[data-version='1']").click()
                        expect(page.locator("#graph-version-drawing svg")).to_be_visible()
                    fits(page)
                    name = "run" if at.startswith("#/run/") else at.strip("#/") or "runs"
                    page.screenshot(
                        path=str(ARTIFACTS / f"console-{name}-{width}.png"), full_page=True
                    )


def test_the_runs_list_follows_the_runs_feed_without_polling(tmp_path: Path) -> None:
    with serving(tmp_path, asking_rules()) as served:
        with browser_page(served) as page:
            lists: list[str] = []
            page.on(
                "request",
                lambda r: (
                    lists.append(r.url)
                    if r.method == "GET" and urlsplit(r.url).path == "/api/runs"
                    else None
                ),
            )
            # Loaded once the feed is watched: a run started now reaches the page.
            expect(page.locator("body")).to_have_attribute("data-loaded", "#/")
            expect(page.locator("#runs-empty")).to_be_visible()
            (run_id,) = start_waiting(served, 1, name="fed")
            status = page.locator(f'#runs-body tr[data-run="{run_id}"] td.status')
            expect(status).to_have_text("waiting_human", timeout=15_000)
            assert served.client.post(f"/api/runs/{run_id}/cancel").status_code == 200
            expect(status).to_have_text("cancelled", timeout=15_000)
            seen = len(lists)
            # A second and a half with nothing changing: a page polling each second
            # would read the list again in it.
            page.wait_for_timeout(1500)
            assert len(lists) == seen
        # The list was read for the new run (at most once more while that read ran):
        # the status changes after it were drawn from the feed alone.
        assert 1 <= seen <= 2, lists
