"""Benchmark: first paint of ``distill view`` for a 100,000-row traces table, against loading it with pandas.

    python bench/view.py                     # 100,000 rows (25,000 prompts x 4 samples), 3 loads each
    python bench/view.py --prompts 2500 --repeats 5

A traces stage of R1-shaped literal rows (tests/helpers/synthetic.py: a think block of ~60 words, a boxed answer) is
written once; then, in the same run:

- ``pandas``: ``pd.read_parquet`` of its shards, the baseline (what a person does today before seeing a row);
- ``build``: ``distill view DIR`` (the default sample) and ``distill view DIR --rows N`` (every row on the page);
- ``paint``: each page opened from a file:// URL in headless Debian chromium (selenium), a fresh load each time:
  first contentful paint, and ``rows``, the moment the first page of rows is drawn (view.js marks it) - what
  the target (under 2 s) is about;
- ``served``: ``distill view DIR --serve``, the same moment with the rows read from the shards on demand.

Printed: each figure (median of the loads) and the ratio of each page's ``rows`` to the pandas load.

Figures of 2026-12-07 (2 cores of an Intel Xeon shared with a training job; Debian's chromium 156 headless;
100,000 rows, 27.9 MB of Parquet; median of 3 loads):

- pandas.read_parquet: 0.277 s (the baseline);
- the default page (2,000 rows sampled, 2.0 MB): built in 0.41 s, first rows drawn 0.113 s after navigation
  (0.41x pandas' load; build and first rows 0.53 s, 1.90x);
- every row on the page (66.6 MB): built in 1.57 s, first rows 1.037 s (3.74x; 2.60 s with the build, 9.38x);
- --serve: first rows 0.131 s (0.47x), each page of 50 rows read from the shards on demand.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path


def make_traces(folder: Path, prompts: int) -> Path:
    from reasonkit.tests.helpers.synthetic import synthetic_rows, traces_table, write_traces

    rows = synthetic_rows(prompts, "int", samples=4, seed=0)
    return write_traces(folder / "traces", traces_table(rows), shard_rows=10_000)


def pandas_load(traces: Path) -> float:
    import pandas as pd

    start = time.perf_counter()
    frame = pd.read_parquet(sorted(traces.glob("part-*.parquet")))
    took = time.perf_counter() - start
    assert len(frame) > 0
    return took


def build(traces: Path, out: Path, rows: int) -> float:
    from reasonkit.view.collect import Options, collect
    from reasonkit.view.page import write

    start = time.perf_counter()
    write(collect(traces, Options(rows=rows)).data, out)
    return time.perf_counter() - start


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def paint(driver, url: str) -> tuple[float, float]:
    """(first contentful paint, first rows drawn), in seconds from the start of navigation."""
    driver.get("about:blank")
    driver.get(url)
    deadline = time.time() + 120
    while not driver.execute_script("return document.body && document.body.getAttribute('data-ready')"):
        if time.time() > deadline:
            raise RuntimeError(f"{url}: the page never drew its rows")
        time.sleep(0.02)
    fcp = driver.execute_script("return (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
    rows = driver.execute_script("return performance.getEntriesByName('rk-rows')[0].startTime")
    return (fcp or 0) / 1000, rows / 1000


def median_paint(driver, url: str, repeats: int) -> tuple[float, float]:
    got = [paint(driver, url) for _ in range(repeats)]
    return statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=25_000, help="prompts x 4 samples = rows")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        traces = make_traces(folder, args.prompts)
        n = args.prompts * 4
        size = sum(p.stat().st_size for p in traces.glob("part-*.parquet")) / 1e6
        print(f"table: {n:,} rows, {size:.1f} MB of Parquet")
        base = statistics.median(pandas_load(traces) for _ in range(args.repeats))
        print(f"pandas.read_parquet (baseline): {base:.3f} s")
        pages = {"sampled": (folder / "sampled.html", 2000), "every row": (folder / "all.html", n)}
        built = {name: build(traces, path, rows) for name, (path, rows) in pages.items()}
        driver = browser()
        try:
            for name, (path, _) in pages.items():
                fcp, rows = median_paint(driver, path.as_uri(), args.repeats)
                print(
                    f"view, {name}: build {built[name]:.2f} s, page {path.stat().st_size / 1e6:.1f} MB, first paint "
                    f"{fcp:.3f} s, first rows {rows:.3f} s = {rows / base:.2f}x pandas' load "
                    f"(build + first rows {built[name] + rows:.2f} s = {(built[name] + rows) / base:.2f}x)"
                )
            fcp, rows = served_paint(driver, traces, args.repeats)
            print(f"view --serve: first paint {fcp:.3f} s, first rows {rows:.3f} s = {rows / base:.2f}x pandas' load")
        finally:
            driver.quit()


def served_paint(driver, traces: Path, repeats: int) -> tuple[float, float]:
    from reasonkit.view.collect import Options, collect
    from reasonkit.view.page import render
    from reasonkit.view.serve import serve

    found = collect(traces, Options(remote=True))
    server = serve(render(found.data, served=True), found.sources, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        return median_paint(driver, f"http://127.0.0.1:{server.server_address[1]}/", repeats)
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
