"""Eval scoring on crafted traces: the real extractor, the real verifier (math-verify in its pool),
hand-computed pass@1, cons@k, pass@k and counts. No model: the traces are literal completions."""

import json

import pyarrow as pa
import pytest

from reasonkit.distill.eval.run import EvalConfig
from reasonkit.distill.eval.score import score, verify_samples
from reasonkit.think import split

K = 4

# A completion whose chat template opened <think> itself (R1's, QwQ's) with --prefill-think off,
# cut by max_tokens: no tag at all, an intermediate box in unfinished reasoning.
TRUNCATED_5 = "Try x = 2: 2 + 3 = 5, so maybe \\boxed{5}. But the question asks for x itself, so let me"

# (id, gold, [(completion, finish_reason), ...]); completions go through think.split like the generate stage's.
PROBLEMS = [
    # one half, spelled three ways, outvotes a lone 3 (a text vote ties 1-1-1-1 and picks the 3)
    (
        "p1",
        "\\frac{1}{2}",
        [
            ("<think>guess</think> \\boxed{3}", "stop"),
            ("<think>1/2</think> So $\\boxed{\\frac12}$.", "stop"),
            ("<think>half</think> \\boxed{0.5}", "stop"),
            ("<think>a half</think> The answer is $\\boxed{\\dfrac{1}{2}}$.", "stop"),
        ],
    ),
    # 16/2 and 8 are one group (first member: sample 0), 7 and 07 another (sample 1): a 2-2 tie goes
    # to the group whose first member comes first, the wrong 8
    (
        "p2",
        "7",
        [
            ("<think>16/2</think> \\boxed{\\frac{16}{2}}", "stop"),
            ("<think>7</think> \\boxed{7}", "stop"),
            ("<think>07</think> \\boxed{07}", "stop"),
            ("<think>8</think> \\boxed{8}", "stop"),
        ],
    ),
    # the truncated sample has no answer: 6 wins 2-1 (scoring its intermediate box would tie 5 with 6, 5 first)
    (
        "p3",
        "5",
        [
            (TRUNCATED_5, "length"),
            ("<think>6</think> \\boxed{6}", "stop"),
            ("<think>5</think> \\boxed{5}", "stop"),
            ("<think>6 again</think> \\boxed{6}", "stop"),
        ],
    ),
    # only 3 samples (fewer than k): one right, one unverifiable, one without an answer
    (
        "p4",
        "\\sqrt{2}",
        [
            ("<think>root</think> \\boxed{\\sqrt{2}}", "stop"),
            ("<think>?</think> \\boxed{?}", "stop"),
            ("<think>no idea</think> I do not know.", "stop"),
        ],
    ),
]


def traces_table() -> pa.Table:
    rows = []
    for pid, gold, samples in PROBLEMS:
        for j, (completion, finish) in enumerate(samples):
            reasoning, response = split(completion)
            rows.append(
                {
                    "id": pid,
                    "sample": j,
                    "completion": completion,
                    "reasoning": reasoning,
                    "response": response,
                    "answer": gold,
                    "finish_reason": finish,
                    "completion_tokens": 10 + j,
                }
            )
    return pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("id", pa.string()),
                ("sample", pa.int32()),
                ("completion", pa.string()),
                ("reasoning", pa.string()),
                ("response", pa.string()),
                ("answer", pa.string()),
                ("finish_reason", pa.string()),
                ("completion_tokens", pa.int32()),
            ]
        ),
    )


def eval_config(tmp_path, **kw) -> EvalConfig:
    return EvalConfig(model="unused", data="unused", out=str(tmp_path), k=K, verifier="math", **kw)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval")
    traces = traces_table()
    samples = verify_samples(traces, eval_config(out), out / "samples")
    summary, problems = score(samples, traces, k=K)
    return samples, summary, {p["id"]: p for p in problems}


def test_a_truncated_sample_has_no_answer_even_with_a_box_in_its_unfinished_reasoning(scored):
    samples, _, _ = scored
    assert split(TRUNCATED_5) == (None, TRUNCATED_5), "the stage cannot tell this text is reasoning"
    row = [r for r in samples.to_pylist() if r["id"] == "p3" and r["sample"] == 0][0]
    assert row["pred"] is None and row["correct"] is None and row["verify_reason"] == "truncated"


def test_score_truncated_scores_the_truncated_sample_as_before(tmp_path):
    traces = traces_table()
    samples = verify_samples(traces, eval_config(tmp_path), tmp_path / "samples", score_truncated=True)
    row = [r for r in samples.to_pylist() if r["id"] == "p3" and r["sample"] == 0][0]
    assert row["pred"] == "5" and row["correct"] is True
    summary, problems = score(samples, traces, k=K)
    assert [p["majority_correct"] for p in problems if p["id"] == "p3"] == [True], "5 (sample 0) ties 6 and leads"
    assert summary["counts"]["truncated"] == 1 and summary["counts"]["no_answer"] == 1


def test_votes_merge_answers_the_verifier_calls_equal(scored):
    samples, _, problems = scored
    groups = {(r["id"], r["sample"]): r["vote_group"] for r in samples.to_pylist()}
    assert [groups["p1", j] for j in range(4)] == [0, 1, 1, 1], "\\frac12, 0.5 and \\dfrac{1}{2} are one answer"
    assert [groups["p2", j] for j in range(4)] == [0, 1, 1, 0], "\\frac{16}{2} = 8 and 7 = 07"
    assert [groups["p3", j] for j in range(4)] == [None, 1, 2, 1]
    assert [groups["p4", j] for j in range(3)] == [0, 1, None]
    assert problems["p1"]["majority_answer"] == "\\frac12" and problems["p1"]["majority_correct"] is True
    assert problems["p2"]["majority_answer"] == "\\frac{16}{2}" and problems["p2"]["majority_correct"] is False
    assert problems["p3"]["majority_answer"] == "6" and problems["p3"]["majority_correct"] is False
    assert problems["p4"]["majority_answer"] == "\\sqrt{2}" and problems["p4"]["majority_correct"] is True


def test_summary_matches_hand_computed_figures(scored):
    _, summary, _ = scored
    # correct per problem: p1 3/4, p2 2/4, p3 1/4 (the truncated sample counts as not correct), p4 1/3
    assert summary["pass@1"] == pytest.approx((3 / 4 + 2 / 4 + 1 / 4 + 1 / 3) / 4)
    assert summary[f"cons@{K}"] == pytest.approx(2 / 4)  # p1 and p4
    # pass@2 = 1 - C(n-c, 2)/C(n, 2): p1 1, p2 1 - 1/6, p3 1 - 3/6, p4 (n=3, c=1) 1 - 1/3
    assert summary["pass@2"] == pytest.approx((1 + 5 / 6 + 1 / 2 + 2 / 3) / 4)
    # pass@4 needs 4 samples: p4 has 3 and is counted apart, not silently dropped
    assert summary["pass@4"] == pytest.approx(1.0)
    assert summary["pass@k_fewer_samples"] == {"pass@2": 0, "pass@4": 1}
    assert summary["n_samples"] == 15
    assert summary["counts"] == {
        "correct": 7,
        "wrong": 5,
        "unverifiable": 1,
        "context_overflow": 0,
        "no_answer": 2,
        "truncated": 1,
    }
    assert summary["unverifiable_reasons"] == {"unparseable_pred": 1}
    assert summary["no_answer_rate"] == pytest.approx(2 / 15) and summary["unverifiable_rate"] == pytest.approx(1 / 15)
    assert summary["truncated_rate"] == pytest.approx(1 / 15)
    assert json.loads(json.dumps(summary)) == summary, "survives summary.json unchanged"


def test_vote_groups_ask_the_verifier_in_rounds_across_problems_never_for_two_integers():
    from reasonkit.distill.eval.vote import verifier_same, vote_groups
    from reasonkit.filters.math.verify import Verifier

    problems = [["3", "\\frac12", "0.5", "7", "\\dfrac{1}{2}", "3.0"], ["\\sqrt{8}", "2\\sqrt{2}", "x"]]
    calls = []
    verifier = Verifier("math", timeout=10)
    try:
        same = verifier_same(verifier)
        groups = vote_groups(problems, lambda pairs: calls.append(list(pairs)) or same(pairs))
    finally:
        verifier.close()
    assert groups == [[0, 1, 1, 3, 1, 0], [0, 0, 2]]
    # round 1: each problem's first answer against its other classes (3 = 3.0 by value, 7 vs 3 not sent);
    # round 2: problem 1's next first answer, \frac12; round 3 has nothing to ask
    assert calls == [
        [("\\frac12", "3"), ("0.5", "3"), ("\\dfrac{1}{2}", "3"), ("2\\sqrt{2}", "\\sqrt{8}"), ("x", "\\sqrt{8}")],
        [("0.5", "\\frac12"), ("7", "\\frac12"), ("\\dfrac{1}{2}", "\\frac12")],
    ]


def test_summary_md_states_the_counts_and_the_problems_pass_at_k_left_out(scored, tmp_path):
    from reasonkit.distill.eval.report import markdown_table, write_markdown

    _, summary, _ = scored
    write_markdown(summary, tmp_path / "summary.md", title="crafted")
    text = (tmp_path / "summary.md").read_text()
    assert (
        "Samples: 7 correct, 5 wrong, 1 unverifiable (unparseable_pred 1), 2 without an answer; "
        "1 truncated (no answer, R1's protocol)."
    ) in text
    assert "left out: 1 of 4 for pass@4." in text
    assert "| unverifiable |" in text and "| 0.133 | 0.067 | 0.067 |" in text  # no answer, unverifiable, truncated
    older = {k: v for k, v in summary.items() if k not in ("counts", "unverifiable_rate")}
    assert "| n/a |" in markdown_table([("older", older)])
