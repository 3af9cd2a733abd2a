"""``distill prepare-student``: flags -> PrepareConfig -> :func:`reasonkit.distill.prepare.run.prepare_student`.

Imports nothing heavy at module level (``distill --help`` stays instant).
"""

from __future__ import annotations

import click

from reasonkit.distill.prepare.config import PrepareConfig
from reasonkit.options import Command, config_options, given


@click.command(
    name="prepare-student",
    cls=Command,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("model")
@config_options(PrepareConfig, required=("out",))
@click.pass_context
def prepare_student_command(ctx: click.Context, model: str, **flags) -> None:
    """Prepare MODEL as a student: longer context, RoPE, a marked chat template, EOS = turn end.

    \b
    distill prepare-student Qwen/Qwen2.5-Math-1.5B --out students/qwen-math-32k \\
        --max-positions 32768 --rope-theta 300000 --template chatml
    distill train --method sft --student students/qwen-math-32k --data runs/sft --out runs/student
    """
    from reasonkit.config import from_dict
    from reasonkit.distill.prepare.run import prepare_student

    cfg = from_dict(PrepareConfig, {"model": model, **given(ctx, flags)}, "prepare-student")
    result = prepare_student(cfg)
    for key in ("max_position_embeddings", "rope_theta", "rope_scaling", "eos", "pad", "generation_eos_token_id"):
        if key in result:
            before, after = result[key]
            click.echo(f"{key}: {before} -> {after}", err=True)
    click.echo(
        f"template: {result['template']} with {{% generation %}} markers; {result['linked_weights']} weight file(s) "
        "linked",
        err=True,
    )
    click.echo(f"{result['model']}: train with --student {result['model']}", err=True)
