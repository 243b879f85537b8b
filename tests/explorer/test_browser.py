"""The bank explorer in a real browser: `genmem bank serve` as a subprocess, Debian's Chromium
driven headless by Playwright (never a downloaded browser), one session for every click.

Screenshots go to ``$GENMEM_TEST_ARTIFACTS/explorer`` if that variable is set, else to a folder
under pytest's temporary directory. Without Chromium the test skips, except under ``CI=true``,
where it fails: CI must run it (``.ci/chromium.sh`` installs the browser).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.explorer._sample import DELETED, HOSTILE_AT, REVISED, sample_bank

CHROMIUM_ENV = "GENMEM_CHROMIUM"
ARTIFACTS_ENV = "GENMEM_TEST_ARTIFACTS"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str:
    """Path of the system Chromium; skips (fails under CI=true) when there is none."""
    path = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or "/usr/bin/chromium"
    reason = None
    if not Path(path).is_file():
        reason = f"no Chromium at {path} (apt-get install chromium, or set {CHROMIUM_ENV})"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "the playwright package is missing (pip install -e '.[dev]')"
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the browser tests: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    root = os.environ.get(ARTIFACTS_ENV)
    folder = Path(root) / "explorer" if root else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """`genmem bank serve` on a free loopback port over the sample bank; yields its URL."""
    url, bank = sample_bank(str(tmp_path / "bank.db"))
    bank.store.close()
    port = _free_port()
    cmd = [sys.executable, "-m", "genmem.cli", "bank", "serve", "--bank", url]
    cmd += ["--port", str(port), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""  # type: ignore[union-attr]
        if not line:
            proc.kill()
            pytest.fail(f"genmem bank serve did not start: {proc.communicate()[1][-2000:]}")
        info = json.loads(line)
        assert info["url"] == f"http://127.0.0.1:{port}/" and info["entries"] == 32
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(info["url"], timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield info["url"].rstrip("/")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_click_through_tree_entry_history_and_log(
    server: str, artifacts: Path, tmp_path: Path
) -> None:
    chromium = _chromium()
    from playwright.sync_api import expect, sync_playwright

    dialogs: list[str] = []
    failed: list[str] = []
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh user data dir
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1200, "height": 820},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(10_000)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            # A stylesheet still loading when a click navigates on is cancelled (ERR_ABORTED):
            # that is the browser's doing, not a broken page; any other failure counts.
            page.on(
                "requestfailed",
                lambda r: r.failure == "net::ERR_ABORTED" or failed.append(f"{r.url} {r.failure}"),
            )
            # Nothing outside the server is ever fetched.
            page.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith(server)
                    else (failed.append(route.request.url), route.abort())
                ),
            )

            page.goto(server + "/")
            expect(page.locator("#children")).to_contain_text("<SID_L1_3>")
            expect(page.locator(".badge")).to_have_text("read-only")
            page.screenshot(path=str(artifacts / "1-root.png"))

            # The tree, level by level, down to the entry that was revised twice.
            for level, path in enumerate(["3", "3-0", "3-0-6"], 1):
                page.click(f'#children a.child[href="/tree/{path}"]')
                expect(page).to_have_url(f"{server}/tree/{path}")
                expect(page.locator("#crumbs b")).to_contain_text(f"<SID_L{level}_")
            expect(page.locator("#entries")).to_contain_text("v3")
            page.screenshot(path=str(artifacts / "2-leaves.png"))
            page.click(f'#entries a.entry[href="/entry/{REVISED}"]')

            # Its history, newest first, with the words each revision changed.
            expect(page.locator("#state")).to_contain_text("live, version 3 of 3")
            versions = page.locator("#history > li")
            expect(versions).to_have_count(3)
            expect(versions.first.locator("ins").first).to_contain_text("cents")
            expect(versions.first.locator("del").first).to_be_visible()
            page.screenshot(path=str(artifacts / "3-entry-history.png"), full_page=True)
            page.fill('#compare-form input[name="a"]', "1")
            page.fill('#compare-form input[name="b"]', "3")
            page.click("#compare-form button")
            expect(page.locator("#compare h2")).to_have_text("v1 → v3")

            # The slot's events, then the whole log filtered by op and outcome.
            page.click("#slot-events")
            expect(page.locator("#matching")).to_contain_text("3 matching events")
            page.goto(server + "/log")
            expect(page.locator("#matching")).to_contain_text("37 matching events")
            page.select_option('#log-filter select[name="op"]', "revise")
            page.select_option('#log-filter select[name="outcome"]', "deleted")
            page.click("#log-filter button")
            expect(page.locator("#matching")).to_contain_text("1 matching events")
            expect(page.locator("#events tbody tr")).to_have_count(1)
            expect(page.locator("#events tbody tr")).to_contain_text(DELETED.split("-")[0])
            page.screenshot(path=str(artifacts / "4-log-filtered.png"))
            page.select_option('#log-filter select[name="outcome"]', "")
            page.select_option('#log-filter select[name="actor"]', "evolver")
            page.click("#log-filter button")
            expect(page.locator("#matching")).to_contain_text("4 matching events")
            page.fill('#log-filter input[name="until"]', "2000-01-01T00:00:00")
            page.click("#log-filter button")
            expect(page.locator("#matching")).to_contain_text("0 matching events")
            expect(page.locator("#events tbody")).to_contain_text("no event matches")

            # Search: text through TF-IDF, then a prefix that opens the tree.
            page.fill('#search input[name="q"]', "round money to cents")
            page.press('#search input[name="q"]', "Enter")
            expect(page.locator("#results a.entry").first).to_have_attribute(
                "href", f"/entry/{REVISED}"
            )
            page.fill('#search input[name="q"]', "4-1")
            page.press('#search input[name="q"]', "Enter")
            expect(page).to_have_url(f"{server}/tree/4-1")

            # A payload written to break out of the page stays text; no script runs.
            page.goto(f"{server}/entry/{HOSTILE_AT}")
            expect(page.locator("#payload")).to_contain_text('<script>alert("owned")</script>')
            page.goto(server + "/utilisation")
            expect(page.locator("#metrics")).to_contain_text("3 (6.25%)")
            page.goto(server + "/entry/99-0-0-0")
            expect(page.locator("#error")).to_contain_text("code 99 is out of range")
        finally:
            context.close()
    assert dialogs == [] and failed == []
    assert len(list(artifacts.glob("*.png"))) >= 4
