"""`distill score`: a real reward model's numbers, batched as alone, resumed without redoing or duplicating, bad input."""  # noqa: E501

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.judges.score.config import ScoreConfig
from reasonkit.judges.score.run import run_score
from reasonkit.reward.scorer import Scorer, inspect_model, turn_of
from reasonkit.store import load_manifest, read_stage

from ...helpers.score import TEACHER, arithmetic_traces, reward_models
from ...helpers.synthetic import write_traces


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return reward_models(tmp_path_factory.mktemp("rms"))


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return str(write_traces(tmp_path_factory.mktemp("t") / "traces", arithmetic_traces(6, 4), shard_rows=7))


def _scored(out) -> dict:
    t = read_stage(out)
    return {
        (i, s): (r, sr)
        for i, s, r, sr in zip(*(t.column(c).to_pylist() for c in ("id", "sample", "reward", "step_rewards")))
    }


def _direct(model_dir, rows):
    """One forward per row, batch of one, no padding: the model's own reading of the text RewardTrainer trains on."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out = {}
    for r in rows:
        conversation = list(r["messages"]) + [{"role": "assistant", "content": turn_of(r)}]
        ids = tok.apply_chat_template(conversation, tokenize=True, return_dict=True)["input_ids"]
        with torch.no_grad():
            out[(r["id"], r["sample"])] = float(model(input_ids=torch.tensor([ids])).logits[0, 0])
    return out


def test_rewards_equal_a_direct_forward_and_trls_tokenisation(models, traces, tmp_path):
    from trl.data_utils import _tokenize

    report = run_score(ScoreConfig(input=traces, out=str(tmp_path / "s"), model=models["rm"], batch_size=8))
    got = _scored(tmp_path / "s")
    rows = read_stage(traces).to_pylist()
    want = _direct(models["rm"], rows)
    assert report["rows"] == len(rows) == len(got) and report["kind"] == "rm"
    assert max(want.values()) - min(want.values()) > 1.0  # the numbers compared are far apart
    for key, value in want.items():
        assert got[key][0] == pytest.approx(value, abs=1e-5)
        assert got[key][1] is None
    # the token ids are TRL's RewardTrainer's for a conversational example (prompt + chosen)
    scorer = Scorer(inspect_model(models["rm"]))
    for r in rows[:3]:
        example = r["messages"] + [{"role": "assistant", "content": turn_of(r)}]
        assert list(scorer.encode(r["messages"], turn_of(r)).ids) == _tokenize(scorer.tokenizer, example)["input_ids"]
    schema = read_stage(tmp_path / "s").schema
    assert schema.field("reward").type == pa.float32() and load_manifest(tmp_path / "s")["kind"] == "scores"


def test_batched_equals_unbatched(models, traces, tmp_path):
    for model in ("rm", "prm"):
        run_score(ScoreConfig(input=traces, out=str(tmp_path / f"{model}1"), model=models[model], batch_size=1))
        run_score(ScoreConfig(input=traces, out=str(tmp_path / f"{model}8"), model=models[model], batch_size=8))
        one, eight = _scored(tmp_path / f"{model}1"), _scored(tmp_path / f"{model}8")
        assert one.keys() == eight.keys()
        for key in one:
            assert eight[key][0] == pytest.approx(one[key][0], abs=1e-5)
            if model == "prm":
                assert eight[key][1] == pytest.approx(one[key][1], abs=1e-5)


def test_prm_step_rewards_at_each_steps_last_token(models, traces, tmp_path):
    import torch
    from transformers import AutoModelForTokenClassification

    run_score(ScoreConfig(input=traces, out=str(tmp_path / "p"), model=models["prm"], batch_size=4))
    got = _scored(tmp_path / "p")
    scorer = Scorer(inspect_model(models["prm"]))
    model = AutoModelForTokenClassification.from_pretrained(models["prm"]).eval()
    for r in read_stage(traces).to_pylist()[:6]:
        reward, steps = got[(r["id"], r["sample"])]
        lines = r["reasoning"].count("\n") + 1
        assert len(steps) == lines + 1  # each reasoning line, then "</think>" glued to the response
        enc = scorer.encode(r["messages"], turn_of(r))
        with torch.no_grad():
            good = torch.softmax(model(input_ids=torch.tensor([enc.ids])).logits[0], -1)[:, 1]
        assert steps == pytest.approx([float(good[e]) for e in enc.ends], abs=1e-5)
        assert reward == pytest.approx(min(steps), abs=1e-7)
    assert len({round(v[0], 6) for v in got.values()}) > 3


class _Dies:
    """The real scorer, killed (an exception) on its ``after``-th call: a run that stops mid-way."""

    def __init__(self, scorer, after: int):
        self.scorer, self.after, self.rows = scorer, after, 0

    def score(self, prompts, turns, batch_size):
        self.after -= 1
        if self.after < 0:
            raise KeyboardInterrupt
        self.rows += len(turns)
        return self.scorer.score(prompts, turns, batch_size)


def test_resume_after_a_partial_run_neither_redoes_nor_duplicates(models, traces, tmp_path):
    cfg = ScoreConfig(input=traces, out=str(tmp_path / "r"), model=models["rm"], shard_size=5, batch_size=3)
    scorer = Scorer(inspect_model(models["rm"]))
    first = _Dies(scorer, after=2)
    with pytest.raises(KeyboardInterrupt):
        run_score(cfg, scorer=first)
    manifest = load_manifest(tmp_path / "r")
    assert first.rows == 10 and manifest["rows"] == 10 and not manifest["complete"]
    second = _Dies(scorer, after=100)
    report = run_score(cfg, scorer=second)
    assert second.rows == 24 - 10 and report["scored_this_run"] == 14
    t = read_stage(tmp_path / "r")
    keys = list(zip(t.column("id").to_pylist(), t.column("sample").to_pylist()))
    assert len(keys) == len(set(keys)) == 24
    run_score(ScoreConfig(input=traces, out=str(tmp_path / "whole"), model=models["rm"], batch_size=3))
    whole = _scored(tmp_path / "whole")
    assert {k: v[0] for k, v in _scored(tmp_path / "r").items()} == pytest.approx(
        {k: v[0] for k, v in whole.items()}, abs=1e-5
    )
    third = _Dies(scorer, after=0)  # complete: a rerun scores nothing
    assert run_score(cfg, scorer=third)["scored_this_run"] == 0


def test_a_lora_adapter_is_accepted(models, traces, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(1)
    base = AutoModelForSequenceClassification.from_pretrained(str(TEACHER), num_labels=1)
    peft = get_peft_model(
        base,
        LoraConfig(
            r=4,
            target_modules=["q_proj", "v_proj"],
            task_type="SEQ_CLS",
            modules_to_save=["score"],
            init_lora_weights=False,
        ),
    )
    with torch.no_grad():
        peft.base_model.model.score.modules_to_save["default"].weight.normal_(0, 1)
    peft.save_pretrained(tmp_path / "adapter")
    AutoTokenizer.from_pretrained(str(TEACHER)).save_pretrained(tmp_path / "adapter")
    peft.merge_and_unload().save_pretrained(tmp_path / "merged")
    AutoTokenizer.from_pretrained(str(TEACHER)).save_pretrained(tmp_path / "merged")
    assert inspect_model(str(tmp_path / "adapter")).adapter == str(tmp_path / "adapter")
    run_score(ScoreConfig(input=traces, out=str(tmp_path / "a"), model=str(tmp_path / "adapter"), batch_size=8))
    got = _scored(tmp_path / "a")
    want = _direct(str(tmp_path / "merged"), read_stage(traces).to_pylist()[:5])
    for key, value in want.items():
        assert got[key][0] == pytest.approx(value, abs=1e-4)


@pytest.mark.parametrize("case", ["causal_lm", "missing", "no_completion"])
def test_bad_input_is_one_line_exit_2_nothing_written(case, models, traces, tmp_path):
    from reasonkit.store import StageWriter

    model, source = models["rm"], traces
    if case == "causal_lm":
        model = str(TEACHER)
    elif case == "missing":
        model = str(tmp_path / "nothing")
    else:
        w = StageWriter(tmp_path / "prompts", stage="synth", kind="prompts", config={}, keys=("id",))
        w.commit(pa.table({"id": ["a"], "messages": pa.array([[{"role": "user", "content": "1+1?"}]])}))
        w.finish()
        source = str(tmp_path / "prompts")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["score", source, "--model", model, "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    expected = {
        "causal_lm": "LlamaForCausalLM",
        "missing": "no such model directory",
        "no_completion": "missing column 'sample'",
    }
    assert expected[case] in lines[0]
    assert not out.exists()


def test_report_and_cli_output(models, traces, tmp_path):
    result = CliRunner().invoke(
        cli, ["score", traces, "--model", models["rm"], "--out", str(tmp_path / "c"), "--batch-size", "4"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    assert report["rows"] == 24 and report["unscored"] == 0 and report["reward"]["min"] < report["reward"]["max"]


def test_the_command_and_config_import_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys, reasonkit.judges.score.command, reasonkit.judges.score.config, reasonkit.judges.score.run, "
        "reasonkit.reward.model; "
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'peft', 'pyarrow') if m in sys.modules))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )
