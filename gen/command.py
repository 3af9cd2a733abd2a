"""``distill generate``: flags -> GenerateConfig -> gen.stage.generate. Imports nothing heavy.

Precedence, lowest first: the dataclass defaults, a ``--config`` YAML (flat keys, or a
``generate:`` section of a recipe), the flags given on the command line, then ``--set key=value``.
Also runnable as ``python -m reasonkit.gen.command`` (vLLM's worker processes need a guarded
``__main__``, which this module has).
"""

from __future__ import annotations

import click

from reasonkit.engine import engine_options
from reasonkit.sandbox.stage import sandbox_option

#: flag name -> key under GenerateConfig.columns
_COLUMN_FLAGS = {"id_col": "id", "problem_col": "problem", "answer_col": "answer",
                 "messages_col": "messages", "source_col": "source"}


@click.command(name="generate", context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("--prompts", help="Prompts: .parquet/.jsonl/.csv file, stage directory or Hub dataset id.")
@click.option("--teacher", help="Model directory or Hub id (openai: the served model name).")
@click.option("--out", help="Output stage directory (traces); rerunning the same command resumes it.")
@click.option("--backend", type=click.Choice(["vllm", "openai", "hf"]), default="vllm")
@click.option("--n", type=int, default=8, help="Samples per prompt.")
@click.option("--temperature", type=float, default=0.6)
@click.option("--top-p", type=float, default=0.95)
@click.option("--max-tokens", type=int, default=32768, help="Completion token budget per sample.")
@click.option("--seed", type=int, default=0, help="Run seed; each prompt's seed derives from (seed, id).")
@click.option("--system", default=None, help="System prompt (replaces the prompt's own).")
@click.option("--instruction", default=None,
              help="Appended to problem-text prompts after a blank line. [default: R1's boxed-answer instruction; '' for none]")
@click.option("--prefill-think/--no-prefill-think", default=False, help="Start the assistant turn with '<think>\\n' (R1's advice).")
@click.option("--chat-template", type=click.Path(), default=None, help="Jinja file overriding the tokenizer's chat template.")
@click.option("--limit", type=int, default=None, help="Only the first N prompts.")
@click.option("--shard-size", type=int, default=1000, help="Prompts per committed shard.")
@click.option("--base-url", default=None, help="openai: server URL, e.g. http://127.0.0.1:8000/v1")
@click.option("--api-key-env", default="OPENAI_API_KEY", help="openai: environment variable holding the API key.")
@click.option("--concurrency", type=int, default=64, help="openai: prompts in flight.")
@click.option("--tensor-parallel", type=int, default=1, help="vllm: GPUs per engine.")
@click.option("--data-parallel", type=int, default=1, help="vllm or hf, local engine: engine replicas on this node, each on its own GPUs.")
@engine_options
@click.option("--gpu-memory-utilization", type=float, default=0.9)
@click.option("--max-model-len", type=int, default=None)
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default="auto")
@click.option("--batch-size", type=int, default=8, help="hf: prompts per generate call.")
@click.option("--id-col", default=None, help="Input column holding ids. [default: id]")
@click.option("--problem-col", default=None, help="Input column holding problem text. [default: problem]")
@click.option("--messages-col", default=None, help="Input column holding chat messages. [default: messages]")
@click.option("--answer-col", default=None, help="Input column holding reference answers. [default: answer]")
@click.option("--source-col", default=None, help="Input column naming each prompt's source. [default: source]")
@click.option("--tools", default=None,
              help="Comma-separated tools (search,python): rows become multi-turn trajectories (`trajectories` table).")
@click.option("--corpus", type=click.Path(), default=None, help="search tool: passages, JSONL or Parquet with id and contents.")
@click.option("--max-turns", type=int, default=8, help="tools: assistant turns per trajectory.")
@click.option("--search-k", type=int, default=3, help="search tool: passages per observation.")
@click.option("--tool-timeout", type=float, default=10.0, help="tools: seconds per python call.")
@click.option("--tool-workers", type=int, default=8, help="tools: calls running at once.")
@click.option("--split", default=None, help="Split of a Hugging Face dataset (default: its only split); or write ID:SPLIT.")
@click.option("--overwrite", is_flag=True, help="Replace an --out written with other settings.")
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
    from reasonkit.errors import UserError

    try:
        _run(ctx, config_file, sets, flags)
    except UserError as e:
        from reasonkit.errors import UsageFailure

        raise UsageFailure(str(e)) from None


def _run(ctx: click.Context, config_file: str | None, sets: tuple[str, ...], flags: dict) -> None:
    from reasonkit.config import from_dict, load_yaml, override
    from reasonkit.errors import UserError
    from reasonkit.gen.stage import GenerateConfig
    from reasonkit.gen.stage import generate as run_stage

    data: dict = {}
    if config_file:
        data = load_yaml(config_file)
        if isinstance(data.get("generate"), dict):
            data = data["generate"]
    for name, value in flags.items():
        if ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT:
            continue  # a default must not override the YAML
        if name in _COLUMN_FLAGS:
            data.setdefault("columns", {})[_COLUMN_FLAGS[name]] = value
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
