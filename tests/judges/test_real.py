"""judge and critique through real gen backends on a tiny model, and one DPO step on each prefs output.

The tiny model's judgements are noise (the embedded teacher only knows arithmetic): these tests
check the plumbing -- requests, parsing into a value or a reason, the stage directories -- not
the quality of what it says.
"""

import re
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.gen.backend import Completion
from reasonkit.judges.backends import make_backend
from reasonkit.judges.config import CritiqueConfig, JudgeConfig, PairsConfig
from reasonkit.recipes.tasks.math import make_problems, solution
from reasonkit.store import StageWriter, load_manifest, read_stage
from reasonkit.think import split

TEACHER = Path(__file__).resolve().parents[2] / "recipes" / "assets" / "teacher"


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return str(TEACHER) if (TEACHER / "config.json").is_file() else tiny_model_dir


def write_traces(path, n=3, verdicts=False):
    """n problems of the tiny task, each with its worked solution and a wrong variant."""
    rows = []
    for p in make_problems(n, seed=0, variant="mul"):
        good = solution(p)
        bad = good.replace(p["answer"], str(int(p["answer"]) + 1))
        for sample, text in enumerate((good, bad)):
            reasoning, response = split(text)
            row = {
                "id": p["id"],
                "sample": sample,
                "messages": [{"role": "user", "content": p["problem"]}],
                "completion": text,
                "reasoning": reasoning,
                "response": response,
                "finish_reason": "stop",
                "prompt_tokens": 10,
                "completion_tokens": 20 + 9 * sample,
                "teacher": "t",
                "gen_config": "g",
                "answer": p["answer"],
                "source": "tiny",
            }
            if verdicts:
                row.update(
                    pred=None,
                    correct=sample == 0,
                    lang_ratio=1.0,
                    keep=sample == 0,
                    drop_reason=None if sample == 0 else "wrong",
                )
            rows.append(row)
    kind = "verdicts" if verdicts else "traces"
    for where, part in (
        (path, [r for r in rows if not verdicts or r["keep"]]),
        (path / "rejected", [r for r in rows if verdicts and not r["keep"]]),
    ):
        if part or where == path:
            w = StageWriter(where, stage=kind, kind=kind, config={}, keys=("id", "sample"))
            w.commit(pa.Table.from_pylist(part))
            w.finish()
    return str(path)


def test_judge_and_critique_through_the_hf_backend(tmp_path, model):
    from reasonkit.judges.command import judge
    from reasonkit.judges.critique import run_critique
    from reasonkit.judges.judge import run_judge

    src = write_traces(tmp_path / "traces")
    args = [
        src,
        "--out",
        str(tmp_path / "pointwise"),
        "--judge",
        model,
        "--backend",
        "hf",
        "--dtype",
        "float32",
        "--max-tokens",
        "24",
    ]
    result = CliRunner().invoke(judge, args)
    assert result.exit_code == 0, result.output
    manifest = load_manifest(tmp_path / "pointwise")
    assert (
        manifest["complete"]
        and manifest["kind"] == "prefs"
        and load_manifest(tmp_path / "pointwise" / "record")["complete"]
    )
    record = read_stage(tmp_path / "pointwise" / "record").to_pylist()
    assert len(record) == 6 and all(r["judge_output"] is not None for r in record)
    assert all((r["score"] is None) != (r["reason"] is None) for r in record)  # a value, or None with a reason
    assert load_manifest(tmp_path / "pointwise" / "record")["tokens"] > 0
    read_stage(tmp_path / "pointwise", kind="prefs")

    base = dict(judge=model, backend="hf", dtype="float32", max_tokens=24, input=src)
    backend = make_backend(JudgeConfig(**base, out=""))
    report = run_judge(JudgeConfig(**base, out=str(tmp_path / "pairwise"), mode="pairwise"), backend=backend)
    record = read_stage(tmp_path / "pairwise" / "record").to_pylist()
    assert len(record) == 3 and all((r["winner"] is None) != (r["reason"] is None) for r in record)
    assert report["items_judged"] == 3 and report["tokens"]["completion_tokens"] > 0

    report = run_critique(CritiqueConfig(**base, out=str(tmp_path / "critique"), seed=1), backend=backend)
    record = read_stage(tmp_path / "critique" / "record").to_pylist()
    assert len(record) == 6 and report["rows_recorded"] == 6
    assert all((r["revision_response"] is None) == (r["reason"] is not None and not r["rounds"]) for r in record)
    assert {r["principle"] for r in record if r["rounds"]} <= {"correct", "verifiable", "concise", "one-language"}
    assert read_stage(tmp_path / "critique", kind="prefs").num_rows == report["prefs"]
    assert read_stage(tmp_path / "critique" / "sft", kind="sft").num_rows == report["sft"]
    backend.close()


@pytest.mark.slow
def test_judge_and_critique_against_the_loopback_vllm_server(tmp_path, vllm_server):
    """The openai backend of judge and critique, talking to vLLM's OpenAI-compatible server."""
    from reasonkit.judges.critique import run_critique
    from reasonkit.judges.judge import run_judge

    url, served = vllm_server
    src = write_traces(tmp_path / "traces", n=2)
    base = dict(judge=served, backend="openai", base_url=url, max_tokens=24, input=src, concurrency=4)
    report = run_judge(JudgeConfig(**base, out=str(tmp_path / "pairwise"), mode="pairwise"))
    record = read_stage(tmp_path / "pairwise" / "record").to_pylist()
    assert report["items_judged"] == 2 and load_manifest(tmp_path / "pairwise")["complete"]
    assert all(r["output_ab"] is not None and r["output_ba"] is not None for r in record)  # both orders asked
    assert all((r["winner"] is None) != (r["reason"] is None) for r in record)  # a verdict, or None + why
    report = run_critique(CritiqueConfig(**base, out=str(tmp_path / "critique"), seed=1))
    record = read_stage(tmp_path / "critique" / "record").to_pylist()
    assert len(record) == 4 and report["rows_recorded"] == 4
    assert (
        load_manifest(tmp_path / "critique")["complete"] and load_manifest(tmp_path / "critique" / "sft")["complete"]
    )


@pytest.mark.slow
def test_judge_through_the_vllm_backend(tmp_path, model):
    from reasonkit.judges.judge import run_judge

    src = write_traces(tmp_path / "traces", n=2)
    report = run_judge(
        JudgeConfig(
            judge=model,
            backend="vllm",
            dtype="float32",
            max_model_len=1024,
            max_tokens=24,
            input=src,
            out=str(tmp_path / "o"),
            mode="pairwise",
        )
    )
    assert report["items_judged"] == 2 and load_manifest(tmp_path / "o")["complete"]


def dpo_step(model_dir, prefs_dir, out):
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    data = Dataset(read_stage(prefs_dir, kind="prefs"))  # the stage's own table, no conversion
    assert data.num_rows > 0
    args = DPOConfig(
        output_dir=str(out),
        max_steps=1,
        per_device_train_batch_size=2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        max_length=512,
        dataset_num_proc=None,
    )
    trainer = DPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=args,
        train_dataset=data,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    return trainer.train().training_loss


class Scripted:
    """A deterministic stand-in model: ``reply(messages) -> text``."""

    name = "scripted"

    def __init__(self, reply):
        self.reply = reply

    def generate(self, requests):
        for r in requests:
            yield Completion(r.id, 0, self.reply(r.messages), "stop", 10, 3)

    def describe(self):
        return {}

    def close(self):
        pass


def grade(messages):
    """Score 9 when the answer's box holds the reference answer, else 2."""
    text = messages[-1]["content"]
    ref = re.search(r"<reference_answer>\n(.*?)\n", text).group(1)
    answer = text.split("<answer>")[1]
    return "Score: 9" if f"\\boxed{{{ref}}}" in answer else "Score: 2"


def revise(messages):
    last = messages[-1]["content"]
    return (
        messages[-4]["content"].replace("The answer is", "So the answer is") if last.startswith("Rewrite") else "Fine."
    )


def test_one_dpo_step_with_lora_on_each_prefs_output(tmp_path, tiny_model_dir):
    import math

    from reasonkit.judges.critique import run_critique
    from reasonkit.judges.judge import run_judge
    from reasonkit.judges.pairs import run_pairs

    verdicts = write_traces(tmp_path / "verdicts", verdicts=True)
    traces = write_traces(tmp_path / "traces")
    run_pairs(PairsConfig(verdicts=verdicts, out=str(tmp_path / "pairs")))
    run_judge(JudgeConfig(judge="s", input=traces, out=str(tmp_path / "judged")), backend=Scripted(grade))
    run_critique(CritiqueConfig(judge="s", input=traces, out=str(tmp_path / "critique")), backend=Scripted(revise))
    for name in ("pairs", "judged", "critique"):
        loss = dpo_step(tiny_model_dir, tmp_path / name, tmp_path / f"dpo-{name}")
        assert math.isfinite(loss), name
