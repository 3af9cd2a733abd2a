"""`distill filter --select reward`: best-of-N by a reward model, the verifier first, PRM aggregates, the funnel's pick."""  # noqa: E501

import json

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.filters.base import apply
from reasonkit.filters.math.verify import VerifyFilter
from reasonkit.filters.select import SelectFilter, reward_pick, reward_scores, select_by_reward
from reasonkit.store import StageWriter, read_stage

from ..helpers.synthetic import trace, traces_table, write_traces


def _row(id, sample, pred, reward, steps=None, answer="4"):
    return trace(id, sample, response=rf"\boxed{{{pred}}}", answer=answer, reward=reward, step_rewards=steps)


def _scores_dir(path, rows):
    """A scores stage directory as `distill score` leaves it (rewards given: the selection is what is tested here)."""
    w = StageWriter(path, stage="score", kind="scores", config={"literal": True}, keys=("id", "sample"))
    w.commit(traces_table(rows))
    w.finish()
    return str(path)


def _filter(args):
    result = CliRunner().invoke(cli, ["filter", *args, "--lang", "none", "--dedup", "none", "--quiet"])
    return result


def _kept(out):
    t = read_stage(out)
    return sorted(zip(t.column("id").to_pylist(), t.column("sample").to_pylist()))


def test_highest_reward_is_kept_per_prompt():
    ids, samples = ["p"] * 4 + ["q"] * 2, [0, 1, 2, 3, 0, 1]
    rewards = [0.1, 2.5, -1.0, 2.4, 0.3, 0.2]
    got = select_by_reward(ids, samples, rewards, [None] * 6, [True] * 6, 1)
    assert [i for i, r in enumerate(got) if r is None] == [1, 4]
    got = select_by_reward(ids, samples, rewards, [None] * 6, [True] * 6, 2)
    assert [i for i, r in enumerate(got) if r is None] == [1, 3, 4, 5]
    # a row with no reward ranks last; a dropped row does not compete
    assert select_by_reward(["p"] * 2, [0, 1], [None, -5.0], [None] * 2, [True] * 2, 1) == ["not_selected", None]
    assert select_by_reward(["p"] * 2, [0, 1], [9.0, 1.0], [None] * 2, [False, True], 1) == [None, None]


def test_verified_correct_samples_come_before_higher_rewards():
    # the verifier could not check sample 0 (correct None) and sample 2 is verified: 2 wins despite a lower reward
    got = select_by_reward(["p"] * 3, [0, 1, 2], [5.0, 9.0, 1.0], [None, None, True], [True] * 3, 1)
    assert got == ["not_selected", "not_selected", None]
    # through the real filters: --unverifiable keep lets an unchecked answer compete, behind the verified one
    rows = [_row("p", 0, "x+1", 5.0), _row("p", 1, "4", 1.0), _row("p", 2, "4", 3.0), _row("p", 3, "5", 9.0)]
    out = apply([VerifyFilter("int", unverifiable="keep"), SelectFilter(1, "reward")], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == ["not_selected", "not_selected", None, "wrong"]


def test_prm_step_rewards_min_or_product():
    steps = [[0.9, 0.9, 0.3], [0.5, 0.5, 0.5]]  # min: 0.3 vs 0.5 (sample 1); product: 0.243 vs 0.125 (sample 0)
    assert reward_scores([0.3, 0.5], steps, "min") == [0.3, 0.5]
    prod = reward_scores([0.3, 0.5], steps, "prod")
    assert prod == pytest.approx([0.243, 0.125])
    assert select_by_reward(["p", "p"], [0, 1], prod, [None, None], [True, True], 1) == [None, "not_selected"]


def test_reward_pick_counts_the_models_own_choice():
    pick = reward_pick(["p", "p", "q", "q"], [0, 1, 0, 1], [3.0, 1.0, 0.5, 2.0], [False, True, None, True])
    assert pick == {"prompts": 2, "verified_correct": 1, "wrong": 1, "unverified": 0, "correct_share": 0.5}


def test_filter_select_reward_end_to_end_with_the_funnel_number(tmp_path):
    rows = [
        _row("p", 0, "5", 9.0),
        _row("p", 1, "4", 0.5),
        _row("p", 2, "4", 0.7),  # RM's pick is wrong
        _row("q", 0, "4", 2.0),
        _row("q", 1, "3", 1.0),  # RM's pick is right
        _row("r", 0, "7", 1.0),
        _row("r", 1, "4", 3.0),
        _row("r", 2, "4", 3.5),
    ]  # right
    src = _scores_dir(tmp_path / "scored", rows)
    result = _filter([src, "--out", str(tmp_path / "out"), "--verifier", "int", "--select", "reward"])
    assert result.exit_code == 0, result.output
    assert _kept(tmp_path / "out") == [("p", 2), ("q", 0), ("r", 2)]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["reward_pick"] == {
        "prompts": 3,
        "verified_correct": 2,
        "wrong": 1,
        "unverified": 0,
        "correct_share": 0.6667,
    }
    assert "reward pick" in result.output
    assert any(s["reason"] == "not_selected" and s["dropped"] == 2 for s in report["funnel"])
    # without a verifier it is pure best-of-N by reward: p's wrong answer wins
    result = _filter([src, "--out", str(tmp_path / "none"), "--verifier", "none", "--select", "reward"])
    assert result.exit_code == 0, result.output
    assert _kept(tmp_path / "none") == [("p", 0), ("q", 0), ("r", 2)]


def test_filter_step_aggregate_changes_the_pick(tmp_path):
    rows = [_row("p", 0, "4", 0.3, [0.9, 0.9, 0.3]), _row("p", 1, "4", 0.5, [0.5, 0.5, 0.5])]
    src = _scores_dir(tmp_path / "scored", rows)
    for how, sample in (("min", 1), ("prod", 0)):
        result = _filter(
            [src, "--out", str(tmp_path / how), "--verifier", "int", "--select", "reward", "--step-aggregate", how]
        )
        assert result.exit_code == 0, result.output
        assert _kept(tmp_path / how) == [("p", sample)]


def test_select_reward_on_scores_from_a_real_reward_model(tmp_path):
    from reasonkit.judges.score.config import ScoreConfig
    from reasonkit.judges.score.run import run_score

    from ..helpers.score import arithmetic_traces, build_reward_model

    traces = write_traces(tmp_path / "t", arithmetic_traces(4, 4))
    run_score(ScoreConfig(input=str(traces), out=str(tmp_path / "s"), model=build_reward_model(tmp_path / "rm")))
    result = _filter([str(tmp_path / "s"), "--out", str(tmp_path / "f"), "--verifier", "int", "--select", "reward"])
    assert result.exit_code == 0, result.output
    scored, kept = read_stage(tmp_path / "s").to_pylist(), read_stage(tmp_path / "f").to_pylist()
    report = json.loads((tmp_path / "f" / "report.json").read_text())
    for row in kept:  # the best correct sample of its prompt
        rivals = [r for r in scored if r["id"] == row["id"] and f"{{{r['answer']}}}" in r["response"]]
        assert row["reward"] == max(r["reward"] for r in rivals)
    picks = [
        max((r for r in scored if r["id"] == pid), key=lambda r: r["reward"]) for pid in {r["id"] for r in scored}
    ]
    right = sum(f"{{{r['answer']}}}" in r["response"] for r in picks)
    assert report["reward_pick"]["verified_correct"] == right and report["reward_pick"]["prompts"] == 4


def test_select_reward_without_a_reward_column_is_one_line(tmp_path):
    src = write_traces(tmp_path / "t", [trace("p", 0)])
    result = _filter([str(src), "--out", str(tmp_path / "out"), "--select", "reward"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--select reward needs a 'reward' column" in lines[0] and "distill score" in lines[0]
    assert not (tmp_path / "out").exists()
