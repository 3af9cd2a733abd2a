"""filters/difficulty.py: ``distill filter --difficulty EVAL_DIR --pass-rate LO..HI`` end to end on literal
traces and a literal eval directory's problems.parquet."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reasonkit.config import from_dict
from reasonkit.errors import UserError
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.stage import run_filter
from reasonkit.store import load_manifest, read_stage

from ..helpers.synthetic import trace, write_traces


def write_eval(path, counts: dict[str, tuple[int, int]]):
    """An eval directory as far as the filter reads it: problems.parquet's id, n (samples), correct."""
    path.mkdir(parents=True)
    ids = list(counts)
    pq.write_table(
        pa.table({"id": ids, "n": [counts[i][0] for i in ids], "correct": [counts[i][1] for i in ids]}),
        path / "problems.parquet",
    )
    return path


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
    write_eval(tmp_path / "eval", {"easy": (8, 8), "mid": (8, 4), "hard": (8, 1), "other": (8, 3)})
    report = run_filter(config(tmp_path))
    kept = read_stage(tmp_path / "out", kind="verdicts")
    assert set(kept.column("id").to_pylist()) == {"mid"} and kept.column("pass_rate").to_pylist() == [0.5, 0.5]
    rejected = read_stage(tmp_path / "out" / "rejected", kind="verdicts").to_pylist()
    why = {r["id"]: (r["drop_reason"], r["pass_rate"]) for r in rejected}
    assert why == {"easy": ("too_easy", 1.0), "hard": ("too_hard", 0.125), "new": ("unrated", None)}
    dropped = {s["reason"]: s["dropped"] for s in report["funnel"] if s["filter"] == "difficulty"}
    assert dropped == {"too_easy": 2, "too_hard": 2, "unrated": 2}
    manifest = load_manifest(tmp_path / "out")
    assert manifest["config"]["difficulty"] == str(tmp_path / "eval") and manifest["config"]["pass_rate"] == "0.2..0.8"
    assert any(str(p).endswith("problems.parquet") for p in manifest["input_path"])
    assert len(pq.read_table(tmp_path / "out" / "sft")) == 2


def test_an_eval_of_other_prompts_is_one_line_before_any_work(tmp_path):
    write_traces(tmp_path / "traces", [trace("a"), trace("b")])
    write_eval(tmp_path / "eval", {"x": (4, 2)})
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
    write_eval(tmp_path / "eval", {"easy": (4, 4), "mid": (4, 2)})
    args = ["filter", str(tmp_path / "traces"), "--out", str(tmp_path / "out"), "--verifier", "int", "--lang", "none"]
    result = CliRunner().invoke(cli, [*args, "--difficulty", str(tmp_path / "eval"), "--pass-rate", "0.25..0.75"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["rows_out"] == 1
