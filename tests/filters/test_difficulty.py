"""filters/difficulty.py: ``distill filter --difficulty EVAL_DIR --pass-rate LO..HI`` end to end on literal
traces and a literal eval directory's problems.parquet."""

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reasonkit.config import from_dict
from reasonkit.errors import UserError
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.store import load_manifest, read_stage

from ..helpers.synthetic import trace, write_traces
from ..helpers.view import write_eval


def counts(**solved: int) -> dict[str, list[bool]]:
    """Each problem's 4 samples, the first ``solved`` of them correct (the eval's problems.parquet counts them)."""
    return {pid: [j < k for j in range(4)] for pid, k in solved.items()}


def config(tmp_path, **kw):
    base = dict(
        traces=str(tmp_path / "traces"),
        out=str(tmp_path / "out"),
        verifier="int",
        workers=1,
        lang=None,
        dedup="none",
        difficulty=str(tmp_path / "eval"),
        pass_rate="0.2..0.8",
    )
    return FilterConfig(**{**base, **kw})


def test_prompts_outside_the_band_are_dropped_with_their_reason(tmp_path):
    write_traces(tmp_path / "traces", [trace(p, s) for p in ("easy", "mid", "hard", "new") for s in (0, 1)])
    write_eval(tmp_path / "eval", counts(easy=4, mid=2, hard=0, other=3))
    report = run_filter(config(tmp_path))
    kept = read_stage(tmp_path / "out", kind="verdicts")
    assert set(kept.column("id").to_pylist()) == {"mid"} and kept.column("pass_rate").to_pylist() == [0.5, 0.5]
    rejected = read_stage(tmp_path / "out" / "rejected", kind="verdicts").to_pylist()
    why = {r["id"]: (r["drop_reason"], r["pass_rate"]) for r in rejected}
    assert why == {"easy": ("too_easy", 1.0), "hard": ("too_hard", 0.0), "new": ("unrated", None)}
    dropped = {s["reason"]: s["dropped"] for s in report["funnel"] if s["filter"] == "difficulty"}
    assert dropped == {"too_easy": 2, "too_hard": 2, "unrated": 2}
    manifest = load_manifest(tmp_path / "out")
    assert manifest["config"]["difficulty"] == str(tmp_path / "eval") and manifest["config"]["pass_rate"] == "0.2..0.8"
    assert any(str(p).endswith("problems.parquet") for p in manifest["input_path"])
    assert len(pq.read_table(tmp_path / "out" / "sft")) == 2


def test_an_eval_of_other_prompts_is_one_line_before_any_work(tmp_path):
    write_traces(tmp_path / "traces", [trace("a"), trace("b")])
    write_eval(tmp_path / "eval", counts(x=2))
    with pytest.raises(UserError, match=r"rates none of the 2 prompts .* \(e.g. a, b\); it rates 1 others"):
        run_filter(config(tmp_path))
    assert not (tmp_path / "out").exists()


def test_not_an_eval_directory(tmp_path):
    write_traces(tmp_path / "traces", [trace("a")])
    (tmp_path / "eval").mkdir()
    with pytest.raises(UserError, match="no problems.parquet"):
        run_filter(config(tmp_path))


@pytest.mark.parametrize("band", ["0.8..0.2", "0.1", "a..b", "0..1.5"])
def test_a_bad_band_names_the_field(band):
    with pytest.raises(UserError, match="pass_rate: expected LO..HI"):
        from_dict(FilterConfig, {"traces": "t", "out": "o", "pass_rate": band}, "filter")


def test_the_command_takes_the_flags(tmp_path):
    from reasonkit.cli import cli

    write_traces(tmp_path / "traces", [trace("easy"), trace("mid")])
    write_eval(tmp_path / "eval", counts(easy=4, mid=2))
    args = ["filter", str(tmp_path / "traces"), "--out", str(tmp_path / "out"), "--verifier", "int", "--lang", "none"]
    result = CliRunner().invoke(cli, [*args, "--difficulty", str(tmp_path / "eval"), "--pass-rate", "0.25..0.75"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["rows_out"] == 1
