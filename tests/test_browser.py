"""The interactive views in a real browser: Debian's headless chromium through Selenium.

Both offline HTML paths (``embedbench report --html`` and nbconvert with the offline
template) are opened from disk with the network off. Each chart must render its marks
(the paired view one point per block of the case its menu picks), switching the case menu
must change them, hovering a block must show a tooltip whose reduction is that block's in
the results, a click on a block must highlight its worker in the other charts, nothing may
be fetched and nothing logged as an error. A screenshot of each page is kept in the test's
temporary folder. No browser is downloaded: without chromium and chromedriver (``.ci/run``
installs them with apt) the tier is skipped with that reason.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbformat.sign import NotebookNotary
from nbformat.v4 import new_code_cell, new_notebook, new_output
from test_figures import make_result
from test_interactive import _with_clocks

from embedbench.report import figuredata, sections, views
from embedbench.report.html import write_html

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip(
        "no browser: apt-get install chromium chromium-driver (.ci/run does, as root)",
        allow_module_level=True,
    )

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.actions.action_builder import ActionBuilder  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

AUDIO_BLOCKS = 8  # audio keeps its first 8 blocks, interleaved all 12: the menu shows which
PAIRED = "Paired blocks over time"
PER_BLOCK = "Per-block medians"


def _result():
    """Two cases with different block counts, a canary and a varying CPU frequency."""
    result = copy.deepcopy(_with_clocks(make_result(outlier=5)))
    result.records[:] = [
        r for r in result.records if not (r["case"] == "audio" and r["block"] >= AUDIO_BLOCKS)
    ]
    return result


def _nbconvert_page(result, path: Path) -> Path:
    """The report's views as a notebook's outputs, through nbconvert's offline template."""
    from nbconvert import HTMLExporter

    outputs = []
    for section in sections.REPORT_SECTIONS:
        for item in section.render(result):
            if isinstance(item, views.View):
                data, metadata = item.bundle()
                outputs.append(new_output("display_data", data=data, metadata=metadata))
    notebook = path.with_suffix(".ipynb")
    nbformat.write(new_notebook(cells=[new_code_cell("show()", outputs=outputs)]), notebook)
    exporter = HTMLExporter(template_file=str(ROOT / "scripts" / "offline.html.j2"))
    exporter.exclude_input = True
    path.write_text(exporter.from_filename(str(notebook))[0], encoding="utf-8")
    return path


def _network(browser, *, offline: bool) -> None:
    browser.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )


@pytest.fixture(scope="module")
def driver():
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1200,900")
    # The network off: no name resolves, any request goes to a closed port (loopback stays,
    # for the JupyterLab server of its own test only).
    options.add_argument("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
    options.add_argument("--proxy-server=http://127.0.0.1:9")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.execute_cdp_cmd("Network.enable", {})
    _network(browser, offline=True)
    yield browser
    browser.quit()


@pytest.fixture(scope="module", params=["report-html", "nbconvert"])
def written_page(request, tmp_path_factory) -> tuple[str, Path]:
    """One offline page of ``_result()``, written once for the tests that open it: its kind
    and path."""
    path = tmp_path_factory.mktemp("pages") / f"{request.param}.html"
    if request.param == "report-html":
        write_html(_result(), path)
    else:
        _nbconvert_page(_result(), path)
    return request.param, path


@pytest.fixture
def page(written_page, tmp_path, driver):
    """One offline page, opened afresh and its charts rendered; the screenshot kept."""
    kind, path = written_page
    result = _result()
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get_log("performance")
    driver.get(path.as_uri())
    items = [item for section in sections.REPORT_SECTIONS for item in section.render(result)]
    charts = sum(isinstance(item, views.View) for item in items)
    WebDriverWait(driver, 60).until(
        lambda d: (
            d.find_element(By.TAG_NAME, "body").get_attribute("data-eb-charts")
            in (str(charts), "failed")
        )
    )
    assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-eb-charts") == str(charts)
    yield driver, result, tmp_path / kind
    driver.save_screenshot(str(tmp_path / f"{kind}.png"))
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    requested = [
        json.loads(e["message"])["message"]["params"]["request"]["url"]
        for e in driver.get_log("performance")
        if '"Network.requestWillBeSent"' in e["message"]
    ]
    assert all(url.startswith(("file:", "data:", "blob:", "about:")) for url in requested), (
        requested
    )


def _chart(driver, title: str):
    """The .eb-view whose chart's title starts with ``title``."""
    for figure in driver.find_elements(By.CSS_SELECTOR, ".eb-view"):
        texts = [t.text for t in figure.find_elements(By.CSS_SELECTOR, "g.role-title text")]
        if any(t.startswith(title) for t in texts):
            return figure
    raise AssertionError(f"no chart titled {title!r}")


def _marks(figure, name: str) -> list:
    return figure.find_elements(By.CSS_SELECTOR, f"g.{name}_marks > path")


def _wait_marks(driver, figure, name: str, count: int) -> list:
    WebDriverWait(driver, 10).until(lambda _: len(_marks(figure, name)) == count)
    return _marks(figure, name)


HIT = """
const [element] = arguments;
const box = element.getBoundingClientRect();
for (const dx of [0, 1, -1, 2, -2, 3, -3, 4, -4]) {
  for (const dy of [0, 1, -1, 2, -2, 3, -3]) {
    const x = Math.round(box.x + box.width / 2) + dx, y = Math.round(box.y + box.height / 2) + dy;
    if (document.elementFromPoint(x, y) === element) return [x, y];
  }
}
return null;
"""


def _pointer_to(driver, element, *, click: bool = False) -> None:
    """Put the pointer on a pixel that hits ``element`` (an SVG circle's box centre, which
    WebDriver aims at, can miss it by a pixel), scrolled into view; then click if asked."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    point = driver.execute_script(HIT, element)
    assert point is not None, "no pixel of the mark is under the pointer"
    actions = ActionBuilder(driver)
    actions.pointer_action.move_to_location(*point)
    if click:
        actions.pointer_action.click()
    actions.perform()


def _tooltip(driver) -> dict[str, str]:
    element = WebDriverWait(driver, 10).until(
        lambda d: (
            d.find_element(By.ID, "vg-tooltip-element")
            if "visible"
            in (d.find_element(By.ID, "vg-tooltip-element").get_attribute("class") or "")
            else False
        )
    )
    rows = element.find_elements(By.CSS_SELECTOR, "tr")
    cells = [[c.text for c in r.find_elements(By.CSS_SELECTOR, "td")] for r in rows]
    # d3-format writes a minus sign (U+2212) where Python writes a hyphen
    return {key.rstrip(":"): value.replace("\u2212", "-") for key, value in cells}


def test_every_chart_renders_its_marks_and_keeps_its_png(page):
    driver, result, _ = page
    figures = driver.find_elements(By.CSS_SELECTOR, ".eb-view")
    for figure in figures:
        assert figure.find_elements(By.CSS_SELECTOR, ".eb-chart svg"), figure.text
        assert figure.find_elements(By.CSS_SELECTOR, "g.role-mark > path, g.role-mark > line")
        img = figure.find_element(By.CSS_SELECTOR, "details.eb-static img")
        assert len(img.get_attribute("alt")) > 40
    paired = figuredata.paired_table(result)
    audio = figuredata.case_paired(paired, "audio", 1172)
    assert len(_marks(_chart(driver, PAIRED), "paired_points")) == len(audio) == AUDIO_BLOCKS


def test_the_case_menu_changes_the_marks(page):
    driver, _, stem = page
    figure = _chart(driver, PAIRED)
    before = [p.get_attribute("d") for p in _marks(figure, "paired_points")]
    menu = Select(figure.find_element(By.CSS_SELECTOR, ".vega-bindings select"))
    assert [o.text for o in menu.options] == ["Audio", "Interleaved audio/video"]
    menu.select_by_visible_text("Interleaved audio/video")
    after = _wait_marks(driver, figure, "paired_points", 12)
    assert [p.get_attribute("d") for p in after] != before
    driver.save_screenshot(f"{stem}-interleaved.png")


def test_hovering_a_block_shows_its_numbers(page):
    driver, result, _ = page
    figure = _chart(driver, PAIRED)
    audio = figuredata.case_paired(figuredata.paired_table(result), "audio", 1172)
    for point in _marks(figure, "paired_points")[:3] + _marks(figure, "paired_points")[5:6]:
        _pointer_to(driver, point)
        shown = _tooltip(driver)
        row = audio[audio["block"] == int(shown["block"])].iloc[0]
        assert shown["case"] == "Audio" and shown["worker"] == str(row["worker"])
        assert shown["reduction (%)"] == f"{row['reduction_pct']:.2f}"
        assert shown["baseline µs"] == f"{row['baseline_us']:.2f}"
        assert shown.get("flags", "") == row["flags"]
        assert shown["canary µs"] == f"{row['canary_us']:.1f}"
        away = figure.find_element(By.CSS_SELECTOR, ".vega-bindings")
        ActionChains(driver).move_to_element(away).perform()  # the tooltip goes


def test_a_click_on_a_block_highlights_its_worker_in_the_other_charts(page):
    driver, result, _ = page
    paired = _chart(driver, PAIRED)
    others = _chart(driver, PER_BLOCK)
    Select(others.find_element(By.CSS_SELECTOR, ".vega-bindings select")).select_by_visible_text(
        "Interleaved audio/video"
    )
    _wait_marks(driver, others, "distribution_points", 24)
    point = _marks(paired, "paired_points")[0]  # audio block 0, worker 0
    _pointer_to(driver, point, click=True)
    # The per-block chart follows to Audio, and only worker 0's halves stay opaque.
    points = _wait_marks(driver, others, "distribution_points", 2 * AUDIO_BLOCKS)
    WebDriverWait(driver, 10).until(
        lambda _: sum(p.get_attribute("opacity") == "0.2" for p in points) > 0
    )
    audio = figuredata.case_paired(figuredata.paired_table(result), "audio", 1172)
    faded = sum(p.get_attribute("opacity") == "0.2" for p in points)
    assert faded == 2 * int((audio["worker"] != 0).sum())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_jupyterlab_renders_the_charts_of_an_untrusted_notebook(driver, tmp_path):
    """JupyterLab 4 on 127.0.0.1 with a temporary token opens a notebook holding the views'
    outputs, never trusted here (a fresh data dir, no signature): every chart renders.
    The server is this test's only network: loopback, for the length of the test."""

    result = _result()
    outputs = [
        new_output("display_data", data=data, metadata=metadata)
        for section in sections.REPORT_SECTIONS
        for item in section.render(result)
        if isinstance(item, views.View)
        for data, metadata in [item.bundle()]
    ]
    notebook = new_notebook(cells=[new_code_cell("show()", outputs=outputs)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, tmp_path / "views.ipynb")
    (tmp_path / "data").mkdir()
    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    notary = NotebookNotary(data_dir=env["JUPYTER_DATA_DIR"])
    assert not notary.check_signature(nbformat.read(tmp_path / "views.ipynb", as_version=4))
    token, port = secrets.token_hex(16), _free_port()
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1"),
            *(f"--port={port}", f"--IdentityProvider.token={token}"),
            *(f"--ServerApp.root_dir={tmp_path}", "--LabApp.news_url=", "--allow-root"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "jupyterlab.log").open("w"),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail((tmp_path / "jupyterlab.log").read_text()[-2000:])
        _network(driver, offline=False)
        driver.get(f"{base}/lab/tree/views.ipynb?token={token}")
        paired = ".jp-RenderedVegaLite g.paired_points_marks > path"
        try:  # JupyterLab renders outputs as they scroll into view: the first ones suffice
            WebDriverWait(driver, 120).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, paired)) == AUDIO_BLOCKS
            )
        finally:
            driver.save_screenshot(str(tmp_path / "jupyterlab.png"))
        assert not driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")  # charts
    finally:
        driver.get("about:blank")  # leave JupyterLab (it warns on unload) before it stops
        driver.get_log("browser")
        _network(driver, offline=True)
        server.terminate()
        server.wait(timeout=30)


def test_the_compare_view_hides_a_run_with_its_checkbox(driver, tmp_path):
    """The compare notebook's chart through the offline template: unticking a run removes
    its marks; ticking it brings them back."""
    from nbconvert import HTMLExporter

    from embedbench.report import compare

    runs = {"monday": make_result(seed=1), "tuesday": make_result(seed=2, reduction=0.3)}
    data, metadata = sections.comparison(runs, compare.reference_results())[0].bundle()
    notebook = tmp_path / "compare.ipynb"
    nbformat.write(
        new_notebook(
            cells=[
                new_code_cell(
                    "show()", outputs=[new_output("display_data", data=data, metadata=metadata)]
                )
            ]
        ),
        notebook,
    )
    exporter = HTMLExporter(template_file=str(ROOT / "scripts" / "offline.html.j2"))
    exporter.exclude_input = True
    page = tmp_path / "compare.html"
    page.write_text(exporter.from_filename(str(notebook))[0], encoding="utf-8")
    driver.get_log("browser")
    driver.get(page.as_uri())
    WebDriverWait(driver, 60).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-eb-charts") == "1"
    )
    figure = driver.find_element(By.CSS_SELECTOR, ".eb-view")
    points = _marks(figure, "compare_points")
    assert len(points) == 2 + 2 + 6  # two cases per run, the PR's six rows
    boxes = figure.find_elements(By.CSS_SELECTOR, ".vega-bindings input[type=checkbox]")
    names = [b.find_element(By.XPATH, "..").text.strip() for b in boxes]
    assert names[:2] == ["monday", "tuesday"] and len(names) == 3
    boxes[0].click()  # hide monday
    _wait_marks(driver, figure, "compare_points", 2 + 6)
    boxes[0].click()
    _wait_marks(driver, figure, "compare_points", 2 + 2 + 6)
    driver.save_screenshot(str(tmp_path / "compare.png"))
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_an_outlier_workers_blocks_are_hollow_on_its_band_with_the_reason(driver, tmp_path):
    """The paired chart of a run with an outlier worker: its span shaded amber among the
    others' (every other one grey), its blocks hollow, hovering one shows why."""
    result = make_result(workers=5, blocks=30, outlier_worker=2, cases=("audio",))
    table = figuredata.paired_table(result)
    page = tmp_path / "outlier-worker.html"
    write_html(result, page)
    driver.get_log("browser")
    driver.get(page.as_uri())
    WebDriverWait(driver, 60).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-eb-charts")
    )
    items = [item for section in sections.REPORT_SECTIONS for item in section.render(result)]
    charts = str(sum(isinstance(item, views.View) for item in items))
    assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-eb-charts") == charts
    figure = _chart(driver, PAIRED)
    spans = figuredata.worker_spans(table)
    shaded = spans[spans["shade"] | spans["outlier_worker"]]
    assert len(_marks(figure, "worker_spans")) == len(shaded) == 3  # w0, w2 (amber), w4
    labels = [t.text for t in figure.find_elements(By.CSS_SELECTOR, "g.worker_labels_marks text")]
    assert labels == ["w0", "w1", "w2 outlier", "w3", "w4"]
    points = _marks(figure, "paired_points")
    assert len(points) == len(table)
    fills = [p.get_attribute("fill") for p in points]
    assert [i for i, f in enumerate(fills) if f == "white"] == list(
        table.index[table["outlier_worker"]]
    )
    _pointer_to(driver, points[13])
    shown = _tooltip(driver)
    assert shown["worker"] == "2" and shown["block"] == "13"
    assert shown["outlier worker, why"] == table.loc[13, "worker_reason"]
    assert "outlier worker" in shown["flags"]
    driver.save_screenshot(str(tmp_path / "outlier-worker.png"))
    assert not [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def test_a_click_on_a_case_lists_its_operators_and_the_work_chart_follows(driver, tmp_path):
    """The operators' chart opens on the first case; a click on Audio's fixed bar lists
    Audio's operators (one more here than Text's) with the baseline's faded, and a click
    on a point of the work-against-time chart picks that case there too."""
    from test_work_figures import with_work

    result = with_work(make_result(cases=("text", "audio", "image")))
    for row in result.work:
        if row["case"] == "audio":
            row["ops"]["aten.cat"] = 1
            row["op_bytes"]["aten.cat"] = {"read": 4000, "written": 4000}
    page = tmp_path / "operators.html"
    write_html(result, page)
    driver.get_log("browser")
    driver.get(page.as_uri())
    WebDriverWait(driver, 60).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-eb-charts")
    )
    operators = _chart(driver, "Operators per call")
    labels = operators.find_elements(By.CSS_SELECTOR, "g.role-axis-label text")

    def listed() -> list[str]:
        texts = operators.find_elements(By.CSS_SELECTOR, "g.role-axis-label text")
        return [t.text for t in texts if t.text.startswith("aten.")]

    assert labels and listed() == ["aten.embedding ×1 → ×1", "aten.to ×1 → ×1"]
    assert len(_marks(operators, "operator_bars")) == 4
    cases = _marks(operators, "operator_cases")
    assert len(cases) == 3 * 2  # each case's two forms
    _pointer_to(driver, cases[3], click=True)  # Audio's fixed bar
    WebDriverWait(driver, 10).until(lambda _: len(_marks(operators, "operator_bars")) == 6)
    assert listed() == ["aten.embedding ×2 → ×1", "aten.to ×2 → ×1", "aten.cat ×1 → ×1"]
    faded = [b for b in _marks(operators, "operator_bars") if b.get_attribute("opacity") == "0.25"]
    assert len(faded) == 3  # the baseline's three operators
    work = _chart(driver, "Work against time")
    points = _marks(work, "disagreement_points")
    assert len(points) == 3 * 2  # bytes moved and instructions per case
    _pointer_to(driver, points[1], click=True)  # Text's instructions, over its bytes moved
    WebDriverWait(driver, 10).until(lambda _: len(_marks(operators, "operator_bars")) == 4)
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
