"""The web console end to end in headless Chromium (Debian's, driven by Playwright)
against ``plait serve --serve-runs``: a run waits, is answered in the page, finishes;
hostile run data shows as text. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .helpers import HOSTILE, asking_graph, asking_rules
from .server import serving

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

playwright_sync = pytest.importorskip("playwright.sync_api", reason="needs playwright (dev extra)")
if not Path(CHROMIUM).is_file():
    pytest.skip(
        "needs Debian's chromium (apt-get install -y chromium); not installed here",
        allow_module_level=True,
    )


def test_a_run_waits_is_answered_in_the_page_and_finishes(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
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
            expect(row).to_contain_text("waiting_human", timeout=15_000)
            page.click("#filters button[data-status='waiting_human']")
            expect(row).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "console-runs.png"), full_page=True)

            row.locator("a").click()
            expect(page.locator("#asking")).to_be_visible(timeout=15_000)
            expect(page.locator("#ask-text")).to_have_text(f"Ship {HOSTILE}?")
            expect(page.locator("#graph li.current")).to_have_attribute("data-node", "approve")
            timeline = page.locator("#timeline")
            expect(timeline).to_contain_text(f"Draft {HOSTILE}")
            expect(timeline).to_contain_text(HOSTILE)
            assert page.locator("#timeline img, #asking img, #timeline script").count() == 0
            assert page.evaluate("window.__pwned") is None
            page.screenshot(path=str(ARTIFACTS / "console-run-waiting.png"), full_page=True)

            page.click("#ask-buttons button[data-option='approve']")
            expect(page.locator("#run-status")).to_have_text("done", timeout=15_000)
            expect(page.locator("#asking")).to_be_hidden()
            expect(page.locator("#run-output")).to_have_text("shipped")
            expect(page.locator("#timeline li")).to_have_count(3)
            expect(page.locator("#graph li.current")).to_have_count(0)
            page.screenshot(path=str(ARTIFACTS / "console-run-done.png"), full_page=True)
            assert page.evaluate("window.__pwned") is None
            browser.close()
        decision = api.get("/api/decisions", params={"run_id": run_id}).json()[0]
        assert decision["answer"]["option"] == "approve" and decision["answer"]["by"] == "ana"
        assert not errors, errors
