"""``distill pairs``, ``distill judge`` and ``distill critique``: flags -> config -> one library call.

Nothing heavy is imported here: pyarrow, the backends and the stage code load inside the callbacks.
"""

from __future__ import annotations

import json

import click

_CTX = {"help_option_names": ["-h", "--help"], "show_default": True}


def _run(kind: str, flags: dict, sets: tuple[str, ...]) -> None:
    from reasonkit.config import from_dict, override
    from reasonkit.errors import UserError
    from reasonkit.judges import config as configs

    cls, module, function = {
        "pairs": (configs.PairsConfig, "pairs", "run_pairs"),
        "judge": (configs.JudgeConfig, "judge", "run_judge"),
        "critique": (configs.CritiqueConfig, "critique", "run_critique"),
    }[kind]
    try:
        data = {k: v for k, v in flags.items() if v is not None}
        cfg = override(from_dict(cls, data, kind), list(sets), kind)
        import importlib

        report = getattr(importlib.import_module(f"reasonkit.judges.{module}"), function)(cfg)
    except UserError as e:
        from reasonkit.errors import UsageFailure

        raise UsageFailure(str(e)) from None
    click.echo(json.dumps(report, indent=2))


def _common(f):
    """Options shared by every stage here."""
    for option in reversed([
        click.option("--out", required=True, type=click.Path(file_okay=False), help="Output stage directory; rerunning resumes it."),
        click.option("--seed", type=int, default=0, help="Seed; every random choice derives from (seed, id)."),
        click.option("--overwrite", is_flag=True, default=None, help="Replace an --out written with other settings."),
        click.option("--allow-incomplete", is_flag=True, default=None, help="Read an input stage that has not finished."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any config key (repeatable)."),
    ]):
        f = option(f)
    return f


def _model(f):
    """Options that choose and drive the judge model (judge, critique)."""
    for option in reversed([
        click.option("--judge", required=True, help="Judge model: a directory, a Hub id, or the served name (openai)."),
        click.option("--backend", type=click.Choice(["vllm", "openai", "hf"]), default="vllm"),
        click.option("--base-url", default=None, help="openai: server URL, e.g. http://127.0.0.1:8000/v1"),
        click.option("--api-key-env", default=None, help="openai: environment variable holding the API key. [default: OPENAI_API_KEY]"),
        click.option("--concurrency", type=int, default=None, help="openai: requests in flight. [default: 64]"),
        click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None, help="[default: auto]"),
        click.option("--max-model-len", type=int, default=None),
        click.option("--chat-template", type=click.Path(), default=None, help="Jinja file overriding the tokenizer's chat template."),
        click.option("--temperature", type=float, default=None),
        click.option("--top-p", type=float, default=None),
        click.option("--max-tokens", type=int, default=None, help="Reply token budget per call."),
        click.option("--shard-size", type=int, default=None, help="Prompts (judge) or rows (critique) per committed shard. [default: 256]"),
        click.option("--response-only", "include_reasoning", flag_value=False, default=None,
                     help="Show the model the response after </think> only, not the reasoning."),
    ]):
        f = option(f)
    return f


@click.command("pairs", context_settings=_CTX)
@click.argument("verdicts", type=click.Path())
@click.option("--strategy", type=click.Choice(["correct-vs-incorrect", "short-vs-long"]), default="correct-vs-incorrect")
@click.option("--chosen", type=click.Choice(["shortest", "random"]), default="shortest", help="correct-vs-incorrect: which correct sample.")
@click.option("--rejected", type=click.Choice(["longest", "random"]), default="longest", help="correct-vs-incorrect: which incorrect sample.")
@click.option("--max-pairs-per-prompt", type=int, default=1)
@_common
def pairs(sets, **flags) -> None:
    """Build DPO pairs from verified and rejected samples (no model).

    VERDICTS is a `distill filter` output: its kept rows and its rejected/ rows are both read.
    Writes a prefs stage directory (TRL's conversational preference format) and report.json,
    which counts the prompts that got no pair and why.

    \b
    distill pairs runs/verified --out runs/pairs --strategy short-vs-long
    """
    _run("pairs", flags, sets)


@click.command("judge", context_settings=_CTX)
@click.argument("input", type=click.Path())
@_model
@click.option("--mode", type=click.Choice(["pointwise", "pairwise"]), default="pointwise")
@click.option("--rubric", type=click.Path(), default=None, help="Text file of grading criteria. [default: judges/templates/rubric.txt]")
@click.option("--min-margin", type=float, default=None, help="pointwise: least score gap of a pair. [default: 1.0]")
@click.option("--max-pairs-per-prompt", type=int, default=None, help="[default: 1]")
@click.option("--no-reference", "reference", flag_value=False, default=None, help="Do not show the judge the gold answer.")
@_common
def judge(sets, **flags) -> None:
    """LLM-as-judge preferences (pointwise scores or position-swapped pairwise verdicts).

    INPUT is a traces, verdicts, sft or prefs stage directory. Writes a prefs stage directory,
    record/ (every judge reply, its parsed score or verdict or the reason it has none, tokens)
    and report.json.

    \b
    distill judge runs/traces --out runs/judged --judge Qwen/Qwen2.5-7B-Instruct --mode pairwise
    """
    _run("judge", flags, sets)


@click.command("critique", context_settings=_CTX)
@click.argument("input", type=click.Path())
@_model
@click.option("--constitution", type=click.Path(), default=None, help="Constitution YAML. [default: judges/constitution.yaml]")
@click.option("--rounds", type=int, default=None, help="Critique-revision rounds per row. [default: 1]")
@_common
def critique(sets, **flags) -> None:
    """Constitutional critique and revision: prefs (revision over response), sft and the full record.

    INPUT is a traces, verdicts or sft stage directory. Writes OUT (prefs), OUT/sft, OUT/record
    (init_prompt, init_response, critic_prompt, critic_response, revision_prompt,
    revision_response, principle) and report.json.

    \b
    distill critique runs/verified --out runs/critique --judge MODEL --rounds 2
    """
    _run("critique", flags, sets)
