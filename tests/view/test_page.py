"""distill view: what the page holds for a run made by the real stages, its sampling, its escaping, its server."""

import base64
import hashlib
import json
import re
import subprocess
import sys
import threading
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.view import rows as R
from reasonkit.view.collect import Options, collect
from reasonkit.view.command import view

from ..helpers.view import BIG_LINE, PAYLOADS, WRONG_PROMPT, WRONG_SAMPLES, make_run, write_hostile

DISTILL = Path(sys.executable).parent / "distill"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("view"))


def page_data(html: str) -> dict:
    """The JSON the page carries, read back as the page's script reads it."""
    found = re.search(r'<script type="application/json" id="rk-data">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))


def test_a_run_becomes_one_section_per_step_with_its_tables(run):
    data = collect(run, Options(rows=2000, per_reason=200)).data
    sections = {s["name"]: s for s in data["sections"]}
    assert list(sections) == ["traces", "verified", "pairs", "grpo", "agent_traces", "eval_base", "eval_tuned"]
    assert (
        sections["traces"]["shown_in"] == "verified" and sections["traces"]["table"] is None
    )  # shown once, with verdicts
    verified = data["tables"]["verified"]
    assert verified["view"] == "trace" and verified["total"] == 42  # the kept rows and rejected/ as one table
    assert verified["reasons"] == {"wrong": {"total": WRONG_SAMPLES + 1, "shown": WRONG_SAMPLES + 1}}
    assert [f["dropped"] for f in sections["verified"]["funnel"]["funnel"] if f["reason"] == "wrong"] == [
        WRONG_SAMPLES + 1
    ]
    assert data["tables"]["pairs"]["view"] == "pair" and data["tables"]["pairs"]["total"] == 1
    assert data["tables"]["agent_traces"]["view"] == "trajectory"
    assert data["tables"]["grpo/rollouts"]["view"] == "rollout"
    assert [s["step"] for s in sections["grpo"]["steps"]] == [1, 2, 3]
    assert sections["grpo"]["steps"][0]["reward_accuracy"] == pytest.approx(0.5)
    base = {p["id"]: p for p in sections["eval_base"]["problems"]}
    assert len(base) == 12 and base["e03"]["correct"] == 3 and len(base["e03"]["samples"]) == 4
    assert base["e03"]["problem"] == "Problem e03: what is 6 x 7?" and base["e03"]["answer"] == "42"
    assert data["report"]["images"]["funnel_verified.png"].startswith("data:image/png;base64,")


def test_the_raw_completion_is_sent_once(run):
    data = collect(run / "verified", Options(rows=2000, per_reason=200)).data
    table = data["tables"][next(iter(data["tables"]))]
    rows = [dict(zip(table["columns"], r)) for r in table["rows"]]
    assert all(r["completion"] is None and r["reasoning"] for r in rows)  # think + response hold it
    assert "problem" not in table["columns"]  # the prompt messages hold it


def test_a_large_table_keeps_every_reason_and_whole_prompts():
    ids = [f"k{i}" for i in range(1000)] + [WRONG_PROMPT] * 10 + [f"d{i // 2}" for i in range(300)] + ["odd"]
    reasons = [None] * 1000 + ["wrong"] * 10 + ["duplicate"] * 300 + ["language"]
    table = pa.table({"id": ids, "drop_reason": reasons})
    shown, note = R.sample(table, rows=120, per_reason=20)
    got = shown.to_pylist()
    assert note["total"] == 1311 and note["shown"] == len(got) == 120
    assert note["reasons"]["language"] == {"total": 1, "shown": 1}
    assert note["reasons"]["wrong"] == {"total": 10, "shown": 10}  # the first prompt of a reason whole
    assert note["reasons"]["duplicate"]["shown"] == 20 == sum(r["drop_reason"] == "duplicate" for r in got)
    assert sum(r["id"] == WRONG_PROMPT for r in got) == 10
    assert R.sample(table, rows=120, per_reason=20)[0].equals(shown)  # seeded: the same page twice


def test_the_sample_fills_up_with_dropped_rows_where_kept_ones_run_out():
    table = pa.table(
        {"id": ["a", "b"] + [f"d{i}" for i in range(50)], "drop_reason": [None, None] + ["duplicate"] * 50}
    )
    shown, note = R.sample(table, rows=30, per_reason=5)
    assert note["shown"] == 30 and note["reasons"]["duplicate"]["shown"] == 28


def test_the_command_writes_the_page_and_states_what_it_sampled(run, tmp_path):
    out = tmp_path / "v.html"
    result = CliRunner().invoke(view, [str(run), "--out", str(out), "--rows", "20", "--per-reason", "5"])
    assert result.exit_code == 0, result.output
    assert f"view: {out}" in result.output
    assert "verified: 20 of 42 rows" in result.output
    data = page_data(out.read_text())
    assert data["tables"]["verified"]["note"]["reasons"]["wrong"] == {"total": 11, "shown": WRONG_SAMPLES}
    assert sum(r[0] == WRONG_PROMPT for r in data["tables"]["verified"]["rows"]) == WRONG_SAMPLES


def test_the_page_opens_alone(run, tmp_path):
    out = tmp_path / "v.html"
    CliRunner().invoke(view, [str(run), "--out", str(out)], catch_exceptions=False)
    html = out.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I)  # nothing loaded from elsewhere
    assert "url(fonts/" not in html and html.count("data:font/woff2;base64,") >= 20  # KaTeX's fonts inlined
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 2  # KaTeX and the page's own; each allowed by its hash, nothing else may run
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp


def test_model_text_cannot_become_markup(tmp_path):
    hostile = write_hostile(tmp_path / "hostile")
    result = CliRunner().invoke(view, [str(hostile)])
    assert result.exit_code == 0, result.output
    html = (hostile / "view.html").read_text()
    for payload in (p for p in PAYLOADS if "<" in p):  # markup never reaches the HTML as markup
        assert payload not in html
    raw = re.search(r'<script type="application/json" id="rk-data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in raw and ">" not in raw and html.count("</script>") == 3
    rows = page_data(html)["tables"]["hostile"]["rows"]
    responses = {r[0]: r[5] for r in rows}
    assert responses["x-0"] == f"Here it is: {PAYLOADS[0]}"  # the same text, back as it was
    assert len(responses["x-big"]) == BIG_LINE


def test_a_path_it_cannot_read_is_one_line_and_exit_2(run, tmp_path):
    out = subprocess.run([str(DISTILL), "view", str(tmp_path / "missing")], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "missing: no such directory" in out.stderr
    (tmp_path / "empty").mkdir()
    out = subprocess.run([str(DISTILL), "view", str(tmp_path / "empty")], capture_output=True, text=True)
    assert out.returncode == 2 and "nothing to view" in out.stderr
    torn = tmp_path / "torn"
    subprocess.run(["cp", "-r", str(run / "verified"), str(torn)], check=True)
    shard = sorted(torn.glob("part-*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[:100])
    out = subprocess.run([str(DISTILL), "view", str(torn)], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"error: {shard}: unreadable Parquet shard") and out.stderr.count("\n") == 1
    (torn / "report.json").write_text("{not json")
    shard.unlink()
    subprocess.run(["cp", str(sorted((run / "verified").glob("part-*.parquet"))[0]), str(shard)], check=True)
    out = subprocess.run([str(DISTILL), "view", str(torn)], capture_output=True, text=True)
    assert out.returncode == 2 and f"{torn / 'report.json'}: unreadable JSON" in out.stderr


@pytest.fixture()
def served(run):
    from reasonkit.view.page import render
    from reasonkit.view.serve import serve

    found = collect(run, Options(rows=2000, per_reason=200, remote=True))
    server = serve(render(found.data, served=True), found.sources, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", found.data
    server.shutdown()
    server.server_close()


def _get(url: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_served_rows_are_read_on_demand_with_the_pages_filters(served):
    base, data = served
    status, html = _get(base)
    assert status == 200 and b"connect-src 'self'" in html
    assert data["tables"]["verified"]["remote"] and data["tables"]["verified"]["rows"] is None
    rows = lambda **q: json.loads(_get(base + "api/rows?" + "&".join(f"{k}={v}" for k, v in q.items()))[1])  # noqa: E731
    assert rows(table="verified", limit=5)["matching"] == 42
    wrong = rows(table="verified", reason="wrong", prompt=WRONG_PROMPT)
    assert wrong["matching"] == WRONG_SAMPLES and len(wrong["rows"]) == WRONG_SAMPLES
    drop = wrong["columns"].index("drop_reason")
    assert {r[drop] for r in wrong["rows"]} == {"wrong"}
    assert rows(table="verified", reason="(kept)")["matching"] == 31
    assert rows(table="verified", q="ATTEMPT%203")["matching"] == 1  # search: any text, any case
    assert rows(table="verified", q="answered%20wrong")["matching"] == WRONG_SAMPLES  # the prompt's messages too
    assert rows(table="verified", offset=40, limit=10)["rows"].__len__() == 2
    assert rows(table="grpo/rollouts", step=2)["matching"] == 8
    assert _get(base + "api/rows?table=nope")[0] == 404
    assert _get(base + "api/rows?table=verified&offset=x")[0] == 400
    assert _get(base, host="attacker.example")[0] == 403  # a name pointed at 127.0.0.1 by someone else's page


def test_the_wheel_ships_every_asset_with_katex_licence():
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "reasonkit.view"
    ]
    assets = [p.relative_to(REPO / "view") for p in (REPO / "view" / "assets").rglob("*") if p.is_file()]
    assert Path("assets/katex/LICENSE") in assets and Path("assets/katex/katex.min.js") in assets
    for asset in assets:
        assert any(asset.match(g) for g in globs), asset
