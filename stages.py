"""The one table of what ``distill`` offers: each stage (a recipe may use it) and each command (``distill NAME``).

cli.py lists and loads commands from it and the recipe runner (recipes/runner.py) runs stages from it, so a stage
is added in one place. Everything is named by import path ("module:attr"), never imported here: the spine knows
no stage folder (pyproject's layers), and ``distill --help`` lists the table without importing any stage module.
Config classes live in light modules (no torch, vLLM or transformers at import), so ``distill validate`` checks a
whole recipe without loading any model.

A stage's run function has one shape, ``run(config, *, log=None) -> report``: ``log`` takes one line of progress
(None: silent, as the recipe runner runs them; a command passes its echo), the report is what the runner records.

A stage folder holds its ``config.py``, ``run.py`` and ``command.py`` (gen/, filters/, judges/score/, judges/steps/,
distill/eval/, distill/prepare/), with two exceptions by choice: train's run is distill/train.py, because distill/
also holds the eval, prepare, rl, reward and onpolicy families and the name says which one it runs; and judges/'
pairs, judge and critique share one config.py and one command.py, each run in its own module (pairs.py, judge.py,
critique.py).

>>> sorted(n for n, s in REGISTRY.items() if s.run and not s.command)  # stages only a recipe runs
['student', 'synth']
>>> STAGES["generate"].inputs, "push" in STAGES, "push" in COMMANDS
(('prompts',), False, True)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class StageSpec:
    config: str | None = None  # "module:Class", a frozen dataclass (a recipe stage)
    run: str | None = None  # "module:function", taking that dataclass: run(config, *, log=None) -> report
    inputs: tuple[str, ...] = ()  # config fields that name existing paths (or ${step} references)
    out_field: str = "out"  # the field the runner points at OUT/<step name>
    models: tuple[str, ...] = ()  # config fields that name a model: fingerprinted by content (identity.py)
    command: str | None = None  # "module:attr", a click command: `distill NAME`
    help: str = ""  # the line `distill --help` shows for the command

    def config_class(self) -> type:
        return load(self.config)

    def run_function(self):
        return load(self.run)


def load(target: str):
    """The object a "module:attr" path names (importing its module)."""
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def _command(command: str, help: str) -> StageSpec:
    """A command that is no recipe stage."""
    return StageSpec(command=command, help=help)


# In `distill --help`'s order; the stages only a recipe runs (synth, student) last.
REGISTRY: dict[str, StageSpec] = {
    "generate": StageSpec(
        "reasonkit.gen.config:GenerateConfig",
        "reasonkit.gen.run:generate",
        inputs=("prompts",),
        models=("teacher",),
        command="reasonkit.gen.command:generate",
        help="Sample teacher reasoning traces (vLLM, OpenAI-compatible, transformers).",
    ),
    "filter": StageSpec(
        "reasonkit.filters.config:FilterConfig",
        "reasonkit.filters.run:run_filter",
        inputs=("traces",),
        command="reasonkit.filters.command:filter",
        help="Verify, language-check, dedup and decontaminate traces.",
    ),
    "pairs": StageSpec(
        "reasonkit.judges.config:PairsConfig",
        "reasonkit.judges.pairs:run_pairs",
        inputs=("verdicts",),
        command="reasonkit.judges.command:pairs",
        help="Build DPO pairs from verified and rejected samples.",
    ),
    "judge": StageSpec(
        "reasonkit.judges.config:JudgeConfig",
        "reasonkit.judges.judge:run_judge",
        inputs=("input",),
        models=("judge",),
        command="reasonkit.judges.command:judge",
        help="LLM-as-judge preferences (pointwise or pairwise).",
    ),
    "critique": StageSpec(
        "reasonkit.judges.config:CritiqueConfig",
        "reasonkit.judges.critique:run_critique",
        inputs=("input",),
        models=("judge",),
        command="reasonkit.judges.command:critique",
        help="Constitutional critique and revision (RLAIF).",
    ),
    "label-steps": StageSpec(
        "reasonkit.judges.steps.config:LabelStepsConfig",
        "reasonkit.judges.steps.run:run_label_steps",
        inputs=("input",),
        models=("policy",),
        command="reasonkit.judges.steps.command:label_steps",
        help="Math-Shepherd step labels from policy rollouts, and Step-DPO pairs.",
    ),
    "score": StageSpec(
        "reasonkit.judges.score.config:ScoreConfig",
        "reasonkit.judges.score.run:run_score",
        inputs=("input",),
        models=("model",),
        command="reasonkit.judges.score.command:score",
        help="Score traces with a reward model (or a PRM, per step).",
    ),
    "prepare-student": StageSpec(
        "reasonkit.distill.prepare.config:PrepareConfig",
        "reasonkit.distill.prepare.run:prepare_student",
        inputs=("model",),
        models=("model",),
        command="reasonkit.distill.prepare.command:prepare_student_command",
        help="Longer context, RoPE, a marked chat template and EOS = turn end for a base model.",
    ),
    "train": StageSpec(
        "reasonkit.distill.config:TrainConfig",
        "reasonkit.distill.train:train",
        inputs=("student", "data", "reward_model"),
        models=("student", "reward_model", "teacher"),
        command="reasonkit.distill.command:train",
        help="SFT, DPO, GRPO, reward and process reward models, on-policy distillation (TRL + peft).",
    ),
    "eval": StageSpec(
        "reasonkit.distill.eval.config:EvalConfig",
        "reasonkit.distill.eval.run:run_eval",
        inputs=("data",),
        models=("model", "adapter"),
        command="reasonkit.distill.eval.command:eval_",
        help="pass@1 over k samples, cons@k, pass@k; protocol recorded.",
    ),
    "push": _command("reasonkit.hub.push:push_command", "Publish a stage directory to the Hugging Face Hub."),
    "run": _command("reasonkit.recipes.command:run", "Run a whole recipe YAML, resuming finished stages."),
    "validate": _command("reasonkit.recipes.command:validate", "Check a recipe YAML without loading any model."),
    "quickstart": _command(
        "reasonkit.recipes.command:quickstart", "The whole loop on this CPU with the embedded teacher."
    ),
    "inspect": _command(
        "reasonkit.inspect_stage:inspect", "Show a stage directory: manifest, schema, counts, a sample row."
    ),
    "view": _command(
        "reasonkit.view.command:view", "One offline HTML page of a stage directory or a run: funnel, rows, evals."
    ),
    "make-teacher": _command(
        "reasonkit.recipes.teachers.command:make_teacher_command", "Train the embedded tiny teacher from scratch."
    ),
    "synth": StageSpec("reasonkit.recipes.tasks.synth:SynthConfig", "reasonkit.recipes.tasks.synth:run_synth"),
    "student": StageSpec(
        "reasonkit.recipes.teachers.student:StudentConfig",
        "reasonkit.recipes.teachers.student:init_student",
        inputs=("tokenizer",),
        models=("tokenizer",),
    ),
}

#: The recipe stages (recipes/runner.py) and the commands (cli.py): two views of the one table above.
STAGES: dict[str, StageSpec] = {name: spec for name, spec in REGISTRY.items() if spec.run}
COMMANDS: dict[str, StageSpec] = {name: spec for name, spec in REGISTRY.items() if spec.command}
