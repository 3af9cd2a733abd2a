"""The filter stage end to end: outputs, funnel, resume after a crash, and bad input."""

import json

import pyarrow as pa
import pytest

from reasonkit.errors import UserError
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.store import MANIFEST, StageWriter, read_stage

from ..helpers.synthetic import trace, write_traces

AIME = "Find the number of ordered pairs (m, n) of positive integers such that m^2 n = 20^20."
MIXED = "Let me compute. 然后我们计算这两个数的乘积并检查结果是否正确。"


def rows():
    return [
        trace("p1", 0, reasoning="2 + 2 = 4, checked twice.", tokens=30),
        trace("p1", 1, reasoning="two plus two is four.", tokens=20),  # shorter: selected first
        trace("p1", 2, reasoning="2 + 2 = 4, checked twice.", tokens=30),  # duplicate of sample 0
        trace("p2", 0, response=r"\boxed{5}"),  # wrong
        trace("p2", 1, response="no idea", finish_reason="length"),  # truncated
        trace("p3", 0, response="I cannot tell.", source="other"),  # no answer
        trace("p4", 0, reasoning=MIXED, source="other"),  # language
        trace("p5", 0, problem=AIME, answer="4"),  # contaminated
    ]


def config(tmp_path, **kw):
    (tmp_path / "aime24.jsonl").write_text(json.dumps({"problem": AIME}) + "\n")
    base = dict(
        traces=str(tmp_path / "traces"),
        out=str(tmp_path / "out"),
        verifier="int",
        workers=1,
        keep_per_prompt=1,
        decontam=(str(tmp_path / "aime24.jsonl"),),
        batch_rows=3,
    )
    return FilterConfig(**{**base, **kw})


def test_end_to_end(tmp_path):
    write_traces(tmp_path / "traces", rows(), shard_rows=4)
    report = run_filter(config(tmp_path))
    out = tmp_path / "out"
    kept, rejected, sft = (
        read_stage(out, kind="verdicts"),
        read_stage(out / "rejected", kind="verdicts"),
        read_stage(out / "sft", kind="sft"),
    )
    assert list(zip(kept.column("id").to_pylist(), kept.column("sample").to_pylist())) == [("p1", 1)]
    assert kept.column("correct").to_pylist() == [True] and kept.column("lang_ratio").to_pylist() == [1.0]
    why = {(i, s): r for i, s, r in zip(*(rejected.column(c).to_pylist() for c in ("id", "sample", "drop_reason")))}
    assert why == {
        ("p1", 0): "not_selected",
        ("p1", 2): "duplicate",
        ("p2", 0): "wrong",
        ("p2", 1): "truncated",
        ("p3", 0): "no_answer",
        ("p4", 0): "language",
        ("p5", 0): "contaminated:aime24",
    }
    assert not any(rejected.column("keep").to_pylist())
    assert sft.column("messages").to_pylist() == [
        [
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "<think>\ntwo plus two is four.\n</think>\n\nThe answer is \\boxed{4}."},
        ]
    ]
    # The funnel adds up, in filter order, with every reason of every enabled filter.
    assert report["rows_in"] == 8 and report["rows_out"] == 1 == report["sft_rows"]
    dropped = [(s["reason"], s["dropped"]) for s in report["funnel"] if s["dropped"]]
    assert dropped == [
        ("truncated", 1),
        ("contaminated:aime24", 1),
        ("no_answer", 1),
        ("wrong", 1),
        ("language", 1),
        ("duplicate", 1),
        ("not_selected", 1),
    ]
    assert report["funnel"][-1]["remaining"] == 1
    assert report["per_source"] == {"other": {"in": 2, "out": 0}, "test": {"in": 6, "out": 1}}
    assert report["contamination"] == {"aime24": 1} and report["unverifiable"] == {}
    assert json.loads((out / "report.json").read_text())["funnel"] == report["funnel"]
    for d in (out, out / "rejected", out / "sft"):
        assert json.loads((d / MANIFEST).read_text())["complete"]
    assert not (out / ".work").exists()
    assert run_filter(config(tmp_path))["rows_out"] == 1  # a finished stage is not redone


def _outputs(out):
    def keyed(path):
        t = read_stage(path)
        return sorted(
            zip(
                t.column("id").to_pylist(),
                t.column("sample").to_pylist(),
                t.column("drop_reason").to_pylist() if "drop_reason" in t.column_names else [None] * t.num_rows,
            )
        )

    return (
        keyed(out),
        keyed(out / "rejected"),
        keyed(out / "sft"),
        json.loads((out / "report.json").read_text())["funnel"],
    )


@pytest.mark.parametrize("where", ["pass1", "pass3"])
def test_resume_after_a_crash_writes_what_a_clean_run_writes(tmp_path, monkeypatch, where):
    many = [
        trace(f"q{i}", s, response=rf"\boxed{{{4 + (i + s) % 3}}}", reasoning=f"step {i} {s}")
        for i in range(12)
        for s in range(3)
    ]
    write_traces(tmp_path / "traces", many, shard_rows=10)
    clean = config(tmp_path, out=str(tmp_path / "clean"))
    run_filter(clean)
    commits = {"n": 0}
    real_commit = StageWriter.commit

    def crashing_commit(self, table):
        is_target = (where == "pass1" and self.stage == "filter-work") or (
            where == "pass3" and self.dir.name == "rejected"
        )
        if is_target:
            commits["n"] += 1
            if commits["n"] == 3:
                raise KeyboardInterrupt("killed")
        return real_commit(self, table)

    monkeypatch.setattr(StageWriter, "commit", crashing_commit)
    with pytest.raises(KeyboardInterrupt):
        run_filter(config(tmp_path))
    assert not json.loads((tmp_path / "out" / MANIFEST).read_text())["complete"]
    assert not (tmp_path / "out" / "report.json").exists()
    monkeypatch.setattr(StageWriter, "commit", real_commit)
    run_filter(config(tmp_path))
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "clean")


def test_bad_input_is_one_clear_error_and_writes_nothing(tmp_path):
    def fails(match, **kw):
        with pytest.raises(UserError, match=match):
            run_filter(config(tmp_path, **kw))
        assert not (tmp_path / "out").exists()

    fails("no such traces directory")
    (tmp_path / "file.parquet").write_text("x")
    fails("found a file", traces=str(tmp_path / "file.parquet"))
    (tmp_path / "empty").mkdir()
    fails("not a stage directory", traces=str(tmp_path / "empty"))
    write_traces(tmp_path / "traces", rows(), complete=False)
    fails("incomplete .* pass --allow-incomplete")
    w = StageWriter(tmp_path / "prompts", stage="prompts", kind="prompts", config={}, keys=("id",))
    w.commit(pa.table({"id": ["a"], "messages": [[{"role": "user", "content": "hi"}]]}))
    w.finish()
    fails("holds a 'prompts' table", traces=str(tmp_path / "prompts"))
    w = StageWriter(tmp_path / "nocol", stage="generate", kind=None, config={}, keys=("id", "sample"))
    w.commit(pa.table({"id": ["a"], "sample": [0]}))
    w.manifest["kind"] = "traces"
    w.finish()
    fails("part-00000.parquet: missing required column 'messages'", traces=str(tmp_path / "nocol"))
    (tmp_path / "bench.jsonl").write_text(json.dumps({"question": "x"}) + "\n")
    fails("no 'problem' column", allow_incomplete=True, decontam=(str(tmp_path / "bench.jsonl"),))
    fails("unknown language code 'xx'", allow_incomplete=True, lang="xx")
    assert run_filter(config(tmp_path, allow_incomplete=True))["rows_in"] == 8


def test_another_config_needs_overwrite(tmp_path):
    write_traces(tmp_path / "traces", rows())
    run_filter(config(tmp_path))
    with pytest.raises(UserError, match="different config fingerprint"):
        run_filter(config(tmp_path, keep_per_prompt=2))
    report = run_filter(config(tmp_path, keep_per_prompt=2, overwrite=True))
    assert report["rows_out"] == 2  # p1: samples 0 and 1 (sample 2 duplicates sample 0)
    assert run_filter(config(tmp_path, keep_per_prompt=2, workers=2, batch_rows=7))["rows_out"] == 2  # run-only knobs


def test_latex_answers_through_math_verify_and_minhash(tmp_path):
    traces = [
        trace("f", 0, response=r"So $\boxed{\frac{2}{4}}$.", answer=r"\frac{1}{2}"),
        trace("f", 1, response=r"So $\boxed{0.5}$.", answer=r"\frac{1}{2}", reasoning="a different route to one half"),
        trace("g", 0, response=r"\boxed{[1, 2]}", answer="(1, 2]"),
        trace("h", 0, response=r"\boxed{9^{9^{9}}}", answer="5"),
    ]
    write_traces(tmp_path / "traces", traces)
    report = run_filter(
        config(tmp_path, verifier="math", verify_timeout=1.0, dedup="minhash", keep_per_prompt=None, decontam=())
    )
    assert report["rows_out"] == 2
    assert report["verified"] == {"correct": 2, "unverifiable": 1, "wrong": 1}
    assert report["unverifiable"] == {"timeout": 1}
