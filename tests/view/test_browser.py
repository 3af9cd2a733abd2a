"""distill view in a real browser: Debian's chromium through chromium-driver and selenium (.ci/run installs them).

The page is opened from a file:// URL as a person opens it; each test clicks as a person would, then checks what
is shown, that the browser logged no error and requested nothing but the page itself (data: URLs are the page's
own bytes). A screenshot of each view is written under the test's temp dir (printed) for a person to look at.
"""

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.view.command import view

from ..helpers.view import BIG_LINE, PAYLOADS, WRONG_PROMPT, WRONG_SAMPLES, make_run, write_hostile

pytestmark = pytest.mark.slow  # a browser start and a page load each: seconds

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')"
    )
    if not (CHROMIUM and DRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def run_page(tmp_path_factory) -> Path:
    run = make_run(tmp_path_factory.mktemp("browser"))
    result = CliRunner().invoke(view, [str(run)])
    assert result.exit_code == 0, result.output
    return run / "view.html"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("screenshots")
    print(f"\nscreenshots: {folder}")
    return folder


def ready(driver, timeout: float = 30) -> None:
    """Wait until the page has drawn what the address asks for (view.js marks the body)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if driver.execute_script("return document.body && document.body.getAttribute('data-ready')"):
            return
        time.sleep(0.05)
    raise AssertionError("the page never finished drawing")


def click(driver, css: str, text: str | None = None):
    from selenium.webdriver.common.by import By

    found = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if text is None or e.text.strip() == text]
    assert found, f"nothing matches {css} {text or ''}"
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", found[0])
    found[0].click()
    return found[0]


def load(driver, page: Path, view: str = "") -> str:
    """Open ``page`` from disk at ``view`` (an address fragment) and wait for it; returns its file:// URL."""
    url = page.as_uri()
    driver.get(url + view)
    ready(driver)
    return url


def navigate(driver, css: str, text: str | None = None) -> None:
    """Click something that changes the view, and wait for the new one (not the one before it)."""
    driver.execute_script("document.body.removeAttribute('data-ready')")
    click(driver, css, text)
    ready(driver)


def open_card(driver, index: int = 0):
    """Open a row's card (a page of one row opens it already) and return its body."""
    card = driver.find_elements("css selector", ".card")[index]
    if not card.find_element("css selector", ".body").is_displayed():
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", card)
        card.find_element("css selector", ".head").click()
    return card.find_element("css selector", ".body")


def visible_text(driver) -> str:
    return driver.execute_script("return document.getElementById('main').innerText")


def requests_made(driver) -> list[str]:
    """Every URL the browser asked for since the last call (its performance log of network events)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def quiet_and_alone(driver, page_url: str) -> None:
    """No error in the console, and no request but the page (any #view of it) and data: URLs inside it."""
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors
    others = [
        u for u in requests_made(driver) if u.split("#")[0] != page_url.split("#")[0] and not u.startswith("data:")
    ]
    assert others == [], others


def done(driver, page_url: str, screenshot: Path) -> None:
    """The view for a person to look at, then the checks every view passes."""
    driver.save_screenshot(str(screenshot))
    quiet_and_alone(driver, page_url)


def test_a_drop_reason_leads_to_its_rows_and_a_think_block_unfolds(browser, run_page, shots):
    url = load(browser, run_page)
    browser.save_screenshot(str(shots / "1-overview.png"))
    navigate(browser, "a.reason-link", "wrong")  # in the funnel
    assert f"of {WRONG_SAMPLES + 1} matching" in visible_text(browser)
    prompt = browser.find_element("css selector", "input[data-filter=prompt]")
    browser.execute_script("document.body.removeAttribute('data-ready')")
    prompt.send_keys(WRONG_PROMPT + "\n")
    ready(browser)
    cards = browser.find_elements("css selector", ".card")
    assert len(cards) == WRONG_SAMPLES and f"rows 1-{WRONG_SAMPLES} of {WRONG_SAMPLES} matching" in visible_text(
        browser
    )
    assert all("dropped: wrong" in c.text for c in cards)
    body = open_card(browser)
    assert "extracted answer\n5" in body.text and "gold answer\n4" in body.text and "drop reason\nwrong" in body.text
    summary = click(browser, ".card details.think > summary")
    assert "attempt 0: 2 + 2 = 5" in summary.find_element("xpath", "..").text
    done(browser, url, shots / "2-wrong-rows-of-one-prompt.png")


def test_a_pair_side_by_side(browser, run_page, shots):
    url = load(browser, run_page)
    navigate(browser, "nav a[data-section=pairs]")
    open_card(browser)
    sides = browser.find_elements("css selector", ".card .side > div h4")
    assert [s.text for s in sides] == ["chosen (score 1)", "rejected (score 0)"]
    done(browser, url, shots / "3-pair.png")


def test_an_eval_problem_and_two_evals_side_by_side(browser, run_page, shots):
    from selenium.webdriver.support.ui import Select

    url = load(browser, run_page)
    navigate(browser, "nav a[data-section=eval_base]")
    browser.execute_script("document.body.removeAttribute('data-ready')")
    Select(browser.find_element("css selector", "select[data-filter=b]")).select_by_value("eval_tuned")
    ready(browser)
    assert "eval_tuned better on 1, worse on 1, tied on 10 problems" in visible_text(browser)
    navigate(browser, "tr[data-problem=e00]")
    problem = browser.find_element("css selector", "#problem")
    assert "Problem e00: what is 6 x 7?" in problem.text
    columns = problem.find_elements("css selector", ".side > div")
    assert [len(c.find_elements("css selector", ".card")) for c in columns] == [4, 4]
    assert columns[1].text.count("correct") == 2  # eval_tuned got two of its four samples of e00 right
    done(browser, url, shots / "4-eval-problem.png")


def test_rollouts_by_step_and_a_tool_call(browser, run_page, shots):
    url = load(browser, run_page, "#s=grpo&step=2")
    assert "rows 1-8 of 8 matching" in visible_text(browser) and "step 2 - prompt rl-0" in visible_text(browser)
    browser.save_screenshot(str(shots / "5-grpo-step-2.png"))
    navigate(browser, "nav a[data-section=agent_traces]")
    text = open_card(browser).text
    assert (
        "call search" in text and '{"query": "passage author"}' in text and "The passage was written by Ada." in text
    )
    browser.save_screenshot(str(shots / "6-trajectory.png"))
    navigate(browser, "nav a[data-section='']")
    assert browser.find_elements("css selector", ".md img")  # the report's plot, inlined
    done(browser, url, shots / "7-report.png")


def test_model_text_stays_text_in_the_browser(browser, tmp_path, shots):
    from selenium.common.exceptions import NoAlertPresentException

    hostile = write_hostile(tmp_path / "hostile")
    assert CliRunner().invoke(view, [str(hostile)]).exit_code == 0
    url = load(browser, hostile / "view.html")
    for head in browser.find_elements("css selector", ".card .head"):
        browser.execute_script("arguments[0].click()", head)
    for summary in browser.find_elements("css selector", "details.think > summary"):
        browser.execute_script("arguments[0].click()", summary)
    time.sleep(0.5)  # anything that was going to run has had its chance
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert browser.execute_script("return window.__xss") is None
    dangerous = ", ".join(
        f"main {x}" for x in ("[onerror]", "[onload]", "iframe", "link", "script", "svg", "img", "a[href^=javascript]")
    )
    assert browser.execute_script(f"return document.querySelectorAll('{dangerous}').length") == 0
    assert browser.execute_script(
        "return [...document.querySelectorAll('main a')].every(a => a.getAttribute('href').startsWith('#'))"
    )
    shown = visible_text(browser)
    for payload in PAYLOADS:
        if "$" not in payload:  # KaTeX typesets the math one (its \href as text: checked above)
            assert payload in shown, payload
    longest = browser.execute_script(
        "return Math.max(...[...document.querySelectorAll('.text')].map(e => e.textContent.length))"
    )
    assert longest == BIG_LINE
    done(browser, url, shots / "8-hostile-text.png")


def test_the_served_page_reads_rows_on_demand(browser, run_page, shots):
    from reasonkit.view.collect import Options, collect
    from reasonkit.view.page import render
    from reasonkit.view.serve import serve

    found = collect(run_page.parent, Options(rows=2000, per_reason=200, remote=True))
    server = serve(render(found.data, served=True), found.sources, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        browser.get(url + f"#s=verified&reason=wrong&prompt={WRONG_PROMPT}")
        ready(browser)
        assert f"rows 1-{WRONG_SAMPLES} of {WRONG_SAMPLES} matching" in visible_text(browser)
        assert "read from the Parquet shards page by page" in visible_text(browser)
        browser.save_screenshot(str(shots / "9-served.png"))
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
        assert all(u.startswith((url, "data:")) for u in requests_made(browser))
    finally:
        server.shutdown()
        server.server_close()
