"""``distill prepare-student``: flags -> PrepareConfig -> :func:`reasonkit.distill.prepare.run.prepare_student`.

Imports nothing heavy at module level (``distill --help`` stays instant).
"""

from __future__ import annotations

import click


@click.command(name="prepare-student", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("model")
@click.option("--out", required=True, help="The new model directory (weights hard-linked, never changed).")
@click.option("--max-positions", type=int, help="New max_position_embeddings (open-r1: 32768 for Qwen2.5-Math).")
@click.option("--rope-theta", type=float, help="New RoPE base (open-r1: 300000 with 32768 positions).")
@click.option("--rope-scaling", help="RoPE scaling TYPE:FACTOR, e.g. yarn:4 (the original length is the old positions).")
@click.option("--template", default="auto", show_default=True,
              help="Chat template with {% generation %} markers: auto (from the vocabulary), chatml, llama3, keep (the "
                   "model's own, with its EOS), or a .jinja file.")
@click.option("--eos", help="The turn-end token to make EOS [the family's: <|im_end|>, <|eot_id|>].")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it holds something else.")
def prepare_student_command(model: str, **flags) -> None:
    """Prepare MODEL as a student: longer context, RoPE, a marked chat template, EOS = turn end.

    \b
    distill prepare-student Qwen/Qwen2.5-Math-1.5B --out students/qwen-math-32k \\
        --max-positions 32768 --rope-theta 300000 --template chatml
    distill train --method sft --student students/qwen-math-32k --data runs/sft --out runs/student
    """
    from reasonkit.config import from_dict
    from reasonkit.distill.prepare.run import PrepareConfig, prepare_student

    cfg = from_dict(PrepareConfig, {"model": model, **{k: v for k, v in flags.items() if v is not None}}, "prepare-student")
    result = prepare_student(cfg)
    for key in ("max_position_embeddings", "rope_theta", "rope_scaling", "eos", "pad", "generation_eos_token_id"):
        if key in result:
            before, after = result[key]
            click.echo(f"{key}: {before} -> {after}", err=True)
    click.echo(f"template: {result['template']} with {{% generation %}} markers; {result['linked_weights']} weight file(s) linked", err=True)
    click.echo(f"{result['model']}: train with --student {result['model']}", err=True)
