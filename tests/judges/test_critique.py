"""distill critique with a fake backend: seeded principles, CAI columns, rounds, failures, bad constitutions."""

import pyarrow as pa
import pytest

from reasonkit.errors import UserError
from reasonkit.gen.backend import Completion
from reasonkit.judges.config import CritiqueConfig
from reasonkit.judges.constitution import load_constitution
from reasonkit.judges.critique import run_critique
from reasonkit.store import StageWriter, read_stage


class FakeModel:
    """Critiques and revises by rule: the reply depends only on the conversation so far."""

    name = "fake"

    def __init__(self, fail_revisions=False):
        self.fail_revisions, self.calls = fail_revisions, 0

    def generate(self, requests):
        for r in requests:
            self.calls += 1
            last = r.messages[-1]["content"]
            if last.startswith(("Rewrite", "REV")):
                if self.fail_revisions:
                    yield Completion(r.id, 0, "", "error", 0, 0)
                    continue
                previous = r.messages[-4]["content"]
                yield Completion(r.id, 0, f"{previous} [revised]", "stop", 50, 5)
            else:
                yield Completion(r.id, 0, "<think>let me look</think>The second step is wrong.", "stop", 40, 4)

    def describe(self):
        return {}

    def close(self):
        pass


def traces(path, n=12):
    rows = [
        {
            "id": f"p{i}",
            "sample": 0,
            "messages": [{"role": "user", "content": f"What is {i} * 3?"}],
            "completion": f"<think>{i} * 3 = {3 * i}</think>{3 * i}",
            "reasoning": f"{i} * 3 = {3 * i}",
            "response": str(3 * i),
            "finish_reason": "stop",
            "prompt_tokens": 3,
            "completion_tokens": 9,
            "teacher": "t",
            "gen_config": "g",
            "source": "demo",
        }
        for i in range(n)
    ]
    rows.append({**rows[0], "id": "cut", "finish_reason": "length"})
    w = StageWriter(path, stage="generate", kind="traces", config={}, keys=("id", "sample"))
    w.commit(pa.Table.from_pylist(rows))
    w.finish()
    return str(path)


def cfg(tmp_path, src, out="o", **kw):
    return CritiqueConfig(judge="fake", input=src, out=str(tmp_path / out), **kw)


def test_critique_writes_cai_record_prefs_and_sft(tmp_path):
    src = traces(tmp_path / "t")
    report = run_critique(cfg(tmp_path, src), backend=FakeModel())
    record = {r["id"]: r for r in read_stage(tmp_path / "o" / "record").to_pylist()}
    r = record["p2"]
    assert r["init_prompt"] == "What is 2 * 3?" and r["init_response"] == "<think>\n2 * 3 = 6\n</think>\n\n6"
    assert r["critic_response"] == "The second step is wrong."  # read after </think>
    assert r["revision_response"] == r["init_response"] + " [revised]" and r["reason"] is None
    principles = {p["name"]: p for p in load_constitution(None).as_dict()["principles"]}
    assert r["critic_prompt"] == principles[r["principle"]]["critique_request"]
    assert r["revision_prompt"] == principles[r["principle"]]["revision_request"]
    assert len({x["principle"] for x in record.values()}) > 1  # drawn per row, not one for all
    prefs = read_stage(tmp_path / "o", kind="prefs").to_pylist()
    assert len(prefs) == 12 and prefs[0]["chosen"][0]["content"].endswith("[revised]")
    assert prefs[0]["rejected"][0]["content"] == record[prefs[0]["id"]]["init_response"]
    sft = read_stage(tmp_path / "o" / "sft", kind="sft").to_pylist()
    assert sft[0]["messages"][-1]["role"] == "assistant" and sft[0]["messages"][0]["role"] == "user"
    assert report["rows_skipped"] == {"truncated": 1} and report["tokens"]["completion_tokens"] == 12 * 9
    assert sum(report["principles"].values()) == 12


def test_principles_are_seeded_and_rounds_chain(tmp_path):
    src = traces(tmp_path / "t")
    picks = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        run_critique(cfg(tmp_path, src, out=name, seed=seed), backend=FakeModel())
        picks[name] = {r["id"]: r["principle"] for r in read_stage(tmp_path / name / "record").to_pylist()}
    assert picks["a"] == picks["b"] and picks["a"] != picks["c"]
    run_critique(cfg(tmp_path, src, out="r2", rounds=2), backend=FakeModel())
    r = read_stage(tmp_path / "r2" / "record").to_pylist()[0]
    assert len(r["rounds"]) == 2 and r["revision_response"].endswith("[revised] [revised]")
    assert r["rounds"][0]["revision_response"] == r["init_response"] + " [revised]"


def test_failed_revisions_are_recorded_not_trained_on(tmp_path):
    src = traces(tmp_path / "t", n=3)
    model = FakeModel(fail_revisions=True)
    report = run_critique(cfg(tmp_path, src), backend=model)
    assert report["prefs"] == report["sft"] == 0 and report["rows_recorded"] == 3
    assert report["failed"] == {"round N revision: judge request failed (finish_reason=error)": 3}
    assert (
        run_critique(cfg(tmp_path, src), backend=model)["rows_recorded"] == 3 and model.calls == 6
    )  # resumed: no calls


BAD = {
    "missing.yaml": None,
    "no_revision.yaml": "principles:\n  - name: short\n    critique_request: Is it long?\n",
    "typo.yaml": "principles:\n  - name: short\n    critique_request: a\n    revison_request: b\n",
    "broken.yaml": "principles: [unclosed\n",
    "empty.yaml": "name: x\n",
}


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing.yaml", r"missing.yaml: no such file"),
        ("no_revision.yaml", r"no_revision.yaml: principles\[0\] \(short\): missing revision_request"),
        (
            "typo.yaml",
            r"typo.yaml: principles\[0\] \(short\): revison_request: unknown key; did you mean revision_request\?",
        ),
        ("broken.yaml", r"broken.yaml: line \d+ invalid YAML"),
        ("empty.yaml", r"empty.yaml: principles: expected a non-empty list"),
    ],
)
def test_bad_constitution_names_file_and_key(tmp_path, name, message):
    if BAD[name] is not None:
        (tmp_path / name).write_text(BAD[name])
    src = traces(tmp_path / "t", n=1)
    with pytest.raises(UserError, match=message):
        run_critique(cfg(tmp_path, src, constitution=str(tmp_path / name)), backend=FakeModel())
    assert not (tmp_path / "o").exists()  # fails before anything is written


def test_prefs_input_is_refused(tmp_path):
    src = traces(tmp_path / "t", n=2)
    run_critique(cfg(tmp_path, src, out="first"), backend=FakeModel())
    with pytest.raises(UserError, match="a prefs stage; critique revises single responses"):
        run_critique(cfg(tmp_path, str(tmp_path / "first")), backend=FakeModel())
