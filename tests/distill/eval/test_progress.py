"""`distill eval` with stderr in a file: its generation prints the generate stage's plain progress lines (prompts of
the total, samples, tokens/s, time left), and its verification a line as it starts and one with the samples found
correct as it ends (issue 36, item 4). The backend is scripted: the lines are under test, not a model."""

import re

from reasonkit.distill.eval.run import EvalConfig, run_eval
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.ticker import EVERY_ENV

from ...helpers.gen_tools import ScriptedBackend


def multiply(messages, request):
    """The product, right for problems whose first factor is even, off by one for the others."""
    a, b = map(int, re.search(r"What is (\d+) \* (\d+)\?", messages[0]["content"]).groups())
    return f"<think>{a} * {b}</think> \\boxed{{{a * b + a % 2}}}", "stop"


def test_eval_prints_generation_and_verification_progress(tmp_path, teacher_dir, monkeypatch, capsys):
    monkeypatch.setenv(EVERY_ENV, "0")
    data = write_prompts(tmp_path / "problems.parquet", 6, seed=0, split="test")
    summary = run_eval(
        EvalConfig(model=teacher_dir, data=data, out=str(tmp_path / "ev"), k=1, max_tokens=16, verifier="int"),
        backend=ScriptedBackend(multiply),
    )
    err = capsys.readouterr().err.splitlines()
    gen = [line for line in err if line.startswith("[generate]")]
    assert gen[0] == "[generate] 0/6 prompts (0%), starting"
    assert any(line.startswith("[generate] 3/6 prompts (50%), ") and " tok/s, ~" in line for line in gen)
    assert gen[-1].startswith("[generate] done: 6/6 prompts (100%), ")
    verify = [line for line in err if line.startswith("[verify]")]
    correct = summary["counts"]["correct"]
    assert 0 < correct < 6, "some factors are odd, some even"
    assert verify[0] == "[verify] 0/6 samples (0%), starting"
    assert verify[1].startswith("[verify] done: 6/6 samples (100%), ") and f", {correct} correct, in " in verify[1]
