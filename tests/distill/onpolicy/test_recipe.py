"""On-policy distillation as a `distill run` step (`stage: train` with `method: distill`): `--plan` counts a
teacher copy in every training process (none with `teacher_url`), and the recipe runs: a fresh student from the
`student` stage, fully fine-tuned (--full) on synthesised prompts."""

import json
from pathlib import Path

import pytest

from reasonkit.recipes.plan import plan, render
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import load_state, validate


def recipe(tmp_path, **train):
    doc = {
        "name": "distill-step",
        "out": str(tmp_path / "out"),
        "steps": [
            {"name": "problems", "stage": "synth", "with": {"n": 16, "variant": "aime", "split": "train", "seed": 3}},
            {"name": "student", "stage": "student", "with": {"tokenizer": "${reasonkit}/recipes/assets/teacher"}},
            {
                "name": "distill",
                "stage": "train",
                "with": {
                    "method": "distill",
                    "student": "${student}",
                    "teacher": "${reasonkit}/recipes/assets/teacher",
                    "data": "${problems}",
                    "max_steps": 2,
                    "batch_size": 4,
                    "max_completion_length": 32,
                    "lr": 0.001,
                    "warmup": 0,
                    "threads": 1,
                    **train,
                },
            },
        ],
    }
    return parse_recipe(doc, "distill-step.yaml", [], out=str(tmp_path / "out"))


def test_the_plan_holds_a_teacher_copy_for_local_distillation_and_none_for_a_served_teacher(tmp_path):
    local = recipe(tmp_path)
    text = render(plan(local, validate(local), load_state(Path(local.out)), gpu_gb=80))
    assert "teacher 0.0" in text, text  # the term is shown once non-zero: the embedded teacher's 1.1M bf16 weights
    served = recipe(tmp_path, teacher=None, teacher_url="http://teacher:8000")
    text = render(plan(served, validate(served), load_state(Path(served.out)), gpu_gb=80))
    assert "teacher 0.0" not in text and "the teacher on its server (http://teacher:8000), none here" in text, text


@pytest.mark.slow
def test_a_recipe_step_distils_a_fresh_student(tmp_path):
    from reasonkit.recipes.runner import run

    r = recipe(tmp_path, full=True)  # full fine-tuning: a random-init student has nothing for LoRA to adapt
    run(r)
    out = Path(r.out) / "distill"
    report = json.loads((out / "report.json").read_text())
    assert report["method"] == "distill" and report["steps"] == 2 and report["model"] == str(out / "model")
    assert (out / "model" / "model.safetensors").is_file() and not (out / "adapter").exists()
    assert report["distill"]["rollouts"]["rows"] == 2 * 4
