"""A headless Chromium for the dashboard tests (Debian's chromium and chromium-driver, driven
by selenium), and a way to read a self-refreshing page in one go.

The dashboard reloads itself every few seconds (``scheduler.views.html.REFRESH_SECONDS``):
reading it element by element over WebDriver took longer than that on a loaded machine, so the
tests read everything they need in one script run inside the page (a reload cannot land in the
middle of one script), and retry the whole read when a reload lands between load and script.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

#: Where to save screenshots of the pages (the README's is made this way), if set.
SCREENSHOT_DIR = "GANG_SCHEDULER_SCREENSHOT_DIR"


@contextmanager
def chromium(width: int = 1400, height: int = 1500) -> Iterator[Any]:
    """A headless Chromium WebDriver, skipping the test where it is not installed."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("chromium and chromium-driver are not installed (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    profile = tempfile.mkdtemp(prefix="views-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or ""),
                              options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def read_page(driver: Any, url: str, script: str, *args: Any) -> dict[str, Any]:
    """Load *url* and run *script* (returning an object) in it, once more if a reload landed
    between the two."""
    from selenium.common.exceptions import WebDriverException

    for attempt in range(3):
        driver.get(url)
        try:
            return dict(driver.execute_script(script, *args))
        except WebDriverException:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def screenshot(driver: Any, name: str) -> None:
    """Save the page as *name* in ``$GANG_SCHEDULER_SCREENSHOT_DIR`` when it is set."""
    if os.environ.get(SCREENSHOT_DIR):
        driver.save_screenshot(str(Path(os.environ[SCREENSHOT_DIR]) / name))
