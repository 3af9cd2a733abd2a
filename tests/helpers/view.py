"""A small recipe run to view, made by the real stages where they need no model.

traces (literal rows, as `distill generate` leaves them) -> verified (`distill filter`) -> pairs (`distill pairs`);
two evaluations scored by the eval stage's own score() over literal samples; a GRPO run's rollouts and report
as distill/rl/rollouts.py and train.py write them; tool-use trajectories; report.md with a plot. Its rows carry
the cases a person looks for: ten samples of one prompt the verifier calls wrong, a pair, problems the two
evaluations disagree on, and model text that reads like markup.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner

from reasonkit.store import StageWriter

from ..helpers.synthetic import trace, traces_table, write_traces

WRONG_PROMPT = "p-wrong"  # every one of its ten samples answers 5 to a gold 4
WRONG_SAMPLES = 10
K = 4
#: Model text that must stay text: each would run, load or navigate if the page read it as HTML.
PAYLOADS = (
    "</script><script>window.__xss = 1</script>",
    '<img src=x onerror="window.__xss = 2">',
    "[click me](javascript:window.__xss=3)",
    '<a href="javascript:window.__xss=4">link</a>',
    r"$\href{javascript:window.__xss=5}{math link}$",
    '<svg onload="window.__xss=6"></svg>',
    '<iframe src="https://example.com/"></iframe>',
    '<link rel=stylesheet href="https://example.com/x.css">',
)
BIG_LINE = 1_000_000  # characters on one line, no newline


def _run(command, args: list[str]) -> None:
    result = CliRunner().invoke(command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output


def trace_rows() -> list[dict]:
    rows = [
        trace(
            WRONG_PROMPT,
            s,
            problem="What is 2 + 2? (the prompt answered wrong)",
            reasoning=f"attempt {s}: 2 + 2 = 5",
            response=r"The answer is \boxed{5}.",
            answer="4",
        )
        for s in range(WRONG_SAMPLES)
    ]
    for i in range(30):
        rows.append(
            trace(
                f"p-ok-{i:02d}",
                0,
                problem=f"What is {i} + 1?",
                reasoning=f"{i} + 1 = {i + 1}, as $x^2$ is not needed",
                response=rf"So $\frac{{{i + 1}}}{{1}}$ and \boxed{{{i + 1}}}.",
                answer=str(i + 1),
            )
        )
    rows.append(trace("p-pair", 0, problem="What is 3 + 3?", reasoning="3 + 3 = 6", response=r"\boxed{6}", answer="6"))
    rows.append(
        trace(
            "p-pair",
            1,
            problem="What is 3 + 3?",
            reasoning="3 + 3 = 7, surely, after a long detour",
            response=r"\boxed{7}",
            answer="6",
        )
    )
    return rows


def make_run(root: Path) -> Path:
    """The run directory (``root/run``), as `distill run` leaves it, with report.md."""
    from reasonkit.filters.command import filter as filter_command
    from reasonkit.judges.command import pairs as pairs_command

    run = root / "run"
    write_traces(run / "traces", trace_rows(), shard_rows=16)
    _run(
        filter_command,
        [str(run / "traces"), "--out", str(run / "verified"), "--verifier", "int", "--workers", "1", "-q"],
    )
    _run(pairs_command, [str(run / "verified"), "--out", str(run / "pairs")])
    scores_a = {f"e{i:02d}": [j < (i % (K + 1)) for j in range(K)] for i in range(12)}
    scores_b = dict(scores_a, e00=[True, True, False, False], e04=[True, False, False, False])  # one win, one loss
    write_eval(run / "eval_base", scores_a)
    write_eval(run / "eval_tuned", scores_b)
    write_grpo(run / "grpo")
    write_trajectories(run / "agent_traces")
    state = {
        name: {"done": True, "stage": stage}
        for name, stage in (
            ("traces", "generate"),
            ("verified", "filter"),
            ("pairs", "pairs"),
            ("grpo", "train"),
            ("agent_traces", "generate"),
            ("eval_base", "eval"),
            ("eval_tuned", "eval"),
        )
    }
    (run / "_recipe_state.json").write_text(json.dumps(state))
    _plot(run / "funnel_verified.png")
    (run / "report.md").write_text(
        "# the test run\n\n## verified: filter funnel\n\n| step | reason | dropped |\n|---|---|---|\n"
        "| verify | wrong | 11 |\n\n![funnel](funnel_verified.png)\n"
    )
    return run


# long: a literal evaluation directory, file by file, as the eval stage writes it
def write_eval(path: Path, correct: dict[str, list[bool]]) -> Path:
    """An evaluation directory as the eval stage leaves it: generations/, samples/, problems.parquet, summary.json."""
    from reasonkit.distill.eval.run import write_problems
    from reasonkit.distill.eval.score import score

    gens = [
        trace(
            pid,
            j,
            problem=f"Problem {pid}: what is 6 x 7?",
            reasoning=f"sample {j} of {pid}",
            response=rf"\boxed{{{42 if c else 41}}}",
            answer="42",
        )
        for pid, samples in correct.items()
        for j, c in enumerate(samples)
    ]
    write_traces(path / "generations", gens)
    samples = pa.Table.from_pylist(
        [
            {
                "id": g["id"],
                "sample": g["sample"],
                "pred": "42" if c else "41",
                "correct": c,
                "completion_tokens": 5,
                "finish_reason": "stop",
                "verify_reason": None,
                "vote_group": 0,
            }
            for g, c in zip(gens, [c for s in correct.values() for c in s])
        ],
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
    w = StageWriter(path / "samples", stage="eval", kind="eval_samples", config={"k": K}, keys=("id", "sample"))
    w.commit(samples)
    w.finish()
    summary, problems = score(samples, traces_table(gens), k=K)
    summary["protocol"] = {
        "model": "m",
        "backend": "vllm",
        "k": K,
        "temperature": 0.6,
        "top_p": 0.95,
        "max_tokens": 64,
        "seed": 0,
        "gen_config": "0" * 16,
    }
    write_problems(problems, path / "problems.parquet")
    (path / "summary.json").write_text(json.dumps(summary, indent=2))
    return path


def write_grpo(path: Path, steps: int = 3, group: int = 4) -> Path:
    """A GRPO training run: report.json, train_config.json and rollouts/ (every completion with its rewards)."""
    rows = []
    for step in range(1, steps + 1):
        for p in range(2):
            for g in range(group):
                right = (g + step) % 2 == 0
                rows.append(
                    trace(
                        f"rl-{p}",
                        g,
                        problem=f"RL problem {p}",
                        reasoning=f"step {step} try {g}",
                        response=rf"\boxed{{{4 if right else 3}}}",
                        answer="4",
                        step=step,
                        reward=float(right) + 0.2,
                        reward_accuracy=float(right),
                        reward_format=1.0,
                        advantage=1.0 if right else -1.0,
                    )
                )
    table = pa.Table.from_pylist(rows)
    w = StageWriter(
        path / "rollouts", stage="grpo", kind="traces", config={"fingerprint": "x"}, keys=("step", "id", "sample")
    )
    w.commit(table)
    w.finish()
    (path / "train_config.json").write_text(json.dumps({"fingerprint": "x", "config": {"method": "grpo"}}))
    (path / "report.json").write_text(
        json.dumps(
            {
                "method": "grpo",
                "complete": True,
                "steps": steps,
                "loss_first": 0.1,
                "loss_final": 0.05,
                "grpo": {"reward_first": 0.7, "reward_final": 0.9},
            }
        )
    )
    return path


def write_trajectories(path: Path) -> Path:
    """A tool-use trajectories stage: the model calls search, reads the observation, answers."""
    from reasonkit.schema import validate

    messages = [
        {"role": "user", "content": "Who wrote the passage?", "tool_calls": None, "name": None},
        {
            "role": "assistant",
            "content": "<think>I should search.</think>",
            "name": None,
            "tool_calls": [{"name": "search", "arguments": json.dumps({"query": "passage author"})}],
        },
        {"role": "tool", "name": "search", "content": "[1] The passage was written by Ada.", "tool_calls": None},
        {
            "role": "assistant",
            "content": r"<think>The observation says Ada.</think>\boxed{Ada}",
            "tool_calls": None,
            "name": None,
        },
    ]
    row = {
        "id": "t-1",
        "sample": 0,
        "messages": messages,
        "response": r"\boxed{Ada}",
        "turns": 2,
        "tool_calls": 1,
        "tool_errors": 0,
        "finish_reason": "stop",
        "prompt_tokens": 9,
        "completion_tokens": 14,
        "teacher": "agent",
        "gen_config": "1" * 16,
        "answer": "Ada",
        "source": "test",
    }
    w = StageWriter(path, stage="generate", kind="trajectories", config={"tools": "search"}, keys=("id", "sample"))
    w.commit(validate(pa.Table.from_pylist([row]), "trajectories"))
    w.finish()
    return path


def write_hostile(path: Path) -> Path:
    """A traces stage whose text reads like markup, and a line of a million characters."""
    rows = [
        trace(
            f"x-{i}",
            0,
            problem=f"Repeat this: {p}",
            reasoning=f"thinking about {p}",
            response=f"Here it is: {p}",
            answer="4",
        )
        for i, p in enumerate(PAYLOADS)
    ]
    rows.append(
        trace(
            "x-big", 0, problem="Write a long line.", reasoning="ok", response="x" * (BIG_LINE - 1) + "!", answer="4"
        )
    )
    return write_traces(path, rows)


def _plot(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1), dpi=50)
    ax.barh([0, 1], [42, 31])
    fig.savefig(path)
    plt.close(fig)
