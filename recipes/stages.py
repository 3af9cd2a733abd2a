"""Which stages a recipe may use: each a config dataclass and a run function, both by import path.

Config classes live in light modules (no torch, vLLM or transformers at import), so
``distill validate`` checks a whole recipe without loading any model.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class StageSpec:
    config: str  # "module:Class", a frozen dataclass
    run: str  # "module:function", taking that dataclass
    inputs: tuple[str, ...] = ()  # config fields that name existing paths (or ${step} references)
    out_field: str = "out"  # the field the runner points at OUT/<step name>
    models: tuple[str, ...] = ()  # config fields that name a model: fingerprinted by content (identity.py)

    def config_class(self) -> type:
        return _load(self.config)

    def run_function(self):
        return _load(self.run)


def _load(target: str):
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


STAGES: dict[str, StageSpec] = {
    "synth": StageSpec("reasonkit.recipes.tasks.synth:SynthConfig", "reasonkit.recipes.tasks.synth:run_synth"),
    "student": StageSpec(
        "reasonkit.recipes.teachers.student:StudentConfig",
        "reasonkit.recipes.teachers.student:init_student",
        inputs=("tokenizer",),
        models=("tokenizer",),
    ),
    "prepare-student": StageSpec(
        "reasonkit.distill.prepare.run:PrepareConfig",
        "reasonkit.distill.prepare.run:prepare_student",
        inputs=("model",),
        models=("model",),
    ),
    "generate": StageSpec(
        "reasonkit.gen.config:GenerateConfig", "reasonkit.gen.stage:generate", inputs=("prompts",), models=("teacher",)
    ),
    "filter": StageSpec(
        "reasonkit.filters.config:FilterConfig", "reasonkit.filters.stage:run_filter", inputs=("traces",)
    ),
    "train": StageSpec(
        "reasonkit.distill.config:TrainConfig",
        "reasonkit.distill.train:train",
        inputs=("student", "data", "reward_model"),
        models=("student", "reward_model"),
    ),
    "eval": StageSpec(
        "reasonkit.distill.eval.config:EvalConfig",
        "reasonkit.distill.eval.run:run_eval",
        inputs=("data",),
        models=("model", "adapter"),
    ),
    "pairs": StageSpec(
        "reasonkit.judges.config:PairsConfig", "reasonkit.judges.pairs:run_pairs", inputs=("verdicts",)
    ),
    "judge": StageSpec(
        "reasonkit.judges.config:JudgeConfig", "reasonkit.judges.judge:run_judge", inputs=("input",), models=("judge",)
    ),
    "score": StageSpec(
        "reasonkit.judges.score.run:ScoreConfig",
        "reasonkit.judges.score.run:run_score",
        inputs=("input",),
        models=("model",),
    ),
    "critique": StageSpec(
        "reasonkit.judges.config:CritiqueConfig",
        "reasonkit.judges.critique:run_critique",
        inputs=("input",),
        models=("judge",),
    ),
    "label-steps": StageSpec(
        "reasonkit.judges.steps.config:LabelStepsConfig",
        "reasonkit.judges.steps.run:run_label_steps",
        inputs=("input",),
        models=("policy",),
    ),
}
