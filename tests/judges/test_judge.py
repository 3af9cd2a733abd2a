"""distill judge with a deterministic fake backend: parsing paths, position swap, margins, resume."""

import json
import re

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.errors import UserError
from reasonkit.gen.backend import Completion
from reasonkit.judges.config import JudgeConfig
from reasonkit.judges.judge import run_judge
from reasonkit.store import StageWriter, read_stage


class FakeJudge:
    """Answers each request with ``reply(prompt_text)``; counts calls. Any order is fine."""

    name = "fake-judge"

    def __init__(self, reply, finish="stop", fail_after=None):
        self.reply, self.finish, self.fail_after, self.calls = reply, finish, fail_after, 0

    def generate(self, requests):
        for r in reversed(list(requests)):  # out of order on purpose
            if self.fail_after is not None and self.calls >= self.fail_after:
                raise RuntimeError("judge server went away")
            self.calls += 1
            yield Completion(r.id, 0, self.reply(r.messages[-1]["content"]), self.finish, 100, 7)

    def describe(self):
        return {"backend": "fake"}

    def close(self):
        pass


def traces(path, answers: dict[str, list[str]]):
    rows = [
        {
            "id": pid,
            "sample": i,
            "messages": [{"role": "user", "content": f"What is {pid}?"}],
            "completion": text,
            "reasoning": None,
            "response": text,
            "finish_reason": "stop",
            "prompt_tokens": 3,
            "completion_tokens": len(text),
            "teacher": "t",
            "gen_config": "g",
            "answer": "6",
            "source": "demo",
        }
        for pid, texts in answers.items()
        for i, text in enumerate(texts)
    ]
    w = StageWriter(path, stage="generate", kind="traces", config={}, keys=("id", "sample"))
    w.commit(pa.Table.from_pylist(rows))
    w.finish()
    return str(path)


def answer_in(prompt, tag="answer"):
    return re.search(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.S).group(1)


SCORES = {
    "great": "Clear and right.\nScore: 9",
    "fine": '{"rationale": "ok", "score": 6}',
    "poor": "Rating: [[2]]",
    "junk": "12 * 34 = 408",
    "broken": '{"score": "high", ',
    "eleven": "Score: 11",
    "twice": "Score: 3\nScore: 8",
}


def cfg(tmp_path, src, **kw):
    return JudgeConfig(judge="fake", input=src, out=str(tmp_path / kw.pop("out", "o")), **kw)


def test_pointwise_scores_margins_and_reasons(tmp_path):
    src = traces(
        tmp_path / "t",
        {
            "p1": ["great", "fine", "poor"],
            "p2": ["fine", "junk", "broken"],
            "p3": ["eleven", "twice"],
            "p4": ["fine", "great"],
        },
    )
    fake = FakeJudge(lambda p: SCORES[answer_in(p)])
    report = run_judge(cfg(tmp_path, src, min_margin=3.5), backend=fake)
    prefs = read_stage(tmp_path / "o", kind="prefs").to_pylist()
    assert [
        (p["id"], p["chosen"][0]["content"], p["rejected"][0]["content"], p["chosen_score"], p["rejected_score"])
        for p in prefs
    ] == [("p1", "great", "poor", 9.0, 2.0)]
    assert report["no_pair"] == {"fewer_than_two_scored": 2, "margin_below_min": 1}
    record = {(r["id"], r["sample"]): r for r in read_stage(tmp_path / "o" / "record").to_pylist()}
    assert record[("p1", 0)]["rationale"] == "Clear and right." and record[("p2", 0)]["rationale"] == "ok"
    assert record[("p2", 1)]["score"] is None and record[("p2", 1)]["reason"] == "no score found"
    assert record[("p2", 2)]["reason"].startswith("malformed JSON")
    assert record[("p3", 0)]["reason"] == "score 11 outside 1-10"
    assert record[("p3", 1)]["reason"] == "conflicting scores: 3, 8"
    assert report["tokens"] == {"prompt_tokens": 1000, "completion_tokens": 70} and fake.calls == 10
    seen = []
    run_judge(cfg(tmp_path, src, out="o2"), backend=FakeJudge(lambda p: seen.append(p) or "Score: 5"))
    first = next(p for p in seen if "What is p1?" in p)
    assert "<reference_answer>\n6\n</reference_answer>" in first and "- Correct:" in first


def test_pairwise_position_swap_disagreement_is_a_tie_and_dropped(tmp_path):
    src = traces(tmp_path / "t", {"p1": ["good one", "bad one"], "p2": ["good two", "bad two"]})

    def fair(prompt):  # prefers the answer that says "good", wherever it stands
        return "Verdict: A" if "good" in answer_in(prompt, "answer_a") else "B is better.\nVerdict: B"

    report = run_judge(cfg(tmp_path, src, mode="pairwise"), backend=FakeJudge(fair))
    prefs = read_stage(tmp_path / "o", kind="prefs").to_pylist()
    assert sorted((p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in prefs) == [
        ("good one", "bad one"),
        ("good two", "bad two"),
    ]
    assert {p["strategy"] for p in prefs} == {"judge-pairwise"} and report["pairs"] == 2

    biased = FakeJudge(lambda p: "Verdict: A")  # always the first position: the two orders disagree
    report = run_judge(cfg(tmp_path, src, mode="pairwise", out="b"), backend=biased)
    assert read_stage(tmp_path / "b").num_rows == 0 and biased.calls == 4
    assert report["no_pair"] == {"position disagreement": 2}
    record = read_stage(tmp_path / "b" / "record").to_pylist()
    assert {(r["verdict_ab"], r["verdict_ba"], r["winner"]) for r in record} == {("A", "A", None)}

    report = run_judge(cfg(tmp_path, src, mode="pairwise", out="t2"), backend=FakeJudge(lambda p: "[[C]]"))
    assert report["pairs"] == 0 and report["no_pair"] == {"tie": 2}
    report = run_judge(cfg(tmp_path, src, mode="pairwise", out="g"), backend=FakeJudge(lambda p: "I cannot decide"))
    assert report["no_pair"] == {"unparseable": 2}


def test_pairwise_rejudges_a_prefs_input(tmp_path):
    src = traces(tmp_path / "t", {"p1": ["good", "bad"]})
    run_judge(
        cfg(tmp_path, src, mode="pairwise", out="first"),
        backend=FakeJudge(lambda p: "Verdict: A" if answer_in(p, "answer_a") == "bad" else "Verdict: B"),
    )
    first = read_stage(tmp_path / "first").to_pylist()
    assert first[0]["chosen"][0]["content"] == "bad"
    report = run_judge(
        cfg(tmp_path, str(tmp_path / "first"), mode="pairwise", out="second"),
        backend=FakeJudge(lambda p: "Verdict: A" if answer_in(p, "answer_a") == "good" else "Verdict: B"),
    )
    second = read_stage(tmp_path / "second").to_pylist()
    assert report["pairs"] == 1 and second[0]["chosen"][0]["content"] == "good"


def test_a_judge_that_always_fails_gives_none_with_reason_and_a_complete_dir(tmp_path):
    src = traces(tmp_path / "t", {"p1": ["a", "b"]})
    report = run_judge(cfg(tmp_path, src), backend=FakeJudge(lambda p: "", finish="error"))
    assert report["pairs"] == 0 and report["no_value"] == {"judge request failed (finish_reason=error)": 2}
    manifest = json.loads((tmp_path / "o" / "_manifest.json").read_text())
    assert manifest["complete"] and manifest["kind"] == "prefs"


def test_crash_then_resume_asks_each_prompt_once(tmp_path):
    src = traces(tmp_path / "t", {f"p{i}": ["great", "poor"] for i in range(6)})
    c = cfg(tmp_path, src, shard_size=2)
    with pytest.raises(RuntimeError):
        run_judge(c, backend=FakeJudge(lambda p: SCORES[answer_in(p)], fail_after=5))
    assert read_stage(tmp_path / "o", allow_incomplete=True).num_rows == 2
    second = FakeJudge(lambda p: SCORES[answer_in(p)])
    report = run_judge(c, backend=second)
    assert second.calls == 8 and report["pairs"] == 6
    assert sorted(read_stage(tmp_path / "o").column("id").to_pylist()) == [f"p{i}" for i in range(6)]


def test_bad_input(tmp_path):
    src = traces(tmp_path / "t", {"p1": ["a", "b"]})
    with pytest.raises(UserError, match=r"--rubric .*nope.txt: no such file"):
        run_judge(cfg(tmp_path, src, rubric=str(tmp_path / "nope.txt")), backend=FakeJudge(str))
    with pytest.raises(UserError, match="no such directory"):
        run_judge(cfg(tmp_path, str(tmp_path / "missing")), backend=FakeJudge(str))
    w = StageWriter(tmp_path / "ids", stage="x", kind=None, config={}, keys=("id",))
    w.commit(pa.table({"id": ["a"], "messages": [[{"role": "user", "content": "q"}]], "text": ["t"]}))
    w.finish()
    with pytest.raises(UserError, match="no row ends in an assistant turn"):
        run_judge(cfg(tmp_path, str(tmp_path / "ids")), backend=FakeJudge(str))


def test_cli_help_and_errors(tmp_path):
    from reasonkit.judges.command import critique, judge

    for command in (judge, critique):
        assert CliRunner().invoke(command, ["--help"]).exit_code == 0
    src = traces(tmp_path / "t", {"p1": ["a", "b"]})
    result = CliRunner().invoke(
        judge, [src, "--out", str(tmp_path / "o"), "--judge", str(tmp_path / "no-model"), "--backend", "hf"]
    )
    assert result.exit_code == 2 and "--judge" in result.output and "no such model directory" in result.output
    result = CliRunner().invoke(judge, [src, "--out", str(tmp_path / "o"), "--judge", "m", "--min-margin", "-1"])
    assert result.exit_code == 2 and "min_margin" in result.output


def test_a_crash_between_record_and_prefs_is_rederived_on_resume(tmp_path, monkeypatch):
    src = traces(tmp_path / "t", {f"p{i}": ["great", "poor"] for i in range(4)})
    c = cfg(tmp_path, src, shard_size=2)
    real_commit = StageWriter.commit
    seen = {"prefs": 0}

    def dying_commit(self, table):
        if self.stage == "judge":
            seen["prefs"] += 1
            if seen["prefs"] == 2:  # the record of chunk 2 is committed, its prefs never are
                raise KeyboardInterrupt
        return real_commit(self, table)

    monkeypatch.setattr(StageWriter, "commit", dying_commit)
    with pytest.raises(KeyboardInterrupt):
        run_judge(c, backend=FakeJudge(lambda p: SCORES[answer_in(p)]))
    monkeypatch.setattr(StageWriter, "commit", real_commit)
    assert read_stage(tmp_path / "o" / "record", allow_incomplete=True).num_rows == 8
    assert read_stage(tmp_path / "o", allow_incomplete=True).num_rows == 2
    again = FakeJudge(lambda p: SCORES[answer_in(p)])
    report = run_judge(c, backend=again)
    assert again.calls == 0 and report["pairs"] == 4
    assert sorted(read_stage(tmp_path / "o").column("id").to_pylist()) == ["p0", "p1", "p2", "p3"]


def test_a_judge_retrained_at_the_same_path_cannot_extend_the_record(tmp_path):
    """The judge is fingerprinted by its weights, not its path: a rerun into the same --out after the
    judge directory's weights changed is refused (it would mix two judges' verdicts)."""
    judge = tmp_path / "judge"
    judge.mkdir()
    (judge / "config.json").write_text("{}")
    (judge / "model.safetensors").write_bytes(b"first weights")
    src = traces(tmp_path / "t", {"p1": ["great", "poor"]})
    config = JudgeConfig(judge=str(judge), input=src, out=str(tmp_path / "o"))
    run_judge(config, backend=FakeJudge(lambda p: SCORES[answer_in(p)]))
    assert run_judge(config, backend=FakeJudge(lambda p: SCORES[answer_in(p)]))["pairs"] == 1, "same judge: resumes"
    (judge / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(UserError, match="--overwrite"):
        run_judge(config, backend=FakeJudge(lambda p: SCORES[answer_in(p)]))
