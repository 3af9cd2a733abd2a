"""``distill eval``: k samples per problem through the generate stage, verified, scored, recorded.

The protocol defaults are DeepSeek-R1's: temperature 0.6, top-p 0.95, the boxed-answer instruction,
and pass@1 averaged over k samples (the paper used k=64 for AIME 2024, 32,768 generated tokens).
Generation goes through :func:`reasonkit.gen.run.generate`, so an interrupted evaluation resumes.

Output directory::

    OUT/generations/   traces stage (resumable)
    OUT/samples/       eval samples stage: id, sample, pred, correct, completion_tokens, ...
    OUT/problems.parquet   per problem: correct count, majority answer, mean tokens
    OUT/summary.json   metrics + protocol (+ timing, kept apart so reruns compare equal)
    OUT/summary.md, OUT/pass_at_k.png
    OUT/.huggingface.yaml  the dataset card: load_dataset(OUT) reads problems; "samples", "generations" the others
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from reasonkit.distill.eval.config import EvalConfig
from reasonkit.engine import ENGINE_FIELDS
from reasonkit.errors import UserError
from reasonkit.gen.engine_args import output_engine_args

#: The tables of an eval directory, as its card lists them (the first is what load_dataset(OUT) reads).
CARD_TABLES = ("problems.parquet", "samples", "generations")


def run_eval(config: EvalConfig, *, log: Callable[[str], None] | None = None, backend=None) -> dict:
    """Evaluate and write OUT; returns the summary. ``backend``: a prebuilt gen backend to reuse."""
    from reasonkit.distill.eval.model import lora_backend, resolve_model
    from reasonkit.distill.eval.protocol import protocol, resolve_data_parallel
    from reasonkit.distill.eval.score import score, verify_samples
    from reasonkit.gen.run import generate
    from reasonkit.readers import ColumnMap
    from reasonkit.store import fingerprint_path, read_stage, write_card

    started = time.perf_counter()
    sandbox_mode = _before_any_work(config)
    out = Path(config.out)
    columns = ColumnMap(id=config.id_col, problem=config.problem_col, answer=config.answer_col)
    prompts = _problems(config, columns)
    contamination = _contamination(config, prompts) if config.decontam_against else None
    toolbox = None
    if config.tools:  # an unknown tool or a bad corpus fails here, before OUT is written (the index is cached)
        from reasonkit.gen.tools.trajectories import load_run_tools

        toolbox = load_run_tools(config)
    from reasonkit.distill.eval.fit import check_fit

    context = check_fit(config, prompts, toolbox)  # a first prompt that cannot fit: refused here, before OUT
    out.mkdir(parents=True, exist_ok=True)
    identities = _check_same_eval(config, out)  # before a merge or a sample: refuse other weights first
    write_card(out, layout=CARD_TABLES, stage="eval")  # says "incomplete" until problems.parquet is written
    model, adapter_mode = resolve_model(config, out)
    replicas = resolve_data_parallel(config)
    gen_config = generation_config(config, model, out, columns, replicas)
    owned = None
    if backend is None and adapter_mode == "vllm-lora":
        backend = owned = lora_backend(config, replicas)
    try:
        gen_manifest = generate(gen_config, backend=backend)
    finally:
        if owned is not None:
            owned.close()
    gen_seconds = time.perf_counter() - started
    traces = read_stage(out / "generations", kind="trajectories" if config.tools else "traces")
    context = (gen_manifest.get("backend_info") or {}).get("max_model_len") or context
    samples = verify_samples(traces, config, out / "samples", max_model_len=context)
    summary, problems = score(samples, traces, k=config.k, seed=config.seed)
    if config.tools:  # what the tools did: calls and turns per trajectory, the share of calls that failed
        from reasonkit.filters.trajectory import summary as trajectory_summary

        summary["tools"] = trajectory_summary(
            *(traces.column(c).to_pylist() for c in ("turns", "tool_calls", "tool_errors", "finish_reason"))
        )
    summary["protocol"] = protocol(
        config, identities, adapter_mode, gen_manifest, fingerprint_path(config.data, config.split), traces, replicas
    )
    if contamination is not None:
        summary["decontamination"] = contamination
    if sandbox_mode:  # how the model's programs ran (not in the protocol: it does not change a correct verdict)
        summary["sandbox"] = sandbox_mode
    summary["timing"] = {"total_s": round(time.perf_counter() - started, 2), "generate_s": round(gen_seconds, 2)}
    _write(config, out, summary, problems)
    return summary


def _before_any_work(config: EvalConfig) -> str | None:
    """What can be refused before the data is read: a path that is no adapter, a tracker not installed, a sandbox
    the verifier or the python tool needs and this machine cannot give. Returns the sandbox mode, or None."""
    if config.adapter is not None and not (Path(config.adapter) / "adapter_config.json").is_file():
        raise UserError(f"--adapter {config.adapter}: not a peft adapter directory (no adapter_config.json)")
    from reasonkit.distill.trackers import names, require

    require(names(config.report_to))  # a tracker not installed: one line naming its extra, before any sample
    if config.verifier == "code" or "python" in (config.tools or "").split(","):  # before the data is read
        from reasonkit.sandbox.stage import require_sandbox

        return require_sandbox(
            "distill eval" + (" --verifier code" if config.verifier == "code" else " --tools python")
        )
    return None


def _problems(config: EvalConfig, columns):
    """The eval's prompts, each with its gold: an answer, or (the code verifier) tests."""
    from reasonkit.readers import read_prompts

    prompts = read_prompts(config.data, columns, limit=config.limit, split=config.split)
    missing = [i for i, a in enumerate(prompts.column("answer").to_pylist()) if a is None or not str(a).strip()]
    if config.verifier == "code":  # the tests are the gold (distill/eval/code.py checks them)
        from reasonkit.distill.eval.code import tests_of

        tests_of(prompts, config.tests_col)
        missing = []
    if missing:
        raise UserError(
            f"{config.data}: row {missing[0]}: no gold answer in column {config.answer_col!r}; every eval problem "
            "needs one"
        )
    return prompts


def _write(config: EvalConfig, out: Path, summary: dict, problems) -> None:
    """OUT's last files (problems, card, summary in JSON and Markdown, the pass@k plot), and the trackers' copy."""
    from reasonkit.distill.eval.report import write_markdown, write_plot
    from reasonkit.distill.trackers import log_eval, names
    from reasonkit.store import write_card

    write_problems(problems, out / "problems.parquet")
    write_card(out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_markdown(summary, out / "summary.md", title=config.label or out.name)
    write_plot([(config.label or out.name, summary)], out / "pass_at_k.png")
    log_eval(names(config.report_to), summary, name=config.label or out.name, out=out)


def generation_config(config: EvalConfig, model: str, out: Path, columns, replicas: int):
    """The generate stage's config of an evaluation: eval's groups whole (gen/settings.py, engine.py), so it
    samples, renders and runs its engine exactly as ``distill generate`` with the same settings would."""
    from reasonkit.engine import EngineSettings
    from reasonkit.gen.run import GenerateConfig
    from reasonkit.gen.settings import BackendSettings, PromptSettings, SamplingSettings, ToolSettings, values_of

    groups = {}
    for group in (SamplingSettings, PromptSettings, ToolSettings, EngineSettings, BackendSettings):
        groups.update(values_of(config, group))
    groups["data_parallel"] = replicas if config.engine == "local" else 1  # "auto" resolved to this node's GPUs
    return GenerateConfig(
        prompts=config.data,
        teacher=model,
        out=str(out / "generations"),
        n=config.k,
        limit=config.limit,
        columns=columns,
        split=config.split,
        overwrite=config.overwrite,
        **groups,
    )


_RUN_ONLY = (
    "overwrite",
    "allow_overflow",
    "label",
    "concurrency",
    "batch_size",
    "base_url",
    "api_key_env",
    "extra",
    "data_parallel",
    "engine_args",
    "report_to",
    "request_timeout",
    "max_retries",
    "tool_workers",
    *ENGINE_FIELDS,
)


def _check_same_eval(config: EvalConfig, out: Path) -> dict:
    """An eval directory holds one protocol on one model: a rerun with other settings, or on other
    weights under the same path (a retrained model, a moved Hub revision), is refused.

    The evaluation keeps its own fingerprint: the config minus run-only settings, plus the content
    identities (identity.py) of the model and the adapter. Returns those identities, computed
    before any sample is generated, so the summary names the weights that made its samples.
    """
    from dataclasses import asdict

    from reasonkit.identity import model_identity, remember
    from reasonkit.store import fingerprint, is_stage_dir, load_manifest

    generations = out / "generations"
    if not config.overwrite and is_stage_dir(generations):  # a rerun reads no unchanged weight file again
        manifest = load_manifest(generations)
        if (manifest.get("config") or {}).get("teacher") == config.model:
            remember(config.model, manifest.get("teacher_files"))
    settings = {k: v for k, v in asdict(config).items() if k not in _RUN_ONLY and k != "out"}
    if config.corpus:  # the search tool's passages by content
        from reasonkit.store import fingerprint_path

        settings["corpus_fingerprint"] = fingerprint_path(config.corpus)
    settings["engine_args"] = output_engine_args(config.engine_args)  # only those that change samples
    settings["model_hash"] = model_identity(config.model, api=config.backend == "openai")
    settings["adapter_hash"] = model_identity(config.adapter) if config.adapter else None
    settings = json.loads(json.dumps(settings, default=str))  # tuples -> lists, as read back
    fp = fingerprint(settings)
    stamp = out / "eval_config.json"
    if stamp.is_file() and not config.overwrite:
        previous = json.loads(stamp.read_text())
        if previous.get("fingerprint") != fp:
            before = previous.get("settings", {})
            for what, key in (("model", "model_hash"), ("adapter", "adapter_hash")):
                if before.get(what) == settings[what] and before.get(key) != settings[key]:
                    old = before.get(key) or "unrecorded (evaluated before reasonkit recorded content)"
                    raise UserError(
                        f"{out} was evaluated on {what} {settings[what]} with content {old}, now "
                        f"{settings[key]}; pass --overwrite to evaluate it again, or choose another --out"
                    )
            changed = sorted(k for k in settings if before.get(k) != settings[k])
            raise UserError(
                f"{out}: holds an evaluation with other settings ({', '.join(changed)}); "
                "pass --overwrite or choose another --out"
            )
    if config.overwrite and (out / "generations").exists():
        import shutil

        shutil.rmtree(out / "generations")
    stamp.write_text(json.dumps({"fingerprint": fp, "settings": settings}, indent=2, default=str))
    return {"model_hash": settings["model_hash"], "adapter_hash": settings["adapter_hash"]}


def _contamination(config: EvalConfig, prompts) -> dict:
    """Eval problems whose n-grams appear in the given training data (as the filter checks)."""
    from reasonkit.filters.decontam import EvalSet, contaminated_by, problem_texts
    from reasonkit.readers import read_table

    eval_problems = problem_texts(prompts)
    found: dict[str, list[str]] = {}
    for path in config.decontam_against:
        table, where = read_table(path)
        if "messages" not in table.column_names and "problem" not in table.column_names:
            if "prompt" in table.column_names:  # a prefs table: its prompt holds the problem
                table = table.rename_columns(["messages" if c == "prompt" else c for c in table.column_names])
            else:
                raise UserError(f"{where}: no problem, messages or prompt column to check eval problems against")
        if "messages" not in table.column_names:
            import pyarrow as pa

            table = table.append_column("messages", pa.array([[] for _ in range(table.num_rows)]))
        train = EvalSet.from_problems(str(path), problem_texts(table), config.ngram)
        ids = prompts.column("id").to_pylist()
        found[str(path)] = [i for i, p in zip(ids, eval_problems) if contaminated_by(p, [train])]
    return {"ngram": config.ngram, "overlapping_ids": found, "n_overlapping": sum(len(v) for v in found.values())}


def write_problems(problems: list[dict], path: Path) -> None:
    """OUT/problems.parquet: each problem's counts (what compare and the difficulty filter read), whole or not at
    all (written beside it, then renamed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(problems) if problems else pa.table({})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


def summary_equal(a: dict, b: dict) -> bool:
    """Two summaries agree on everything but timing and where the samples were made (the protocol's
    replicas and hardware): what "reproduces" means here."""
    from reasonkit.distill.eval.protocol import HOW_IT_RAN

    def strip(s: dict) -> dict:
        kept = {k: v for k, v in s.items() if k != "timing"}
        if isinstance(kept.get("protocol"), dict):
            kept["protocol"] = {k: v for k, v in kept["protocol"].items() if k not in HOW_IT_RAN}
        return kept

    return strip(a) == strip(b)
