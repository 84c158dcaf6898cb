"""The docs site as a newcomer reads it (issue 52): built by MkDocs and opened in headless Chromium at 1,400 px, the
getting-started pages and the reference pages have no command block that must scroll sideways, no identifier broken
inside a table cell, and no table clipped by the text column (a table too wide scrolls inside its own frame)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_html_report import chromium_paths

REPO = Path(__file__).resolve().parent.parent
PAGES = ["getting-started/install/", "getting-started/first-sweep/", "getting-started/your-model/",
         "getting-started/reading-results/", "reference/config/", "reference/columns/", "reference/cli/"]
WIDTH_PX = 1400
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(out)], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def page(site):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium_paths()
    options = Options()
    options.binary_location = binary
    for argument in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={WIDTH_PX},1000",
                     "--force-device-scale-factor=1"):
        options.add_argument(argument)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")
    driver = webdriver.Chrome(options=options, service=Service(driver_path))

    def open_page(path: str):
        driver.get((site / path / "index.html").as_uri())
        deadline = time.monotonic() + 20
        while driver.execute_script("return document.readyState") != "complete":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return driver
    yield open_page
    driver.quit()


# Each check returns what it found wrong, as text a reader can find on the page.
SCROLLING_COMMANDS = """
return Array.from(document.querySelectorAll('.md-content pre > code'))
  .filter(c => /^(\\.venv\\/bin\\/)?(python|make|bash|git|cd|pip|SETUP_TORCH|PYTHON|WHEELHOUSE)\\b/m.test(c.textContent))
  .filter(c => c.scrollWidth > c.clientWidth + 1)
  .map(c => c.textContent.split('\\n').find(l => l.length > 0).slice(0, 80));
"""
BROKEN_IDENTIFIERS = """
return Array.from(document.querySelectorAll('.md-content table td code, .md-content table th code'))
  .filter(c => /^[A-Za-z0-9_.\\-\\[\\]]+$/.test(c.textContent) && c.getClientRects().length > 1)
  .map(c => c.textContent);
"""
CLIPPED_TABLES = """
return Array.from(document.querySelectorAll('.md-content table')).filter(t => {
  const frame = t.closest('.md-typeset__scrollwrap');
  const style = frame ? getComputedStyle(frame).overflowX : 'visible';
  const column = document.querySelector('.md-content').getBoundingClientRect();
  const scrolls = style === 'auto' || style === 'scroll';
  return !scrolls && t.getBoundingClientRect().right > column.right + 1;
}).map(t => t.querySelector('th') ? t.querySelector('th').textContent : '?');
"""


@pytest.mark.parametrize("path", PAGES)
def test_a_page_reads_at_1400_px_without_scrolled_commands_broken_names_or_clipped_tables(page, path):
    driver = page(path)
    assert driver.execute_script("return window.innerWidth") == WIDTH_PX
    assert driver.execute_script(SCROLLING_COMMANDS) == [], "command blocks that must scroll"
    assert driver.execute_script(BROKEN_IDENTIFIERS) == [], "identifiers broken across lines in a table cell"
    assert driver.execute_script(CLIPPED_TABLES) == [], "tables cut by the text column"
