"""distill pairs on crafted verdict tables: strategies, ties, determinism, report, TRL format."""

import json

import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest
from click.testing import CliRunner

from reasonkit.errors import UserError
from reasonkit.judges.config import PairsConfig
from reasonkit.judges.pairs import run_pairs
from reasonkit.store import StageWriter, read_stage


def row(pid, sample, reasoning, correct, *, keep=None, drop=None, finish="stop", tokens=None, response="ok"):
    keep = bool(correct) if keep is None else keep
    if not keep and drop is None:
        drop = "wrong" if correct is False else "unverifiable"
    return {
        "id": pid,
        "sample": sample,
        "messages": [{"role": "user", "content": f"Problem {pid}"}],
        "completion": f"<think>{reasoning}</think>{response}",
        "reasoning": reasoning,
        "response": response,
        "finish_reason": finish,
        "prompt_tokens": 5,
        "completion_tokens": tokens if tokens is not None else len(reasoning),
        "teacher": "t",
        "gen_config": "g",
        "answer": "6",
        "source": "demo",
        "pred": None,
        "correct": correct,
        "lang_ratio": 1.0,
        "keep": keep,
        "drop_reason": None if keep else drop,
    }


def write_filter_output(path, rows):
    """A `distill filter`-shaped directory: kept rows at the top, dropped rows in rejected/."""
    kept, dropped = [r for r in rows if r["keep"]], [r for r in rows if not r["keep"]]
    for where, part in ((path, kept), (path / "rejected", dropped)):
        w = StageWriter(
            where,
            stage="filter" if where == path else "filter-rejected",
            kind="verdicts",
            config={"v": 1},
            keys=("id", "sample"),
        )
        if part:
            w.commit(pa.Table.from_pylist(part))
        w.finish()
    return path


ROWS = [
    # p1: two correct (short, long), two wrong (long, short)
    row("p1", 0, "a" * 30, True),
    row("p1", 1, "b" * 10, True),
    row("p1", 2, "c" * 50, False),
    row("p1", 3, "d" * 20, False),
    row("p2", 0, "x" * 10, True),
    row("p2", 1, "y" * 12, True),  # all correct
    row("p3", 0, "w" * 10, False),  # all wrong
    row("p4", 0, "u" * 10, None),  # unverifiable
    row("p5", 0, "same", True),
    row("p5", 1, "same", True),  # identical correct texts
    row("p6", 0, "e" * 10, True),
    row("p6", 1, "f" * 10, True),  # equal lengths
    row("p7", 0, "g" * 10, True),
    row("p7", 1, "h" * 90, False, finish="length"),  # truncated wrong: skipped
    row("p8", 0, "i" * 10, True, keep=False, drop="contaminated:aime24"),
    row("p8", 1, "j" * 20, False),
    row("p9", 0, "k" * 10, True, keep=False, drop="language"),
    row("p9", 1, "l" * 40, False),
    # p10: the shorter correct sample lost rejection sampling (not_selected) but may still be chosen
    row("p10", 0, "m" * 30, True),
    row("p10", 1, "n" * 5, True, keep=False, drop="not_selected"),
    row("p10", 2, "o" * 8, False),
]


@pytest.fixture()
def verdicts(tmp_path):
    return write_filter_output(tmp_path / "verified", ROWS)


def pairs_of(out):
    t = read_stage(out, kind="prefs")
    return {(r["id"], r["pair"]): (r["chosen_sample"], r["rejected_sample"]) for r in t.to_pylist()}, t


def test_correct_vs_incorrect_reads_rejected_and_reports_why_not(verdicts, tmp_path):
    report = run_pairs(PairsConfig(verdicts=str(verdicts), out=str(tmp_path / "o")))
    got, table = pairs_of(tmp_path / "o")
    assert got == {("p1", 0): (1, 2), ("p10", 0): (1, 2)}  # shortest correct vs longest wrong
    assert report["no_pair"] == {
        "excluded:contaminated": 1,
        "no_choosable_correct": 1,
        "no_correct": 1,
        "no_incorrect": 4,
        "unverifiable": 1,
    }
    assert (
        report["prompts_in"] == 10
        and report["prompts_without_pair"] == 8
        and report["rows_skipped"] == {"truncated": 1}
    )
    r = table.filter(pa.compute.equal(table["id"], "p1")).to_pylist()[0]
    assert r["chosen"] == [{"role": "assistant", "content": "<think>\n" + "b" * 10 + "\n</think>\n\nok"}]
    assert r["prompt"] == [{"role": "user", "content": "Problem p1"}]
    assert (r["chosen_score"], r["rejected_score"], r["strategy"], r["source"]) == (
        1.0,
        0.0,
        "correct-vs-incorrect",
        "demo",
    )
    assert json.loads((tmp_path / "o" / "report.json").read_text())["pairs"] == 2


def test_short_vs_long_never_pairs_ties_or_identical_texts(verdicts, tmp_path):
    report = run_pairs(
        PairsConfig(verdicts=str(verdicts), out=str(tmp_path / "o"), strategy="short-vs-long", max_pairs_per_prompt=3)
    )
    got, _ = pairs_of(tmp_path / "o")
    assert got == {("p1", 0): (1, 0), ("p2", 0): (0, 1), ("p10", 0): (1, 0)}
    assert report["no_pair"]["identical"] == 1 and report["no_pair"]["equal_lengths"] == 1
    assert report["no_pair"]["fewer_than_two_correct"] >= 3


def test_k_pairs_and_random_picks_are_deterministic_per_seed(tmp_path):
    rows = [row("q", i, "r" * (10 + i), i < 4) for i in range(10)]
    src = write_filter_output(tmp_path / "v", rows)
    runs = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        run_pairs(
            PairsConfig(
                verdicts=str(src),
                out=str(tmp_path / name),
                chosen="random",
                rejected="random",
                max_pairs_per_prompt=5,
                seed=seed,
            )
        )
        runs[name] = pairs_of(tmp_path / name)[0]
    assert runs["a"] == runs["b"] and len(runs["a"]) == 5
    assert runs["a"] != runs["c"]
    assert len(set(runs["a"].values())) == 5  # no pair twice
    assert all(c < 4 <= r for c, r in runs["a"].values())


def test_rerun_resumes_and_output_is_trl_preference_format(verdicts, tmp_path):
    cfg = PairsConfig(verdicts=str(verdicts), out=str(tmp_path / "o"), max_pairs_per_prompt=2)
    first = run_pairs(cfg)
    again = run_pairs(cfg)
    assert again["resumed_pairs"] == first["pairs"] == 4 and read_stage(tmp_path / "o").num_rows == 4
    from datasets import Dataset
    from trl.data_utils import is_conversational

    example = Dataset(read_stage(tmp_path / "o"))[0]
    assert is_conversational(example) and {"prompt", "chosen", "rejected"} <= set(example)
    with pytest.raises(UserError, match="different config"):
        run_pairs(PairsConfig(verdicts=str(verdicts), out=str(tmp_path / "o"), max_pairs_per_prompt=1))


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="no such directory"):
        run_pairs(PairsConfig(verdicts=str(tmp_path / "missing"), out=str(tmp_path / "o")))
    traces = StageWriter(tmp_path / "traces", stage="generate", kind="traces", config={}, keys=("id", "sample"))
    plain = {
        k: v
        for k, v in row("p", 0, "r", True).items()
        if k not in ("pred", "correct", "lang_ratio", "keep", "drop_reason")
    }
    traces.commit(pa.Table.from_pylist([plain]))
    traces.finish()
    with pytest.raises(UserError, match=r"missing column 'correct' \(pairs needs verdicts from `distill filter`\)"):
        run_pairs(PairsConfig(verdicts=str(tmp_path / "traces"), out=str(tmp_path / "o")))


def test_cli(verdicts, tmp_path):
    from reasonkit.judges.command import pairs

    result = CliRunner().invoke(pairs, [str(verdicts), "--out", str(tmp_path / "o"), "--strategy", "short-vs-long"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pairs"] == 3
    bad = CliRunner().invoke(pairs, [str(tmp_path / "nope"), "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2 and "no such directory" in bad.output


def test_pairs_on_a_real_filter_output(tmp_path):
    """Tiny-task traces through `distill filter` (kept + rejected/), then both strategies."""
    from reasonkit.filters.config import FilterConfig
    from reasonkit.filters.run import run_filter
    from reasonkit.recipes.tasks.math import make_problems, solution
    from reasonkit.think import split

    rows = []
    for p in make_problems(4, seed=0, variant="aime"):
        good, a = solution(p), p["answer"]
        long = good.replace("</think>", "Let me check again: " + good.split("\n")[1] + "\n</think>")
        bad = good.replace("{" + a + "}", "{" + str(int(a) + 1) + "}")
        for s, text in enumerate((long, good, bad)):
            reasoning, response = split(text)
            rows.append(
                {
                    "id": p["id"],
                    "sample": s,
                    "messages": [{"role": "user", "content": p["problem"]}],
                    "completion": text,
                    "reasoning": reasoning,
                    "response": response,
                    "finish_reason": "stop",
                    "prompt_tokens": 5,
                    "completion_tokens": len(text) // 3,
                    "teacher": "t",
                    "gen_config": "g",
                    "answer": a,
                    "source": "tiny",
                }
            )
    w = StageWriter(tmp_path / "traces", stage="generate", kind="traces", config={}, keys=("id", "sample"))
    w.commit(pa.Table.from_pylist(rows))
    w.finish()
    run_filter(
        FilterConfig(
            traces=str(tmp_path / "traces"),
            out=str(tmp_path / "verified"),
            verifier="int",
            lang=None,
            keep_per_prompt=1,
            select="shortest",
            workers=1,
        )
    )
    for strategy, expected in (("correct-vs-incorrect", (1, 2)), ("short-vs-long", (1, 0))):
        report = run_pairs(
            PairsConfig(verdicts=str(tmp_path / "verified"), out=str(tmp_path / strategy), strategy=strategy)
        )
        got, _ = pairs_of(tmp_path / strategy)
        assert report["prompts_paired"] == 4 and set(got.values()) == {expected}, (strategy, report)
