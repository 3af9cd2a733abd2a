"""Issue 27 item 6: context overflow is reported, never a negative budget.

A tool-use turn that cannot fit the context ends its trajectory with finish reason ``context``;
eval counts such samples (and prompts the backend refused for their length) as
``context_overflow``, apart from ``no_answer``, with the problems' ids; ``distill eval`` refuses
before generating when a first prompt alone cannot fit, unless ``--allow-overflow``.
"""

import json

import pyarrow as pa
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.distill.eval.report import counts_text, markdown_table
from reasonkit.distill.eval.score import score
from reasonkit.gen.backend import Completion, Request
from reasonkit.gen.tools.base import ToolBox
from reasonkit.gen.tools.loop import rollouts
from reasonkit.recipes.tasks.math import write_prompts


def lookup(text: str) -> str:
    """Return a long passage about the text.

    Args:
        text: what to look up.
    """
    return "passage " * 40


class GrowingContext:
    """A backend with a 100-token context: each turn's prompt is 30 tokens per message so far; a
    prompt that leaves no room is refused (finish "error", as vLLM's and transformers' backends do)."""

    max_model_len = 100

    def generate(self, requests):
        for r in filter(None, requests):
            prompt = 30 * len(r.messages)
            if prompt >= self.max_model_len:
                yield Completion(r.id, 0, "", "error", prompt, 0)
                continue
            call = '<tool_call>\n{"name": "lookup", "arguments": {"text": "x"}}\n</tool_call>'
            yield Completion(r.id, 0, call, "stop", prompt, 10)


def test_a_turn_that_cannot_fit_ends_the_trajectory_with_finish_reason_context():
    [t] = rollouts(
        GrowingContext(), [Request("q", [{"role": "user", "content": "?"}])], ToolBox([lookup]), max_turns=8
    )
    # turn 1: 30 tokens, turn 2: 90 tokens (user, call, observation), turn 3: 150 >= 100: cannot fit
    assert (t.finish_reason, t.turns, t.tool_calls, t.response) == ("context", 3, 2, "")


def test_a_refusal_without_a_known_context_stays_an_error():
    backend = GrowingContext()
    [t] = rollouts(
        backend, [Request("q", [{"role": "user", "content": "?"}])], ToolBox([lookup]), max_turns=8, max_model_len=0
    )
    assert t.finish_reason == "error"


def _samples(rows):
    names = ["id", "sample", "pred", "correct", "completion_tokens", "finish_reason", "verify_reason", "vote_group"]
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})


def test_context_overflow_is_counted_apart_from_no_answer_with_the_problem_ids():
    samples = _samples(
        [
            ("p1", 0, "7", True, 10, "stop", None, 0),
            ("p1", 1, None, None, 0, "context", None, None),
            ("p2", 0, None, None, 64, "length", "truncated", None),
            ("p2", 1, None, None, 12, "stop", "no_answer", None),
            ("p3", 0, None, None, 0, "context", None, None),
            ("p3", 1, None, None, 0, "context", None, None),
        ]
    )
    summary, problems = score(samples, None, k=2)
    assert summary["counts"] == {
        "correct": 1,
        "wrong": 0,
        "unverifiable": 0,
        "context_overflow": 3,
        "no_answer": 2,
        "truncated": 1,
    }
    assert summary["context_overflow"] == {"problems": 2, "samples": 3, "ids": ["p1", "p3"]}
    assert summary["context_overflow_rate"] == 0.5 and summary["no_answer_rate"] == 2 / 6
    assert [p["context_overflow"] for p in problems] == [1, 0, 2]
    text = counts_text(summary)
    assert "2 without an answer" in text and "Context overflow: 3 samples of 2 problems" in text and "p1, p3" in text
    table = markdown_table([("run", summary)])
    assert "| context overflow |" in table and "| 0.500 |" in table and "share of samples (0 to 1)" in table


def test_eval_refuses_a_first_prompt_that_cannot_fit_then_counts_it_with_allow_overflow(teacher_dir, tmp_path):
    data = tmp_path / "q.parquet"
    write_prompts(data, 3, seed=3, variant="aime", split="test")
    out = tmp_path / "out"
    args = [
        "eval",
        "--model",
        teacher_dir,
        "--data",
        str(data),
        "--out",
        str(out),
        "--backend",
        "hf",
        "--k",
        "1",
        "--max-tokens",
        "8",
        "--max-model-len",
        "20",
        "--verifier",
        "int",
        "--dtype",
        "float32",
    ]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2, refused.output
    assert "the first prompt of 3 of 3 problems does not fit max_model_len 20 tokens" in refused.output
    assert "--allow-overflow" in refused.output and "Traceback" not in refused.output
    assert not out.exists()  # refused before anything was written or generated
    ran = CliRunner().invoke(cli, args + ["--allow-overflow"])
    assert ran.exit_code == 0, ran.output
    assert "context overflow: 3 samples of 3 problems could not fit max_model_len" in ran.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["context_overflow"] == 3 and summary["counts"]["no_answer"] == 0
    assert summary["context_overflow"]["problems"] == 3 and len(summary["context_overflow"]["ids"]) == 3
    assert "Context overflow: 3 samples of 3 problems" in (out / "summary.md").read_text()


def test_recipe_report_states_each_figure_with_its_unit(tmp_path):
    """Item 7: "truncated share 46" was a count of 46 samples read as a share."""
    from reasonkit.recipes.report import eval_section, generate_section

    gen = tmp_path / "trajectories"
    gen.mkdir()
    (gen / "_manifest.json").write_text(
        json.dumps({"rows": 600, "tokens": 49200, "summary": {"truncated": 46}, "last_run": {"tokens_per_s": 864.0}})
    )
    text = generate_section("trajectories", gen)
    assert "600 samples, 49,200 completion tokens, 864.0 tokens/s, 46 of 600 samples truncated (7.7%)" in text
    assert "share 46" not in text
    samples = _samples([("p1", 0, None, None, 0, "context", None, None), ("p1", 1, "7", True, 9, "stop", None, 0)])
    summary, _ = score(samples, None, k=2)
    summary.update(
        protocol={"temperature": 0.6, "top_p": 0.95, "k": 2, "max_tokens": 64, "backend": "vllm"}, tools={"rows": 2}
    )
    text = eval_section([("eval_student", summary)], tmp_path)
    assert "max tokens 64 tokens per turn" in text and "k=2 samples per problem" in text
    assert (
        "- eval_student: context overflow in 1 of 2 samples (1 of 1 problems: p1), counted apart from no answer"
        in text
    )
