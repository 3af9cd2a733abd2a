"""``distill generate``: flags -> GenerateConfig -> gen.run.generate. Imports nothing heavy.

Precedence, lowest first: the dataclass defaults, a ``--config`` YAML (flat keys, or a
``generate:`` section of a recipe), the flags given on the command line, then ``--set key=value``.
Also runnable as ``python -m reasonkit.gen.command`` (vLLM's worker processes need a guarded
``__main__``, which this module has).
"""

from __future__ import annotations

import click

from reasonkit.gen.config import GenerateConfig
from reasonkit.options import Command, config_options, given
from reasonkit.sandbox.stage import sandbox_option


@click.command(
    name="generate", cls=Command, context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@config_options(GenerateConfig)
@click.option("--config", "config_file", type=click.Path(), default=None, help="YAML of GenerateConfig keys.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any config key (repeatable).")
@click.pass_context
@sandbox_option
def generate(ctx: click.Context, config_file: str | None, sets: tuple[str, ...], **flags) -> None:
    """Sample teacher reasoning traces into a resumable `traces` stage directory.

    \b
    distill generate --prompts problems.jsonl --teacher deepseek-ai/DeepSeek-R1-Distill-Qwen-7B \\
        --out traces/ --n 8 --max-tokens 16384

    With --tools, each row is a tool-use trajectory (the model's calls run between its turns):

    \b
    distill generate --prompts questions.jsonl --teacher MODEL --out trajectories/ \\
        --tools search,python --corpus passages.jsonl --max-turns 4
    """
    _run(ctx, config_file, sets, flags)


def _run(ctx: click.Context, config_file: str | None, sets: tuple[str, ...], flags: dict) -> None:
    from reasonkit.config import from_dict, load_yaml, override
    from reasonkit.errors import UserError
    from reasonkit.gen.run import generate as run_stage

    data: dict = {}
    if config_file:
        data = load_yaml(config_file)
        if isinstance(data.get("generate"), dict):
            data = data["generate"]
    for name, value in given(ctx, flags).items():  # a default must not override the YAML
        if isinstance(value, dict):
            data.setdefault(name, {}).update(value)
        else:
            data[name] = value
    missing = [k for k in ("prompts", "teacher", "out") if data.get(k) in (None, "")]
    # --set may supply them too
    given_by_set = {s.partition("=")[0].strip() for s in sets}
    missing = [k for k in missing if k not in given_by_set]
    if missing:
        raise UserError(f"missing {', '.join('--' + k for k in missing)} (or set {missing[0]}: in --config)")
    for key in ("prompts", "teacher", "out"):
        data.setdefault(key, "")  # filled by --set below; from_dict needs every required field
    config = override(from_dict(GenerateConfig, data, "generate"), list(sets), "generate")
    run_stage(config)


if __name__ == "__main__":
    generate(prog_name="distill generate")
