"""report.md links its run's page, and the recipe runner's report step writes that page beside it."""

import json
import re

from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.report import write_report

from ..helpers.view import WRONG_SAMPLES, make_run


def _recipe(run):
    steps = [
        ("traces", "generate"),
        ("verified", "filter"),
        ("pairs", "pairs"),
        ("eval_base", "eval"),
        ("eval_tuned", "eval"),
    ]
    return parse_recipe(
        {"name": "viewed", "out": str(run), "steps": [{"name": n, "stage": s, "with": {}} for n, s in steps]}, "r.yaml"
    )


def test_report_md_links_the_page_written_beside_it(tmp_path):
    run = make_run(tmp_path)
    report = write_report(_recipe(run)).read_text()
    assert "**Look at the data**: [view.html](view.html)" in report and f"`distill view {run}`" in report
    html = (run / "view.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="rk-data">(.*?)</script>', html, re.S).group(1))
    assert data["report"]["markdown"] == report  # the page shows the report that links it
    assert data["tables"]["verified"]["reasons"]["wrong"]["total"] == WRONG_SAMPLES + 1
    assert [s["name"] for s in data["sections"] if s["type"] == "eval"] == ["eval_base", "eval_tuned"]


def test_a_run_the_page_cannot_read_says_so_in_report_md(tmp_path):
    run = make_run(tmp_path)
    (run / "verified" / "_manifest.json").write_text("{torn")
    report = write_report(_recipe(run)).read_text()
    assert "[view.html]" not in report and not (run / "view.html").exists()
    assert re.search(
        r"\*\*Look at the data\*\*: no view.html was written: .*verified/_manifest.json: unreadable manifest", report
    )
