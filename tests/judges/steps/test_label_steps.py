"""`distill label-steps`: Math-Shepherd labels from the real embedded teacher's rollouts, on a task
solution whose third line holds a wrong number; the vLLM path on the session's shared engine; resume;
bad input."""

import dataclasses

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.judges.steps.config import LabelStepsConfig
from reasonkit.judges.steps.run import run_label_steps
from reasonkit.recipes.tasks.math import render, solution
from reasonkit.store import load_manifest, read_stage

from ...helpers.steps import corrupt, corrupted_stage, problems, reasoning_lines, traces_stage


def check_labels(out, p, text):
    """The labels and the Step-DPO pair a greedy teacher gives the solution whose line 3 is wrong."""
    row = read_stage(out).to_pylist()[0]
    good, bad = reasoning_lines(solution(p)), reasoning_lines(text)
    assert good[:2] == bad[:2] and good[2] != bad[2]
    assert (
        row["completions"][:5] == bad and row["completions"][5] == "</think>\nThe answer is \\boxed{%s}." % p["answer"]
    )
    # lines 1-2 can still be finished correctly; after the slip in line 3 the greedy teacher cannot
    assert row["labels"][:3] == [True, True, False], row["labels"]
    assert row["soft"][:3] == [1.0, 1.0, 0.0] and row["first_error"] == 2 and row["rollouts"] == 1
    assert row["correct"] is True  # lines 4-5 carry on from line 3's original numbers: the answer is right
    # the prompt string is what the model saw: the chat template's generation prompt and the opened <think>
    assert row["prompt"] == render(p, with_solution=False) + "<think>\n"
    (pair,) = read_stage(out / "step_dpo").to_pylist()
    assert pair["prompt"] == row["prompt"] + good[0] + "\n" + good[1] + "\n"  # exactly the first two lines
    assert pair["rejected"] == bad[2] + "\n"
    assert pair["chosen"] == good[2] + "\n"  # greedy from after line 2 writes the correct line 3
    assert pair["step"] == 2 and pair["strategy"] == "step-dpo"


def test_labels_and_pair_of_a_wrong_third_line_hf(tmp_path, teacher_dir):
    src, p, text = corrupted_stage(tmp_path / "traces")
    out = tmp_path / "steps"
    report = run_label_steps(
        LabelStepsConfig(input=src, out=str(out), policy=teacher_dir, backend="hf", temperature=0, n=3)
    )
    check_labels(out, p, text)
    assert report["solutions"] == 1 and report["pairs"] == 1 and report["rollouts_per_step"] == 1
    assert load_manifest(out)["kind"] == "steps" and load_manifest(out / "step_dpo")["kind"] == "prefs_text"


@pytest.mark.slow
def test_vllm_path_resume_and_rederived_pairs(tmp_path, teacher_dir, vllm_engine):
    from reasonkit.gen.vllm_backend import VllmBackend

    p = problems(1)[0]
    text = corrupt(solution(p), 3)
    src = traces_stage(tmp_path / "traces", [p, p], [text, text])  # two samples that slipped alike
    out = tmp_path / "steps"
    cfg = LabelStepsConfig(input=src, out=str(out), policy=teacher_dir, temperature=0, n=2, limit=1)
    backend = VllmBackend(llm=vllm_engine)
    first = run_label_steps(cfg, backend=backend)
    check_labels(out, p, text)
    assert first["this_run"]["solutions"] == 1
    # the second sample, by extending --limit: labelled alike, and its pair, the same, kept once
    both = run_label_steps(dataclasses.replace(cfg, limit=None), backend=backend)
    assert both["this_run"]["solutions"] == 1 and both["pairs"] == 1 and both["no_pair"] == {"duplicate_pair": 1}
    steps = read_stage(out).to_pylist()
    assert [r["sample"] for r in steps] == [0, 1] and steps[0]["labels"] == steps[1]["labels"]
    cfg = dataclasses.replace(cfg, limit=None)
    rows = read_stage(out).to_pylist()
    # a rerun labels nothing again; pairs lost after their steps shard was committed are re-derived
    import shutil

    shutil.rmtree(out / "step_dpo")
    again = run_label_steps(cfg, backend=backend)
    assert again["this_run"]["solutions"] == 0 and read_stage(out).to_pylist() == rows
    check_labels(out, p, text)


@pytest.mark.slow
def test_sampled_rollouts_soft_labels(tmp_path, teacher_dir, vllm_engine):
    """At temperature > 0 each prefix gets n rollouts; soft is their share reaching the answer."""
    from reasonkit.gen.vllm_backend import VllmBackend

    ps = problems(2)
    src = traces_stage(tmp_path / "traces", ps, [solution(q) for q in ps])
    out = tmp_path / "steps"
    run_label_steps(
        LabelStepsConfig(input=src, out=str(out), policy=teacher_dir, n=3, temperature=1.0, limit=1),
        backend=VllmBackend(llm=vllm_engine),
    )
    (row,) = read_stage(out).to_pylist()  # --limit 1
    assert row["rollouts"] == 3 and len(row["soft"]) == len(row["labels"]) == len(row["completions"])
    assert all(lab == (s > 0) for lab, s in zip(row["labels"], row["soft"]))
    assert all(round(s * 3) == pytest.approx(s * 3) for s in row["soft"])  # shares of 3 rollouts
    assert row["labels"][-1] is True  # the teacher's own correct answer


def _cli(args):
    result = CliRunner().invoke(cli, ["label-steps", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("case", ["no_gold", "empty", "n0"])
def test_bad_input_one_line_exit_2(tmp_path, teacher_dir, case):
    p = problems(1)
    text = {"empty": ""}.get(case, solution(p[0]))
    src = traces_stage(tmp_path / "traces", p, [text], answers=[None] if case == "no_gold" else None)
    out = tmp_path / "steps"
    code, output = _cli(
        [src, "--policy", teacher_dir, "--out", str(out), "--backend", "hf", *(["--n", "0"] if case == "n0" else [])]
    )
    assert code == 2, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    expected = {
        "no_gold": f"row 0 (id {p[0]['id']!r}, sample 0): no gold answer",
        "empty": "empty solution, no step to label",
        "n0": "label-steps.n: expected at least 1 rollout per step, found 0",
    }[case]
    assert expected in lines[0]
    assert not out.exists()  # nothing written


def test_cli_help():
    code, output = _cli(["--help"])
    assert code == 0 and "--policy" in output and "step_dpo" in output


def test_command_module_imports_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys, reasonkit.judges.steps.command, reasonkit.judges.steps.config; "
        "print(sorted(m for m in ('pyarrow', 'torch', 'vllm', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_wrong_only_labels_the_solutions_with_a_wrong_answer(tmp_path, teacher_dir, vllm_engine):
    from reasonkit.gen.vllm_backend import VllmBackend

    ps = problems(3)
    texts = [solution(q) for q in ps]
    texts[1] = texts[1].replace("\\boxed{%s}" % ps[1]["answer"], "\\boxed{%d}" % (int(ps[1]["answer"]) + 1))
    src = traces_stage(tmp_path / "traces", ps, texts)
    out = tmp_path / "steps"
    report = run_label_steps(
        LabelStepsConfig(input=src, out=str(out), policy=teacher_dir, temperature=0, wrong_only=True),
        backend=VllmBackend(llm=vllm_engine),
    )
    (row,) = read_stage(out).to_pylist()
    assert row["id"] == ps[1]["id"] and row["correct"] is False and report["rows_skipped"] == {"correct": 2}
    # every line is right, only the boxed answer is not: the first wrong step is the last one
    assert row["labels"] == [True] * (len(row["labels"]) - 1) + [False]
    (pair,) = read_stage(out / "step_dpo").to_pylist()
    assert (
        pair["rejected"] == row["completions"][-1] + "\n"
        and pair["chosen"] == "</think>\nThe answer is \\boxed{%s}.\n" % ps[1]["answer"]
    )


def test_reads_kept_rows_and_the_rejected_wrong_ones(tmp_path):
    """A filter output: its kept rows and rejected/ rows dropped as wrong are labelled; rows dropped for
    anything else (here: language) and rows that did not finish are not."""
    import pyarrow as pa

    from reasonkit.judges.steps.run import read_solutions
    from reasonkit.store import StageWriter

    ps = problems(4)
    kept = traces_stage(tmp_path / "verified", ps[:1], [solution(ps[0])])
    texts = [solution(q) for q in ps[1:]]
    dropped = read_stage(traces_stage(tmp_path / "x", ps[1:], texts)).to_pylist()
    for row, (reason, finish) in zip(dropped, [("wrong", "stop"), ("language", "stop"), ("wrong", "length")]):
        row.update(drop_reason=reason, finish_reason=finish)
    writer = StageWriter(
        tmp_path / "verified" / "rejected", stage="filter", kind=None, config={}, keys=("id", "sample")
    )
    writer.commit(pa.Table.from_pylist(dropped))
    writer.finish()
    cfg = LabelStepsConfig(input=kept, out=str(tmp_path / "o"), policy="m", separator="\n")
    solutions, skipped = read_solutions(cfg)
    assert [s.id for s in solutions] == [ps[0]["id"], ps[1]["id"]] and skipped == {"truncated": 1}
    assert len(solutions[0].steps) == 6 and solutions[0].in_think  # 5 lines, then </think> with the answer
    only_kept, _ = read_solutions(dataclasses.replace(cfg, include_wrong=False))
    assert [s.id for s in only_kept] == [ps[0]["id"]]
    blank_lines, _ = read_solutions(dataclasses.replace(cfg, separator="\n\n"))  # one step: no blank line in it
    assert len(blank_lines[0].steps) == 1
