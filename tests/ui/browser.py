"""Debian's chromium, headless, driven by Playwright, for the dashboard's tests: each
page records what the browser logged as an error and every request it made, so a
test can say "no console error" and "nothing fetched from outside the broker"."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these the browser tries Google's services at start: this machine's
    # network refuses them, and they are not the dashboard's requests anyway.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Watched:
    page: Page
    errors: list[str] = field(default_factory=list)
    """Console errors and uncaught exceptions."""
    requests: list[str] = field(default_factory=list)
    """Every URL the page asked for."""

    def outside(self, origin: str) -> list[str]:
        """Requests to anywhere but `origin` (data: URLs are inline, not requests)."""
        return [u for u in self.requests if not u.startswith(origin) and not u.startswith("data:")]


def watched(browser: Browser, width: int = 1280, height: int = 800) -> Watched:
    page = browser.new_page(viewport={"width": width, "height": height})
    seen = Watched(page)
    page.on("console", lambda m: seen.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.errors.append(str(e)))
    page.on("request", lambda r: seen.requests.append(r.url))
    return seen
