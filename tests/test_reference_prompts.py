"""Prompts whose `messages` end with an assistant turn (a reference solution, as open-r1/OpenR1-Math-220k
stores them): the teacher must never see that turn, and the SFT rows built downstream carry exactly one
assistant turn, the teacher's."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.gen.backend import Completion
from reasonkit.gen.run import GenerateConfig, generate
from reasonkit.readers import ColumnMap, _without_reference_turns, prompt_notes, read_prompts
from reasonkit.store import read_stage

PROBLEMS = [("What is 12 * 34?", "408"), ("What is 99 * 10?", "990"), ("What is 7 * 8?", "56")]
SOLUTION = "REFERENCE-SOLUTION: multiply the tens, then the units; the total is {}."


def openr1_table(problems=PROBLEMS, messages=None) -> pa.Table:
    """Columns and types exactly as open-r1/OpenR1-Math-220k's `default` split stores them
    (its `messages` struct lists `content` before `role`)."""
    solutions = [SOLUTION.format(a) for _, a in problems]
    r1 = [f"<think>\n{s}\n</think>\n\n\\boxed{{{a}}}" for s, (_, a) in zip(solutions, problems)]
    if messages is None:
        messages = [
            [{"content": p, "role": "user"}, {"content": g, "role": "assistant"}] for (p, _), g in zip(problems, r1)
        ]
    n = len(problems)
    turn = pa.struct([("content", pa.string()), ("role", pa.string())])
    return pa.table(
        {
            "problem": pa.array([p for p, _ in problems], pa.string()),
            "solution": pa.array(solutions, pa.string()),
            "answer": pa.array([a for _, a in problems], pa.string()),
            "problem_type": pa.array(["Algebra"] * n, pa.string()),
            "question_type": pa.array(["math-word-problem"] * n, pa.string()),
            "source": pa.array(["olympiads"] * n, pa.string()),
            "uuid": pa.array([f"uuid-{i}" for i in range(n)], pa.string()),
            "is_reasoning_complete": pa.array([[True, True]] * n, pa.list_(pa.bool_())),
            "generations": pa.array([[g, g] for g in r1], pa.list_(pa.string())),
            "correctness_math_verify": pa.array([[True, False]] * n, pa.list_(pa.bool_())),
            "correctness_llama": pa.array([None] * n, pa.list_(pa.bool_())),
            "finish_reasons": pa.array([None] * n, pa.list_(pa.string())),
            "correctness_count": pa.array([1] * n, pa.int64()),
            "messages": pa.array(messages, pa.list_(turn)),
        }
    )


def test_reference_turn_is_dropped_and_said_once(tmp_path, capsys):
    path = tmp_path / "prompts.parquet"
    pq.write_table(openr1_table(), path)
    t = read_prompts(path)
    assert t.column("messages").to_pylist() == [[{"role": "user", "content": p}] for p, _ in PROBLEMS]
    err = capsys.readouterr().err
    line = (
        f"{path}: 'messages' end with an assistant turn in 3 rows (a reference solution); "
        "prompting with the turns before it"
    )
    assert err.count("end with an assistant turn") == 1 and line in err
    assert prompt_notes(t) == {"reference_turns_dropped": 3}
    assert t.column("solution").to_pylist()[0] == SOLUTION.format("408")  # extra columns still pass through


def test_multi_turn_keeps_everything_before_the_last_assistant_turn(tmp_path):
    convo = [
        {"content": "Be brief.", "role": "system"},
        {"content": "1+1?", "role": "user"},
        {"content": "2", "role": "assistant"},
        {"content": "And 2+2?", "role": "user"},
        {"content": "4", "role": "assistant"},
    ]
    path = tmp_path / "p.parquet"
    pq.write_table(openr1_table(PROBLEMS[:1], messages=[convo]).drop_columns(["problem"]), path)
    t = read_prompts(path)
    assert t.column("messages").to_pylist() == [[{"role": m["role"], "content": m["content"]} for m in convo[:4]]]


def test_a_prompt_that_ends_with_a_user_turn_is_untouched_and_nothing_is_said(tmp_path, capsys):
    msgs = [[{"content": p, "role": "user"}] for p, _ in PROBLEMS]
    path = tmp_path / "p.parquet"
    pq.write_table(openr1_table(messages=msgs), path)
    t = read_prompts(path)
    assert t.column("messages").to_pylist() == [[{"role": "user", "content": p}] for p, _ in PROBLEMS]
    assert "assistant" not in capsys.readouterr().err and prompt_notes(t) == {}


def test_assistant_turn_alone_uses_the_problem_column(tmp_path):
    only = [[{"content": "the answer is 408", "role": "assistant"}]]
    path = tmp_path / "p.parquet"
    pq.write_table(openr1_table(PROBLEMS[:1], messages=only), path)
    assert read_prompts(path).column("messages").to_pylist() == [[{"role": "user", "content": PROBLEMS[0][0]}]]


def test_assistant_turn_alone_without_a_problem_is_one_line_naming_file_and_row(tmp_path):
    msgs = [
        [{"content": "1+1?", "role": "user"}, {"content": "2", "role": "assistant"}],
        [{"content": "the answer is 408", "role": "assistant"}],
    ]
    path = tmp_path / "p.parquet"
    pq.write_table(openr1_table(PROBLEMS[:2], messages=msgs).drop_columns(["problem"]), path)
    with pytest.raises(UserError) as e:
        read_prompts(path)
    message = str(e.value)
    assert message.startswith(f"{path}: row 1: ") and "no user turn" in message and "\n" not in message


class RecordingTeacher:
    """A backend that renders each request with a real chat template (what a local model would see),
    keeps the text, and answers correctly in R1's layout."""

    name = "recording"

    def __init__(self, tokenizer, answers):
        self.tokenizer, self.answers, self.rendered = tokenizer, answers, []

    def describe(self):
        return {"backend": "recording"}

    def close(self):
        pass

    def generate(self, requests):
        from reasonkit.gen.render import prompt_text

        for r in requests:
            self.rendered.append(prompt_text(self.tokenizer, r.messages, prefill=r.prefill))
            for k in range(r.n):
                text = f"<think>\nI multiply.\n</think>\n\nThe answer is \\boxed{{{self.answers[r.id]}}}."
                yield Completion(r.id, k, text, "stop", 10, 12)


def test_openr1_prompts_through_generate_and_filter(tmp_path, teacher_dir):
    from transformers import AutoTokenizer

    path = tmp_path / "prompts.parquet"
    pq.write_table(openr1_table(), path)
    teacher = RecordingTeacher(
        AutoTokenizer.from_pretrained(teacher_dir), {f"uuid-{i}": a for i, (_, a) in enumerate(PROBLEMS)}
    )
    cfg = GenerateConfig(
        prompts=str(path),
        teacher="recording",
        out=str(tmp_path / "traces"),
        n=1,
        shard_size=2,
        columns=ColumnMap(id="uuid"),
    )
    manifest = generate(cfg, backend=teacher)
    assert manifest["prompt_notes"] == {"reference_turns_dropped": 3}, "the trim is recorded with the traces"
    assert len(teacher.rendered) == 3
    for text, (problem, answer) in zip(teacher.rendered, PROBLEMS):
        assert problem in text and SOLUTION.format(answer) not in text and "REFERENCE-SOLUTION" not in text
    report = run_filter(FilterConfig(traces=cfg.out, out=str(tmp_path / "filtered"), lang="none", workers=1))
    assert report["rows_in"] == report["rows_out"] == 3
    sft = read_stage(tmp_path / "filtered" / "sft").to_pylist()
    assert len(sft) == 3
    for row in sft:
        roles = [m["role"] for m in row["messages"]]
        assert roles == ["user", "assistant"]
        assert "REFERENCE-SOLUTION" not in str(row["messages"])


def test_arrow_trim_matches_the_plain_rule_across_chunks_slices_and_nulls(tmp_path, capsys):
    u, a, s = ({"role": r, "content": r[0] + str(i)} for i, r in enumerate(("user", "assistant", "system")))
    rows = [
        [u],
        [u, a],
        [s, u, a, u, a, a],
        [],
        [a, u],
        [s, u],
        [u, a, a, a],
        [u, {"role": "tool", "content": "t"}, a],
    ]

    def plain(m):  # the rule in words: drop the trailing assistant turns
        m = list(m)
        while m and m[-1]["role"] == "assistant":
            m.pop()
        return m

    turn = pa.struct([("content", pa.string()), ("role", pa.string())])
    whole = pa.array([[{"content": t["content"], "role": t["role"]} for t in m] for m in rows], pa.list_(turn))
    ids = [f"r{i}" for i in range(len(rows))]
    pq.write_table(pa.table({"id": ids, "messages": whole}), tmp_path / "p.parquet", row_group_size=3)  # 3 chunks
    t = read_prompts(tmp_path / "p.parquet")
    assert t.column("messages").to_pylist() == [plain(m) for m in rows]
    assert prompt_notes(t) == {"reference_turns_dropped": 4}
    # an in-memory slice (offsets not starting at 0, values not sliced) trims the same way
    column = pa.chunked_array([whole.slice(0, 3), whole.slice(3)])
    trimmed, changed = _without_reference_turns(column, None, "x", ColumnMap())
    assert trimmed.to_pylist() == [plain(m) for m in rows] and changed == 4
