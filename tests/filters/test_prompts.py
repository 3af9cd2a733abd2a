"""filters/prompts.py: ``distill filter PROMPTS --difficulty EVAL_DIR --pass-rate LO..HI`` on a prompts table, whose
output GRPO reads as its --data."""

import json

from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.readers import read_prompts
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.store import load_manifest, read_stage

from ..helpers.view import write_eval


def test_a_prompts_table_is_cut_to_the_band_and_reads_as_prompts(tmp_path):
    prompts = write_prompts(tmp_path / "p.parquet", 6, seed=0, variant="mul")
    ids = read_prompts(prompts).column("id").to_pylist()  # the ids an eval of this file scored
    counts = {pid: [j < k for j in range(4)] for pid, k in zip(ids, range(5))}  # the sixth prompt: not evaluated
    write_eval(tmp_path / "eval", counts)
    cfg = FilterConfig(
        traces=str(prompts), out=str(tmp_path / "band"), difficulty=str(tmp_path / "eval"), pass_rate="0.25..0.75"
    )
    report = run_filter(cfg)
    kept = read_prompts(tmp_path / "band")  # as distill train --method grpo --data reads it
    assert kept.column("id").to_pylist() == ids[1:4]
    assert kept.column("pass_rate").to_pylist() == [0.25, 0.5, 0.75]
    rejected = read_stage(tmp_path / "band" / "rejected", kind="prompts").to_pylist()
    assert {r["id"]: r["drop_reason"] for r in rejected} == {ids[0]: "too_hard", ids[4]: "too_easy", ids[5]: "unrated"}
    assert report["rows_in"] == 6 and report["rows_out"] == 3 and report["table"] == "prompts"
    assert [(s["reason"], s["dropped"]) for s in report["funnel"]] == [
        ("too_easy", 1),
        ("too_hard", 1),
        ("unrated", 1),
    ]
    assert json.loads((tmp_path / "band" / "report.json").read_text())["rows_out"] == 3
    manifest = load_manifest(tmp_path / "band")
    assert manifest["kind"] == "prompts" and manifest["complete"] and manifest["config"]["pass_rate"] == "0.25..0.75"
    assert not (tmp_path / "band" / "sft").exists()
    # a rerun resumes: nothing written twice
    run_filter(cfg)
    assert read_stage(tmp_path / "band", kind="prompts").num_rows == 3


def test_the_command_says_what_it_wrote(tmp_path):
    from click.testing import CliRunner

    from reasonkit.cli import cli

    prompts = write_prompts(tmp_path / "p.parquet", 2, seed=0, variant="mul")
    ids = read_prompts(prompts).column("id").to_pylist()
    write_eval(tmp_path / "eval", {ids[0]: [True, False, True, False], ids[1]: [True] * 4})
    args = ["filter", str(prompts), "--out", str(tmp_path / "band"), "--difficulty", str(tmp_path / "eval")]
    result = CliRunner().invoke(cli, [*args, "--pass-rate", "0.1..0.9"])
    assert result.exit_code == 0, result.output
    assert f"wrote 1 rows to {tmp_path / 'band'} (rejected/, report.json)" in result.output
