"""`distill eval --tools`: each sample a tool-use trajectory, scored on its final answer exactly as `distill filter`
scores it, with the tools' figures (calls and turns per trajectory, tool-error rate) in summary.json and the tool
settings in the protocol, so an eval with tools never pairs with one without.

The backend is scripted (the loop's logic and the scoring are under test here; the real models run the same loop in
tests/gen/tools/test_loop_real.py); the search tool is the real BM25 over the agent task's corpus."""

import re

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.distill.eval.run import EvalConfig, run_eval
from reasonkit.errors import UserError
from reasonkit.gen.backend import Completion
from reasonkit.recipes.tasks import agent as agent_task

from ...helpers.gen_tools import ScriptedBackend, call_text

YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")


def two_hop(messages, request):
    """Search the book, then the author and prize, then answer the year the second observation shows."""
    question = messages[0]["content"]
    book, prize = re.search(r"author of (.+?) win the (.+?)\?", question).groups()
    tools = [m for m in messages if m["role"] == "tool"]
    if not tools:
        return call_text("search", query=book), "stop"
    if len(tools) == 1:
        author = re.search(r"by ([A-Z][a-z]+ [A-Z][a-z]+)", tools[0]["content"])
        return call_text("search", query=f"{author.group(1) if author else book} {prize}"), "stop"
    year = YEAR.search(tools[-1]["content"])
    return (f"\\boxed{{{year.group(1)}}}" if year else "I could not find it."), "stop"


class PlainBackend(ScriptedBackend):
    """The script without the loop: ``n`` single replies a request, as generate asks a backend without tools."""

    def _answer(self, held):
        for r in held:
            for i in range(r.n):
                text, finish = self.script(list(r.messages), r)
                yield Completion(r.id, i, text, finish, 10 * len(r.messages), self.tokens)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    d = tmp_path_factory.mktemp("agent")
    return {
        "corpus": agent_task.write_corpus(d / "corpus.jsonl"),
        "prompts": agent_task.write_prompts(d / "questions.parquet", 8, split="test"),
    }


def config(task, out, teacher_dir, **kw):
    settings = dict(
        model=teacher_dir,
        data=task["prompts"],
        out=str(out),
        k=2,
        max_tokens=64,
        tools="search",
        corpus=task["corpus"],
        max_turns=4,
        verifier="math",
        instruction=None,
    )
    settings.update(kw)
    return EvalConfig(**settings)


def test_scores_the_final_answer_as_the_filter_does_and_reports_the_tools(task, tmp_path, teacher_dir):
    from reasonkit.filters.config import FilterConfig
    from reasonkit.filters.run import run_filter
    from reasonkit.store import read_stage

    summary = run_eval(config(task, tmp_path / "ev", teacher_dir), backend=ScriptedBackend(two_hop))
    t = summary["tools"]
    assert t["rows"] == 16 and t["tool_calls_per_trajectory"] == 2.0 and t["turns_per_trajectory"] == 3.0
    assert t["tool_error_rate"] == 0.0 and t["finish_reason"] == {"stop": 16}
    assert summary["protocol"]["tools"]["tools"] == "search" and summary["protocol"]["tools"]["max_turns"] == 4
    assert summary["protocol"]["tools"]["corpus_fingerprint"]

    samples = read_stage(tmp_path / "ev" / "samples").to_pylist()
    run_filter(
        FilterConfig(
            traces=str(tmp_path / "ev" / "generations"),
            out=str(tmp_path / "filtered"),
            verifier="math",
            lang=None,
            dedup="none",
        )
    )
    kept = {(r["id"], r["sample"]) for r in read_stage(tmp_path / "filtered").to_pylist()}
    assert {(s["id"], s["sample"]) for s in samples if s["correct"]} == kept, "eval and filter read one answer"
    assert 0 < summary["pass@1"] <= 1, "the two-hop script finds some years"


def test_tool_errors_are_counted(task, tmp_path, teacher_dir):
    def wrong_tool_first(messages, request):
        if len(messages) == 1:
            return call_text("lookup", query="x"), "stop"
        if len(messages) == 3:
            return two_hop(messages[:1], request)
        return two_hop([messages[0], *messages[3:]], request)

    summary = run_eval(config(task, tmp_path / "ev", teacher_dir), backend=ScriptedBackend(wrong_tool_first))
    t = summary["tools"]
    assert t["tool_calls_per_trajectory"] == 3.0 and t["tool_error_rate"] == pytest.approx(1 / 3, abs=1e-3)


def test_an_eval_without_tools_does_not_pair_with_one_with_them(task, tmp_path, teacher_dir):
    run_eval(config(task, tmp_path / "with", teacher_dir), backend=ScriptedBackend(two_hop))
    plain = run_eval(
        config(task, tmp_path / "without", teacher_dir, tools=None, corpus=None), backend=PlainBackend(two_hop)
    )
    assert "tools" not in plain and "tools" not in plain["protocol"]
    assert plain["pass@1"] == 0.0, "without the tool the script never sees a year"
    result = CliRunner().invoke(
        cli, ["eval", "compare", str(tmp_path / "without"), str(tmp_path / "with"), "--out", str(tmp_path / "c.md")]
    )
    assert result.exit_code == 2 and "different protocols" in result.output and "tools" in result.output


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"corpus": None}, "--tools search needs --corpus"),
        ({"tools": "search,browser"}, "unknown tool 'browser'"),
        ({"max_turns": 0}, "max_turns: expected at least 1, found 0"),
    ],
)
def test_bad_tool_settings_are_one_line_and_write_nothing(task, tmp_path, teacher_dir, kw, message):
    with pytest.raises(UserError, match=re.escape(message)):
        run_eval(config(task, tmp_path / "ev", teacher_dir, **kw), backend=ScriptedBackend(two_hop))
    assert not (tmp_path / "ev").exists()
