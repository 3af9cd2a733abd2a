"""The ``distill`` command line: a click group whose subcommands load only when run.

Each stage owns its command next to its code (``reasonkit.gen.command:generate`` and so on); this
file only maps names to those places. Nothing heavy is imported until a command actually runs, so
``distill --help`` is instant (tests/test_cli.py holds it under one second).

Bad input surfaces as :class:`reasonkit.errors.UserError`: one line on stderr, exit status 2,
never a traceback.
"""

from __future__ import annotations

import importlib

import click

from reasonkit import __version__
from reasonkit.options import ExitOnUserError

# name -> (import path of a click command, one-line help shown by `distill --help`).
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": (
        "reasonkit.gen.command:generate",
        "Sample teacher reasoning traces (vLLM, OpenAI-compatible, transformers).",
    ),
    "filter": ("reasonkit.filters.command:filter", "Verify, language-check, dedup and decontaminate traces."),
    "pairs": ("reasonkit.judges.command:pairs", "Build DPO pairs from verified and rejected samples."),
    "judge": ("reasonkit.judges.command:judge", "LLM-as-judge preferences (pointwise or pairwise)."),
    "critique": ("reasonkit.judges.command:critique", "Constitutional critique and revision (RLAIF)."),
    "label-steps": (
        "reasonkit.judges.steps.command:label_steps",
        "Math-Shepherd step labels from policy rollouts, and Step-DPO pairs.",
    ),
    "score": ("reasonkit.judges.score.command:score", "Score traces with a reward model (or a PRM, per step)."),
    "prepare-student": (
        "reasonkit.distill.prepare.command:prepare_student_command",
        "Longer context, RoPE, a marked chat template and EOS = turn end for a base model.",
    ),
    "train": ("reasonkit.distill.command:train", "SFT, DPO, GRPO, reward and process reward models (TRL + peft)."),
    "eval": ("reasonkit.distill.eval.command:eval_", "pass@1 over k samples, cons@k, pass@k; protocol recorded."),
    "push": ("reasonkit.hub.push:push_command", "Publish a stage directory to the Hugging Face Hub."),
    "run": ("reasonkit.recipes.command:run", "Run a whole recipe YAML, resuming finished stages."),
    "validate": ("reasonkit.recipes.command:validate", "Check a recipe YAML without loading any model."),
    "quickstart": ("reasonkit.recipes.command:quickstart", "The whole loop on this CPU with the embedded teacher."),
    "inspect": ("reasonkit.inspect_stage:inspect", "Show a stage directory: manifest, schema, counts, a sample row."),
    "view": (
        "reasonkit.view.command:view",
        "One offline HTML page of a stage directory or a run: funnel, rows, evals.",
    ),
    "make-teacher": (
        "reasonkit.recipes.teachers.command:make_teacher_command",
        "Train the embedded tiny teacher from scratch.",
    ),
}


class LazyGroup(ExitOnUserError, click.Group):
    """A group that imports a subcommand's module only when that subcommand is invoked; a UserError from
    any of them is one line and exit 2 (options.ExitOnUserError)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, help_text = COMMANDS[name]
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        command.short_help = command.short_help or help_text
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing uses the table above, so `distill --help` imports no stage module at all.
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_text) for name, (_, help_text) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="distill")
def cli() -> None:
    """reasonkit: distil reasoning models, one verified stage at a time.

    \b
    generate -> filter -> pairs / critique -> train -> eval -> push
    Every stage reads and writes Parquet stage directories and resumes after a crash.
    """


def main() -> None:
    cli(prog_name="distill")


if __name__ == "__main__":
    main()
