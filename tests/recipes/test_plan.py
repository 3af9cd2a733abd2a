"""`distill run RECIPE --plan`: each step's action, GPUs and memory per GPU, with no model loaded."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reasonkit.config import load_yaml
from reasonkit.recipes.plan import PUBLISHED, PUBLISHED_SHAPES, model_size, plan, refusals, render
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import STATE, load_state, validate

from ..helpers.recipes import overrides_for

RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml"))


def planned(path, out, overrides=(), gpu_gb=None):
    recipe = parse_recipe(load_yaml(path), str(path), list(overrides), out=str(out))
    return {s.name: s for s in plan(recipe, validate(recipe), load_state(Path(recipe.out)), gpu_gb=gpu_gb)}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_shipped_recipe_has_a_plan(path, tmp_path, teacher_dir):
    steps = planned(path, tmp_path, overrides_for(path, teacher_dir))
    assert steps and all(s.action == "run" for s in steps.values())
    for s in steps.values():
        if s.stage in ("synth", "filter", "pairs", "student"):
            assert s.gpus == 0, s
    table = render(list(steps.values()))
    assert table.splitlines()[0].startswith("step") and any("the largest holds" in line for line in table.splitlines())
    assert refusals(list(steps.values())) == [], "every shipped recipe fits an H100 80GB (79.6 GiB) as written"


def test_the_r1_teacher_spans_two_nodes_and_fits(tmp_path):
    """DeepSeek-R1's FP8 weights (685B x 1 byte, its MTP layer included) over TP 8 x PP 2 = 16 GPUs:
    42.8 GB each, which leaves an 80 GB GPU room for KV cache; at TP 8 alone 85.6 GB, more than it has:
    refused, naming the term; an H200's 141 GB (x 0.9 = 126.9 GB) holds it. The H100 is sized as torch.cuda
    reports it (issue 35 item 7): 79.6 GiB = 85.5 GB, of which vLLM takes 0.9 = 77.0 GB (not 0.9 x 80 = 72.0)."""
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "r1-distill-qwen-1.5b.yaml"
    traces = planned(recipe, tmp_path)["traces"]
    assert traces.gpus == 16 and "TP 8 x PP 2" in traces.layout and traces.refusal is None
    assert "weights 42.8 GB/GPU (685.00B params x 1 B / 16)" in traces.memory, traces.memory
    single = planned(recipe, tmp_path, ["traces.engine_args.pipeline_parallel_size=1"])["traces"]
    assert single.gpus == 8 and "weights 85.6 GB/GPU" in single.memory
    assert single.refusal.startswith("weights 85.6 GB/GPU do not fit the 77.0 GB vLLM may take of a 85.5 GB GPU"), (
        single.refusal
    )
    h200 = planned(recipe, tmp_path, ["traces.engine_args.pipeline_parallel_size=1"], gpu_gb=141)["traces"]
    assert h200.refusal is None


def test_sizes_come_from_config_json_and_follow_the_steps_that_train(tmp_path, teacher_dir):
    teacher = model_size(teacher_dir)
    config = json.loads((Path(teacher_dir) / "config.json").read_text())
    assert teacher.vocab == config["vocab_size"] and teacher.source.endswith("config.json")
    assert 0.9e6 < teacher.params < 1.3e6, "the embedded teacher is about 1.1M parameters"
    steps = planned(Path(teacher_dir).parents[1] / "quickstart.yaml", tmp_path)
    # the fresh student (0.5M) is what sft trains, student_samples samples and the evals load
    for name in ("student_samples", "eval_student_sft", "eval_student_dpo", "eval_student_before"):
        assert "(0.5M params x 4 B / 1)" in steps[name].memory, (name, steps[name].memory)
    assert "(1.1M params" in steps["eval_teacher"].memory
    for name in ("sft", "dpo"):  # distill/lint/memory.py's estimate of the student the student step builds
        assert "weights" in steps[name].memory and "logits" in steps[name].memory, steps[name].memory


def test_training_memory_is_the_lints_estimate(tmp_path):
    """The SFT step of the R1 recipe, sized before anything is downloaded: Qwen2.5-Math-1.5B's published
    shape, through the same train_estimate the train lint uses."""
    from reasonkit.distill.lint.memory import train_estimate

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "r1-distill-qwen-1.5b.yaml"
    step = [
        p for p in validate(parse_recipe(load_yaml(recipe), str(recipe), out=str(tmp_path))) if p.step.name == "sft"
    ][0]
    shape = PUBLISHED_SHAPES["Qwen/Qwen2.5-Math-1.5B"]  # the prepared student keeps the base's shape
    e, tokens = train_estimate(step.config, shape, sequence=step.config.max_length, gpu=80e9)
    assert tokens == 2 * 32768
    assert planned(recipe, tmp_path)["sft"].memory.startswith(f"{e.total / 1e9:.1f} GB (")
    # TRL's fused LM head: no whole logits (they would be tokens x 151,936 x 4 bytes = 39.8 GB)
    assert e.logits < 2e9 and round(tokens * 151_936 * 4 / 1e9, 1) == 39.8


def test_unknown_models_say_how_to_size_them(tmp_path):
    assert model_size("someone/unreleased-model") is None
    assert model_size("Qwen/Qwen2.5-Math-1.5B").source == "published" and "Qwen/Qwen2.5-Math-1.5B" in PUBLISHED


def test_actions_follow_the_run_state(tmp_path, teacher_dir):
    recipe_path = Path(teacher_dir).parents[1] / "quickstart.yaml"
    recipe = parse_recipe(load_yaml(recipe_path), str(recipe_path), out=str(tmp_path))
    fps = {p.step.name: p.fingerprint for p in validate(recipe)}
    (tmp_path / "train_problems").mkdir()
    state = {
        "train_problems": {"fingerprint": fps["train_problems"], "done": True},
        "eval_problems": {"fingerprint": fps["eval_problems"], "done": False},
        "traces": {"fingerprint": "an older config", "done": True},
    }
    (tmp_path / STATE).write_text(json.dumps(state))
    steps = planned(recipe_path, tmp_path)
    assert [steps[n].action for n in ("train_problems", "eval_problems", "traces", "verified")] == [
        "skip (finished)",
        "resume",
        "rerun (config changed)",
        "run",
    ]


def test_cli_plan_loads_no_model_code_and_writes_nothing(tmp_path):
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "quickstart.yaml"
    probe = (
        "import sys\nfrom reasonkit.cli import cli\n"
        f"try:\n    cli(['run', {str(recipe)!r}, '--plan', '--out', {str(tmp_path / 'run')!r}])\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "print('HEAVY', [m for m in ('torch', 'vllm', 'transformers', 'trl') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "HEAVY []" in out.stdout and "eval_student_dpo" in out.stdout, out.stdout + out.stderr
    assert not (tmp_path / "run").exists()


def test_gpu_recipes_use_the_published_settings(tmp_path):
    """The R1 recipe's student is prepared for 32k traces and trained with open-r1's OpenR1-Distill-7B
    values; no recipe asks a model for more tokens than its context holds."""
    root = Path(__file__).resolve().parents[2] / "recipes"
    r1 = {
        p.step.name: p.config
        for p in validate(parse_recipe(load_yaml(root / "r1-distill-qwen-1.5b.yaml"), "r1", out=str(tmp_path)))
    }
    assert r1["student"].max_positions >= 32768 + 1024 and r1["student"].rope_theta == 300000
    sft = r1["sft"]
    assert (sft.lr, sft.epochs, sft.max_grad_norm, sft.lr_scheduler, sft.lr_scheduler_kwargs, sft.max_length) == (
        4e-5,
        5,
        0.2,
        "cosine_with_min_lr",
        {"min_lr_rate": 0.1},
        32768,
    )
    assert sft.full and sft.launcher == "accelerate" and sft.batch_size * sft.num_processes * sft.grad_accum == 128
    # open-r1's config_distill.yaml: 128 traces a step, unpacked, on FlashAttention 2 (auto: where flash-attn built); no  # noqa: E501
    # Liger (TRL 1.16's SFT already scores through a fused LM head). Before: 128 packed 32k rows (~4.2M tokens) a step.
    assert not sft.packing and sft.attn_implementation == "auto" and not sft.use_liger_kernel
    assert not any(p.use_liger_kernel for p in r1.values() if hasattr(p, "use_liger_kernel"))
    assert r1["eval_aime24"].max_tokens == 32768 and r1["eval_aime24"].k == 64
    pairs = {
        p.step.name: p.config
        for p in validate(parse_recipe(load_yaml(root / "dpo-verifier-pairs.yaml"), "dpo", out=str(tmp_path)))
    }
    assert pairs["samples"].max_tokens < 4096 and pairs["dpo"].max_length <= 4096  # a 4,096-position model


def test_plan_prints_rows_tokens_and_optimizer_steps_a_step(tmp_path):
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "r1-distill-qwen-1.5b.yaml"
    (note,) = planned(recipe, tmp_path)["sft"].notes
    assert note.startswith(
        "128 rows a step (2 x 8 processes x 8 accumulation), one trace a row (no packing): "
        "at most 4,194,304 tokens a step (128 x 32,768); optimizer steps: 5 x rows / 128"
    ), note
    packed = planned(recipe, tmp_path, ["sft.packing=true", "sft.attn_implementation=sdpa"])["sft"].notes[0]
    assert "each packed to 32,768 tokens (several traces a row): 4,194,304 tokens a step" in packed
    # rows on disk: a finished stage directory's manifest gives the optimizer steps
    from reasonkit.recipes.tasks.train_sets import write_sft

    data = write_sft(tmp_path / "sft-data", n=1000)
    known = planned(recipe, tmp_path, [f"sft.data={data}"])["sft"].notes[0]
    assert known.endswith("optimizer steps: 40 (5 x ceil(1,000 rows / 128))"), known
