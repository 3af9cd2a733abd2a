"""``distill pairs``, ``distill judge`` and ``distill critique``: flags -> config -> one library call.

Nothing heavy is imported here: pyarrow, the backends and the stage code load inside the callbacks.
"""

from __future__ import annotations

import json

import click

from reasonkit.judges.config import NOT_FLAGS, CritiqueConfig, JudgeConfig, PairsConfig
from reasonkit.options import Command, config_options, given

#: every judges command's context: -h, and the defaults shown
CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}


def _run(kind: str, ctx: click.Context, flags: dict, sets: tuple[str, ...]) -> None:
    import importlib

    from reasonkit.config import from_dict, override

    cls, module, function = {
        "pairs": (PairsConfig, "pairs", "run_pairs"),
        "judge": (JudgeConfig, "judge", "run_judge"),
        "critique": (CritiqueConfig, "critique", "run_critique"),
    }[kind]
    cfg = override(from_dict(cls, given(ctx, flags), kind), list(sets), kind)
    report = getattr(importlib.import_module(f"reasonkit.judges.{module}"), function)(cfg)
    click.echo(json.dumps(report, indent=2))


_SET = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any config key (repeatable).")


@click.command("pairs", cls=Command, context_settings=CONTEXT)
@click.argument("verdicts", type=click.Path())
@config_options(PairsConfig, required=("out",))
@_SET
@click.pass_context
def pairs(ctx, sets, **flags) -> None:
    """Build DPO pairs from verified and rejected samples (no model).

    VERDICTS is a `distill filter` output: its kept rows and its rejected/ rows are both read.
    Writes a prefs stage directory (TRL's conversational preference format) and report.json,
    which counts the prompts that got no pair and why.

    \b
    distill pairs runs/verified --out runs/pairs --strategy short-vs-long
    """
    _run("pairs", ctx, flags, sets)


@click.command("judge", cls=Command, context_settings=CONTEXT)
@click.argument("input", type=click.Path())
@config_options(JudgeConfig, exclude=NOT_FLAGS, required=("judge", "out"))
@_SET
@click.pass_context
def judge(ctx, sets, **flags) -> None:
    """LLM-as-judge preferences (pointwise scores or position-swapped pairwise verdicts).

    INPUT is a traces, verdicts, sft or prefs stage directory. Writes a prefs stage directory,
    record/ (every judge reply, its parsed score or verdict or the reason it has none, tokens)
    and report.json.

    \b
    distill judge runs/traces --out runs/judged --judge Qwen/Qwen2.5-7B-Instruct --mode pairwise
    """
    _run("judge", ctx, flags, sets)


@click.command("critique", cls=Command, context_settings=CONTEXT)
@click.argument("input", type=click.Path())
@config_options(CritiqueConfig, exclude=NOT_FLAGS, required=("judge", "out"))
@_SET
@click.pass_context
def critique(ctx, sets, **flags) -> None:
    """Constitutional critique and revision: prefs (revision over response), sft and the full record.

    INPUT is a traces, verdicts or sft stage directory. Writes OUT (prefs), OUT/sft, OUT/record
    (init_prompt, init_response, critic_prompt, critic_response, revision_prompt,
    revision_response, principle) and report.json.

    \b
    distill critique runs/verified --out runs/critique --judge MODEL --rounds 2
    """
    _run("critique", ctx, flags, sets)
