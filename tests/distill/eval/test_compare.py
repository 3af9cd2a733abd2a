"""distill eval compare A B: the paired difference in pass@1 over the same problems.

The eval directories are written the way the eval stage writes them (eval_score.score on a samples
table, distill/eval/run.py's write_problems, summary.json with a protocol as eval_protocol records it); no model.
"""

import json
import math
import random

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.distill.eval.compare import paired_difference, paired_text
from reasonkit.distill.eval.metrics import ci95_positions, paired_bootstrap, sign_test
from reasonkit.distill.eval.run import write_problems
from reasonkit.distill.eval.score import score
from reasonkit.errors import UserError

K = 4
# the fields a real quickstart eval records (eval_protocol.protocol), trimmed to those compare reads and a few more
PROTOCOL = {
    "model": "qs/sft/model",
    "adapter": None,
    "backend": "vllm",
    "dtype": "float32",
    "k": K,
    "temperature": 0.6,
    "top_p": 0.95,
    "max_tokens": 192,
    "seed": 0,
    "verifier": "int",
    "verifier_version": "int fast path",
    "score_truncated": False,
    "system": None,
    "prefill_think": False,
    "instruction": "Please reason step by step, and put your final answer within \\boxed{}.",
    "data": "qs/eval_problems",
    "dataset_fingerprint": "c61adee66935b402",
    "dataset_revision": None,
    "limit": None,
    "hardware": {"gpu": "cpu", "gpu_count": 0},
    "data_parallel": 1,
}


def write_eval(path, correct: dict[str, list[bool | None]], **protocol) -> str:
    """An eval directory as run_eval leaves it: problems.parquet and summary.json from score()."""
    rows = [
        {
            "id": pid,
            "sample": j,
            "pred": None if c is None else ("391" if c else "7"),
            "correct": c,
            "completion_tokens": 10,
            "finish_reason": "stop",
            "verify_reason": None,
            "vote_group": 0,
        }
        for pid, samples in correct.items()
        for j, c in enumerate(samples)
    ]
    samples = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("id", pa.string()),
                ("sample", pa.int32()),
                ("pred", pa.string()),
                ("correct", pa.bool_()),
                ("completion_tokens", pa.int32()),
                ("finish_reason", pa.string()),
                ("verify_reason", pa.string()),
                ("vote_group", pa.int32()),
            ]
        ),
    )
    summary, problems = score(samples, None, k=K)
    summary["protocol"] = {**PROTOCOL, **protocol}
    path.mkdir(parents=True)
    write_problems(problems, path / "problems.parquet")
    (path / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return str(path)


def problems(scores: list[int]) -> dict[str, list[bool]]:
    """``scores[i]`` correct samples out of K for problem i."""
    return {f"p{i:03d}": [j < c for j in range(K)] for i, c in enumerate(scores)}


BASE = [4, 0, 2, 4, 1, 0, 3, 4, 0, 2] * 6  # 60 problems of every difficulty


def test_identical_runs_differ_by_zero(tmp_path):
    a = write_eval(tmp_path / "a", problems(BASE))
    b = write_eval(tmp_path / "b", problems(BASE), model="another/model")
    r = paired_difference(a, b)
    assert (r["diff"], r["lo"], r["hi"]) == (0.0, 0.0, 0.0)
    assert (r["wins"], r["losses"], r["ties"], r["n_problems"], r["rounds"]) == (0, 0, 60, 60, 10_000)
    assert r["verdict"] == "no difference shown" and r["sign_test_p"] == 1.0


def test_b_better_on_half_the_problems_is_shown_only_because_it_is_paired(tmp_path):
    # B gets one more sample right on 30 of the 42 problems A has not solved: B better on 30 of 60
    gains = [i for i, c in enumerate(BASE) if c < K][:30]
    b_scores = [c + 1 if i in gains else c for i, c in enumerate(BASE)]
    a, b = write_eval(tmp_path / "a", problems(BASE)), write_eval(tmp_path / "b", problems(b_scores))
    r = paired_difference(a, b)
    assert (r["wins"], r["losses"], r["ties"]) == (30, 0, 30)
    assert r["diff"] == pytest.approx(30 * 0.25 / 60)
    assert 0 < r["lo"] < r["diff"] < r["hi"] and r["verdict"] == "B better"
    assert r["sign_test_p"] == pytest.approx(2 / 2**30)
    # each run's own (unpaired) interval overlaps the other's: the problems' spread in difficulty
    # hides the gain until the same problems are compared with each other
    ci_a = json.loads((tmp_path / "a" / "summary.json").read_text())["pass@1_ci95"]
    ci_b = json.loads((tmp_path / "b" / "summary.json").read_text())["pass@1_ci95"]
    assert ci_b[0] < ci_a[1]
    assert "b - a: +0.125 pass@1 (95% CI +0.0" in paired_text(r) and "): b better\n" in paired_text(r)
    worse = paired_difference(b, a)
    assert worse["verdict"] == "A better" and worse["hi"] < 0 and (worse["wins"], worse["losses"]) == (0, 30)


def test_paired_bootstrap_matches_a_plain_loop_over_both_runs():
    rnd = random.Random(7)
    a = [rnd.randrange(K + 1) / K for _ in range(60)]
    b = [min(1.0, x + rnd.choice([-0.25, 0, 0, 0.25, 0.5])) for x in a]
    rounds, seed = 3000, 11
    diff, lo, hi = paired_bootstrap(a, b, rounds=rounds, seed=seed)
    # independently: the literal description, the same indices resampled for run A and for run B
    indices = np.random.default_rng(seed).integers(0, 60, size=(rounds, 60)).tolist()
    boots = sorted(sum(b[i] for i in idx) / 60 - sum(a[i] for i in idx) / 60 for idx in indices)
    assert diff == pytest.approx(sum(b) / 60 - sum(a) / 60)
    assert (lo, hi) == pytest.approx((boots[ci95_positions(rounds)[0]], boots[ci95_positions(rounds)[1]]), abs=1e-12)
    # and the normal approximation of the mean difference agrees to Monte Carlo precision
    d = [y - x for x, y in zip(a, b)]
    se = math.sqrt(sum((v - diff) ** 2 for v in d) / 59 / 60)
    assert lo == pytest.approx(diff - 1.96 * se, abs=0.012) and hi == pytest.approx(diff + 1.96 * se, abs=0.012)
    assert paired_bootstrap(a, b, rounds=rounds, seed=seed) == (diff, lo, hi)  # seeded


def test_sign_test_against_the_binomial_by_hand():
    # 7 wins, 2 losses: P(X <= 2) for X ~ Bin(9, 1/2) is (1 + 9 + 36) / 512, two-sided doubles it
    assert sign_test(7, 2) == pytest.approx(2 * 46 / 512)
    assert sign_test(2, 7) == sign_test(7, 2)


def run_cli(*args):
    return CliRunner().invoke(cli, ["eval", "compare", *map(str, args)])


def test_other_problem_ids_are_refused_in_one_line_naming_them(tmp_path):
    a = write_eval(tmp_path / "a", problems(BASE))
    shifted = {("q" + pid[1:] if pid == "p007" else pid): s for pid, s in problems(BASE).items()}
    b = write_eval(tmp_path / "b", shifted)
    result = run_cli(a, b, "--out", tmp_path / "cmp.md")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: compare a and b: not the same problems (1: p007 only in a, 1: q007 only in b); a paired difference "
        "needs the same problem ids (--no-paired for the table alone)"
    ]
    assert not (tmp_path / "cmp.md").exists() and not (tmp_path / "cmp.png").exists()
    fewer = write_eval(tmp_path / "fewer", problems(BASE[:50]))
    with pytest.raises(UserError, match=r"\(10: p050, p051, p052, \.\.\. only in a, none only in fewer\)"):
        paired_difference(a, fewer)


def test_other_protocols_are_refused_naming_what_differs(tmp_path):
    a = write_eval(tmp_path / "a", problems(BASE))
    b = write_eval(tmp_path / "b", problems(BASE), temperature=1.0, dataset_fingerprint="0123456789abcdef")
    result = run_cli(a, b, "--out", tmp_path / "cmp.md")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert (
        "different protocols (dataset_fingerprint 'c61adee66935b402' vs '0123456789abcdef'; temperature 0.6 vs 1.0)"
        in result.output
    )
    assert not (tmp_path / "cmp.md").exists()
    for key, value in (
        ("k", 8),
        ("top_p", 1.0),
        ("max_tokens", 32768),
        ("verifier", "math"),
        ("score_truncated", True),
    ):
        other = write_eval(tmp_path / key, problems(BASE), **{key: value})
        with pytest.raises(UserError, match=f"different protocols \\({key} "):
            paired_difference(a, other)
    # the table alone still lays them side by side
    assert run_cli(a, b, "--out", tmp_path / "cmp.md", "--no-paired").exit_code == 0
    assert "Paired difference" not in (tmp_path / "cmp.md").read_text()


def test_cli_compares_each_later_run_with_the_first(tmp_path):
    sft = write_eval(tmp_path / "sft", problems(BASE))
    grpo = write_eval(tmp_path / "grpo", problems([c if c == K else c + 1 for c in BASE]))
    dpo = write_eval(tmp_path / "dpo", problems(BASE))
    out = tmp_path / "report" / "cmp.md"
    result = run_cli(sft, grpo, dpo, "--out", out, "--rounds", 2000, "--seed", 3)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    expected = paired_text(paired_difference(sft, grpo, rounds=2000, seed=3))
    line = expected.splitlines()[0]
    assert line.startswith("grpo - sft: +0.175 pass@1 (95% CI +0.1") and line.endswith("2,000 rounds): grpo better")
    assert all(f"- {x}" in text and f"- {x}" in result.output for x in expected.splitlines())
    assert "- grpo wins on 42, loses on 0, ties on 18 problems; sign test p = 4.55e-13" in text
    assert (
        "- dpo - sft: +0.000 pass@1 (95% CI +0.000 .. +0.000, paired bootstrap over 60 problems, 2,000 rounds): "
        "no difference shown" in text
    )
    assert (tmp_path / "report" / "cmp.png").is_file()
