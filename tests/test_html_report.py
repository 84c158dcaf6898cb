"""report.html (plots/html/): written beside report.md for one results folder and for several, small, with plotly.js
once per folder as a file and nothing fetched from the network; then opened from file:// in headless Chromium
(Debian's chromium and chromium-driver, driven by selenium): no console error, the headline chart has a point per
ok row with both speeds in results.csv, hover shows the point's row, a filter changes what is shown, the tables sort.

The module is in the `engine` tier: it starts a browser, and builds its three reports with `python -m plots`
(about 15 s); `make test` runs it, `make test-fast` does not (there, tests/test_plots.py still sees report.html and
plotly.min.js written). Where chromium or chromedriver is missing the browser tests FAIL, saying how to install them
(`make setup` does as root): CI must not pass without having opened the page. BENCH_DOCS_SCREENSHOT=1 also copies the fixture report's
screenshot to docs/images/report-html.png (the docs' picture of the page).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from plots import data
from plots.html import page
from tests.test_plots import A100, FIXTURE, copy_fixture
from tests.test_plots_stream import write_stream_folder

REPO = Path(__file__).resolve().parent.parent
DOCS_SCREENSHOT = REPO / "docs" / "images" / "report-html.png"
MAX_REPORT_BYTES = 200_000  # report.html without plotly.js: the fixture's is about 60 kB
INSTALL_HINT = "apt-get install chromium chromium-driver (as root; make setup does it), then rerun"
pytestmark = pytest.mark.engine


def plots_cli(*args) -> subprocess.Popen:
    """`python -m plots ARGS` started, as a user runs it (the reports are built side by side)."""
    return subprocess.Popen([sys.executable, "-m", "plots", *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def headline_rows(*folders: Path) -> int:
    """The ok rows of results.csv with both speeds: a per-user speed needs a TPOT (no one-token outputs); results
    from before the per-user column get it from the mean TPOT, as the docs define it."""
    count = 0
    for folder in folders:
        table = pd.read_csv(folder / "results.csv")
        ok = table[table["status"] == "ok"]
        per_user = ok.get("output_tokens_per_s_per_user", pd.Series(float("nan"), index=ok.index))
        per_user = per_user.fillna(1000 / ok["tpot_ms_mean"])
        count += int(((per_user > 0) & (ok["throughput_tokens_per_s"] > 0)).sum())
    return count


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{name: (report.html, the results folders)}: the cpu-tiny fixture, it with a copy relabelled as an A100, and
    request streams at three rates with an SLO (tests/test_plots_stream.py's folder)."""
    root = tmp_path_factory.mktemp("html")
    other = copy_fixture(root, "a100", hardware=A100, speedup=10.0)
    write_stream_folder(root / "streams")
    sources = {"cpu-tiny": [FIXTURE], "two-folders": [FIXTURE, other], "stream": [root / "streams"],
               "standalone": [FIXTURE]}
    flags = {"standalone": ["--html-standalone"]}
    # The fixture named as a user in the repository would (the page lists its folders: the docs' picture too).
    running = {name: plots_cli(*[f.relative_to(REPO) if f.is_relative_to(REPO) else f for f in folders],
                               "--out", root / name, *flags.get(name, [])) for name, folders in sources.items()}
    for name, proc in running.items():
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {stderr}"
    # The standalone page sent on its own: moved into a folder with nothing else in it.
    alone = root / "mailed"
    alone.mkdir()
    (root / "standalone" / page.HTML_NAME).rename(alone / page.HTML_NAME)
    return {name: ((alone if name == "standalone" else root / name) / page.HTML_NAME, folders)
            for name, folders in sources.items()}


# -- the files, without a browser --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cpu-tiny", "two-folders", "stream"])
def test_report_html_is_written_beside_report_md_small_and_offline(reports, name):
    html_path, _ = reports[name]
    folder = html_path.parent
    assert "[report.html](report.html)" in (folder / "report.md").read_text()
    text = html_path.read_text()
    assert len(text.encode()) < MAX_REPORT_BYTES
    assert text.count(f'<script src="{page.PLOTLY_JS}"></script>') == 1
    assert "http://" not in text and "https://" not in text  # no CDN, no font, no link out
    assert (folder / page.PLOTLY_JS).stat().st_size > 1_000_000  # plotly.js itself, once, as a file


def test_a_standalone_report_is_one_file_with_plotly_inside(reports):
    html_path, _ = reports["standalone"]
    text = html_path.read_text()
    assert f'src="{page.PLOTLY_JS}"' not in text and "Plotly" in text and len(text.encode()) > 1_000_000
    assert not (reports["cpu-tiny"][0].parent.parent / "standalone" / page.PLOTLY_JS).exists()  # nothing beside it
    own = text.replace(get_plotlyjs(), "")  # plotly's bundle names URLs it never fetches here: the browser test checks
    assert "<script></script>" in own and "http://" not in own and "https://" not in own
    assert [p.name for p in html_path.parent.iterdir()] == [page.HTML_NAME]


def test_a_stream_report_has_rate_charts_and_its_slo_line(reports):
    text = reports["stream"][0].read_text()
    assert text.count('data-kind="headline"') == 1 and text.count('data-kind="ttft-tpot-rate"') == 1
    assert "SLO: TPOT 50 ms (20 tokens" in text  # the streams' own slo.tpot_ms, as on the PNG
    assert 'data-kind="latency-throughput"' not in text  # batch charts only for batch points


def test_plotly_js_is_written_once_per_folder(tmp_path):
    first = page.write_plotly_js(tmp_path)
    written = first.stat().st_mtime_ns
    time.sleep(0.01)
    assert page.write_plotly_js(tmp_path).stat().st_mtime_ns == written
    first.write_text("stale")
    assert page.write_plotly_js(tmp_path).stat().st_size > 1_000_000


# -- in Chromium --------------------------------------------------------------------------------------------

def chromium_paths():
    """(browser, driver) or a failure that says how to install them: never a skip."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver:
        pytest.fail(f"headless Chromium is needed to test report.html: {INSTALL_HINT}")
    return browser, driver


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium_paths()
    options = Options()
    options.binary_location = binary
    for argument in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1100",
                     "--hide-scrollbars", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    # Console messages (console errors) and network requests (everything the page loads) both captured.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    yield driver
    driver.quit()


def open_report(driver, html_path: Path) -> None:
    driver.get_log("browser")  # what an earlier page said is not this one's
    driver.get_log("performance")
    driver.get(html_path.as_uri())
    deadline = time.monotonic() + 20
    while driver.execute_script("return document.body && document.body.dataset.ready") != "true":
        assert time.monotonic() < deadline, "report.js never started"
        time.sleep(0.05)


def headline_points(driver) -> int:
    """Points drawn in the headline charts that are shown, read from plotly's own graph divs."""
    return driver.execute_script("""
        return Array.from(document.querySelectorAll('.figure[data-kind=headline]')).filter(f => !f.hidden)
          .map(f => f.querySelector('.plotly-graph-div').data.filter(t => t.meta === 'series')
                .reduce((n, t) => n + t.x.length, 0)).reduce((a, b) => a + b, 0);""")


def hover(driver, point: int) -> str:
    """Hover the first headline chart's first series' point as a mouse would (plotly's own hover): its label's text."""
    return driver.execute_script("""
        const gd = document.querySelector('.figure[data-kind=headline] .plotly-graph-div');
        const first = gd.data.findIndex(t => t.meta === 'series');
        Plotly.Fx.hover(gd, [{curveNumber: first, pointNumber: arguments[0]}]);
        return gd.querySelector('.hoverlayer .hovertext').textContent;""", point)


def click_filter(driver, key: str, value: str) -> None:
    box = driver.execute_script(
        "return Array.from(document.querySelectorAll(`#filters fieldset[data-key='${arguments[0]}'] input`))"
        ".find(b => b.value === arguments[1])", key, value)
    box.click()
    driver.execute_script("return window.reportFilters.apply()")  # the promise: wait until every chart is redrawn


@pytest.mark.parametrize("name", ["cpu-tiny", "two-folders", "stream", "standalone"])
def test_the_report_opens_offline_with_no_console_error(browser, reports, name, tmp_path):
    html_path, folders = reports[name]
    open_report(browser, html_path)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    requested = [json.loads(e["message"])["message"] for e in browser.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in requested if m["method"] == "Network.requestWillBeSent"]
    assert urls and all(url.startswith(("file://", "data:")) for url in urls), urls
    assert browser.execute_script("return typeof Plotly.newPlot") == "function"
    assert headline_points(browser) == headline_rows(*folders) > 0
    hover(browser, point=1)  # the picture shows a point's row too
    shot = tmp_path / "report-html.png"
    assert browser.save_screenshot(str(shot))
    if name == "cpu-tiny" and os.environ.get("BENCH_DOCS_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_SCREENSHOT)


def test_hover_shows_the_points_row(browser, reports):
    open_report(browser, reports["cpu-tiny"][0])
    label = hover(browser, point=0)
    for part in ("status ok", "batch 1", "in 128 / out 64", "latency", "TTFT", "TPOT", "per GPU", "per user"):
        assert part in label, label


def test_a_filter_changes_what_is_shown(browser, reports):
    html_path, folders = reports["two-folders"]
    open_report(browser, html_path)
    both = headline_points(browser)
    rows_shown = "return document.querySelectorAll('#points-table tbody tr:not([hidden])').length"
    assert browser.execute_script(rows_shown) == 24
    click_filter(browser, "hardware", A100)
    assert headline_points(browser) == both // 2 == headline_rows(FIXTURE)
    assert browser.execute_script(rows_shown) == 12
    frontier = ("return document.querySelector('.figure[data-kind=headline] .plotly-graph-div').data"
                ".find(t => t.meta === 'frontier').x.length")
    assert browser.execute_script(frontier) == 3  # the CPU's three batch sizes: each beats the others on one speed
    # the latency chart's frontier is redrawn over the CPU's points alone, by the PNG's rule (data.pareto_frontier)
    cpu = pd.read_csv(FIXTURE / "results.csv")
    cpu = cpu[cpu["status"] == "ok"]
    first = cpu[(cpu["input_length"] == cpu["input_length"].min())]
    first = first[first["output_length"] == first["output_length"].min()]
    latency_front = ("return document.querySelector('.figure[data-kind=latency-throughput] .plotly-graph-div').data"
                     ".find(t => t.meta === 'latency-frontier').x")
    expected = first.iloc[data.pareto_frontier(first["latency_ms_mean"], first["throughput_tokens_per_s"])]
    assert browser.execute_script(latency_front) == pytest.approx(expected["latency_ms_mean"].tolist())
    click_filter(browser, "lengths", "in 128 / out 64")  # that pair's headline chart has no point left: hidden
    assert headline_points(browser) == both // 2 - 3
    assert browser.execute_script("return document.querySelectorAll('.figure[data-kind=headline][hidden]').length") == 1
    browser.find_element("id", "filters-reset").click()
    browser.execute_script("return window.reportFilters.apply()")
    assert headline_points(browser) == both
    assert browser.execute_script("return document.querySelectorAll('.figure[hidden]').length") == 0
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []  # redrawing hidden charts too


def test_the_best_configuration_panel_comes_first(browser, reports):
    """report.html's answer, as report.md's: the fastest configuration per length pair (no targets in the
    fixture), before the filters and the charts."""
    open_report(browser, reports["cpu-tiny"][0])
    order = browser.execute_script("return Array.from(document.querySelectorAll('body > section, body > .filters, "
                                   "body > form')).map(e => e.id || e.className)")
    assert order[0] == "best", order
    items = browser.execute_script("return Array.from(document.querySelectorAll('#best li')).map(li => li.textContent)")
    out, _ = plots_cli(FIXTURE, "--best").communicate(timeout=120)  # the console's words for the same answers
    assert items and items == [line.strip() for line in out.splitlines()[1:]]


def test_the_tables_sort_by_a_clicked_column(browser, reports):
    open_report(browser, reports["two-folders"][0])
    header = browser.execute_script(
        "return Array.from(document.querySelectorAll('#points-table th')).find(th => th.textContent.startsWith("
        "'Throughput'))")
    column = "return Array.from(document.querySelectorAll('#points-table tbody tr')).map(tr => " \
             "Number(tr.cells[arguments[0]].dataset.v))"
    index = browser.execute_script("return arguments[0].cellIndex", header)
    from selenium.webdriver.common.action_chains import ActionChains

    # scrolled to the top of the window, as a reader reaches the table: nothing covers the header there
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", header)
    ActionChains(browser).move_to_element(header).click().perform()
    ascending = browser.execute_script(column, index)
    assert ascending == sorted(ascending) and len(set(ascending)) > 1
    header.click()
    assert browser.execute_script(column, index) == sorted(ascending, reverse=True)
