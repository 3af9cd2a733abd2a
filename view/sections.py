"""One section of the page per stage directory, evaluation or training run (collect.py finds them).

A section holds what its stage recorded (a filter's funnel, an evaluation's scores per problem, a training run's
figures and plots) and names the tables of rows it shows; nothing here recomputes a stage's figure except the
per-step reward means of GRPO rollouts, which are over every row, not the sample shown.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reasonkit.view import rows as R
from reasonkit.view.records import VIEWS, Collected, Options, images, read_json
from reasonkit.view.shards import Shards

#: Training figures shown as they are in report.json (the rest of it is on disk for whoever wants it).
_TRAIN_FIGURES = (
    "method",
    "student",
    "data",
    "rows",
    "steps",
    "epochs",
    "loss_first",
    "loss_final",
    "tokens_per_s",
    "train_runtime_s",
    "reward_accuracy",
    "reward_margin",
    "trainable_parameters",
    "learning_rate",
)
_GRPO_FIGURES = (
    "reward_first",
    "reward_final",
    "frac_reward_zero_std",
    "kl_final",
    "clip_ratio",
    "completion_length_first",
    "completion_length_final",
    "truncated_share",
    "num_generations",
    "beta",
    "loss_type",
    "scale_rewards",
)
#: What an evaluation's protocol says about how its samples were drawn.
_PROTOCOL = (
    "model",
    "adapter",
    "backend",
    "backend_version",
    "dtype",
    "k",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "seeds",
    "instruction",
    "data",
    "gen_config",
)


def stage(d: Path, name: str, options: Options, out: Collected, *, shown_elsewhere: str | None = None) -> dict | None:
    """A stage directory: its table (a filter's kept and dropped rows as one), its funnel, its config."""
    from reasonkit.store import load_manifest

    manifest = load_manifest(d)
    _remember_gen_config(manifest, out)
    kind = manifest.get("kind")
    section = {
        "name": name,
        "type": "stage",
        "stage": manifest.get("stage"),
        "kind": kind,
        "complete": bool(manifest.get("complete")),
        "rows": manifest.get("rows", 0),
        "config": manifest.get("config"),
        "table": None,
        "funnel": None,
    }
    if shown_elsewhere:
        section["shown_in"] = shown_elsewhere  # the filter that read them: its table holds them with verdicts
        return section
    dirs = [d]
    if (d / "rejected" / "_manifest.json").is_file():  # a filter: the kept rows and the dropped ones, one table
        dirs.append(d / "rejected")
        section["rows"] += load_manifest(d / "rejected").get("rows", 0)
    report = read_json(d / "report.json") or {}
    if "funnel" in report:
        section["funnel"] = {k: report.get(k) for k in ("rows_in", "rows_out", "funnel", "per_source", "verified")}
    if manifest.get("stage") == "critique" and (d / "record" / "_manifest.json").is_file():
        record = Shards.of([d / "record"])
        section["critique"] = add_shards(out, f"{name}/record", record, "critique", options)
    shards = Shards.of(dirs)
    view = _view(shards.names(), kind)
    if view:
        section["table"] = add_shards(out, name, shards, view, options)
    return section


def _view(names: list[str], kind: str | None) -> str | None:
    if kind in VIEWS:
        return VIEWS[kind]
    if {"init_response", "revision_response"} <= set(names):
        return "critique"
    return "rows" if names else None


def evaluation(d: Path, name: str, options: Options, out: Collected) -> dict:
    """An evaluation: its scores, each problem with its k samples' verdicts and the cons@k vote, their texts."""
    summary = read_json(d / "summary.json") or {}
    protocol = summary.get("protocol") or {}
    scores = {k: v for k, v in summary.items() if k.startswith(("pass@", "cons@")) and not isinstance(v, dict)}
    for key in ("k", "n_problems", "n_samples", "counts", "mean_completion_tokens", "no_answer_rate"):
        if key in summary:
            scores[key] = summary[key]
    if protocol.get("gen_config"):  # the samples' gen_config names the eval's sampling
        out.data["gen_configs"][protocol["gen_config"]] = {k: protocol.get(k) for k in _PROTOCOL[:10] if k in protocol}
    generations = _maybe_table(d / "generations")
    samples = _maybe_table(d / "samples")
    problems = _problems(d / "problems.parquet", samples, generations)
    section = {
        "name": name,
        "type": "eval",
        "scores": scores,
        "protocol": {k: protocol.get(k) for k in _PROTOCOL if k in protocol},
        "problems": problems,
        "table": None,
        "plots": images(d, ["pass_at_k.png"]),
    }
    if generations is not None and generations.num_rows:
        if samples is not None:  # each text with its verdict
            generations = with_verdicts(generations, samples)
        section["table"] = add_table(out, name, generations, "trace", options)
    return section


def with_verdicts(generations: pa.Table, samples: pa.Table) -> pa.Table:
    """The eval's generations with each sample's verdict (Arrow joins no list columns: matched by key here)."""
    keys = list(zip(samples.column("id").to_pylist(), samples.column("sample").to_pylist()))
    at = {key: i for i, key in enumerate(keys)}
    order = [
        at.get(key) for key in zip(generations.column("id").to_pylist(), generations.column("sample").to_pylist())
    ]
    for name in ("pred", "correct", "verify_reason"):
        if name in samples.column_names and name not in generations.column_names:
            generations = generations.append_column(name, samples.column(name).take(pa.array(order, pa.int64())))
    return generations.sort_by([("id", "ascending"), ("sample", "ascending")])


def _maybe_table(d: Path) -> pa.Table | None:
    return R.read_table(d)[0] if (d / "_manifest.json").is_file() else None


def _problems(path: Path, samples: pa.Table | None, generations: pa.Table | None) -> list[dict]:
    """Per problem: its scores (problems.parquet), its text and gold answer, and each sample's verdict."""
    from reasonkit.store import read_shard

    rows = read_shard(path).to_pylist() if path.is_file() else []
    by_id = {r["id"]: r for r in rows}
    if samples is not None:
        for s in samples.sort_by([("id", "ascending"), ("sample", "ascending")]).to_pylist():
            problem = by_id.setdefault(s["id"], {"id": s["id"]})
            problem.setdefault("samples", []).append(
                [s.get("sample"), s.get("pred"), s.get("correct"), s.get("completion_tokens"), s.get("finish_reason")]
            )
    if generations is not None:
        cols = [c for c in ("id", "problem", "answer", "messages") if c in generations.column_names]
        for g in generations.select(cols).to_pylist():
            problem = by_id.get(g["id"])
            if problem is not None and "problem" not in problem:
                text = g.get("problem") or next(
                    (m["content"] for m in g.get("messages") or [] if m["role"] == "user"), None
                )
                problem.update(problem=text, answer=g.get("answer"))
    return [R.clean_row(p) for p in by_id.values()]


def training(d: Path, name: str, options: Options, out: Collected) -> dict:
    """A training run: its report's figures, its loss and reward plots, and GRPO's rollouts by step."""
    report = read_json(d / "report.json") or {}
    figures = {k: report[k] for k in _TRAIN_FIGURES if report.get(k) is not None}
    grpo = report.get("grpo") or {}
    figures.update({k: grpo[k] for k in _GRPO_FIGURES if grpo.get(k) is not None and not isinstance(grpo[k], dict)})
    section = {
        "name": name,
        "type": "train",
        "complete": bool(report.get("complete")),
        "figures": figures,
        "plots": images(d, ["loss.png", "rewards.png"]),
        "table": None,
        "steps": None,
    }
    rollouts = d / "rollouts"
    if (rollouts / "_manifest.json").is_file():
        from reasonkit.store import load_manifest

        _remember_gen_config(load_manifest(rollouts), out)
        shards = Shards.of([rollouts])
        names = shards.names()
        if shards.paths and "step" in names:
            rewards = shards.columns(
                ["step"] + [c for c in names if c == "reward" or c.startswith("reward_") or c == "advantage"]
            )
            section["steps"] = step_means(rewards)
            section["table"] = add_shards(out, f"{name}/rollouts", shards, "rollout", options)
    return section


def step_means(table: pa.Table) -> list[dict]:
    """Per GRPO step, over every rollout: rows, and the mean of the reward, each reward function and the advantage."""
    names = [c for c in table.column_names if c != "step"]
    grouped = table.group_by("step").aggregate([(c, "mean") for c in names] + [("step", "count")])
    rows = grouped.sort_by("step").to_pylist()
    return [
        R.clean_row({"step": r["step"], "rows": r["step_count"], **{c: r[f"{c}_mean"] for c in names}}) for r in rows
    ]


def add_table(out: Collected, key: str, table: pa.Table, view: str, options: Options) -> str:
    """Put a table held in memory on the page under ``key`` (sampled, with the counts stated)."""
    chosen, note = R.choose(table, rows=options.rows, per_reason=options.per_reason)
    shown = table if chosen is None else table.take(pa.array(chosen, pa.int64()))
    return _entry(out, key, view, table, shown, note)


def add_shards(out: Collected, key: str, shards: Shards, view: str, options: Options) -> str:
    """Put a stage's table on the page under ``key``: its sample read from the shards, or (``--serve``) none of it,
    the page asking the server for each page of rows."""
    index = shards.index()
    if options.remote:
        out.sources[key] = shards
        return _entry(
            out, key, view, index, None, None, columns=R.slim(pa.table({c: [] for c in shards.names()})).column_names
        )
    chosen, note = R.choose(index, rows=options.rows, per_reason=options.per_reason)
    shown = shards.take(index if chosen is None else index.take(pa.array(chosen, pa.int64())))
    return _entry(out, key, view, index, shown, note)


def _entry(
    out: Collected,
    key: str,
    view: str,
    index: pa.Table,
    shown: pa.Table | None,
    note: dict | None,
    columns: list[str] | None = None,
) -> str:
    """The table's entry of the page's JSON: every row's reasons and sources (for the filters), the rows shown."""
    reasons = R.choose(index, rows=index.num_rows, per_reason=0)[1]["reasons"]
    entry = {
        "key": key,
        "view": view,
        "total": index.num_rows,
        "reasons": reasons,
        "sources": _distinct(index, "source"),
        "columns": columns,
        "rows": None,
        "note": note,
        "remote": shown is None,
    }
    if shown is not None:
        entry["columns"], entry["rows"] = R.to_columns(R.slim(shown))
    out.data["tables"][key] = entry
    return key


def _distinct(table: pa.Table, column: str, limit: int = 200) -> list[str]:
    if column not in table.column_names:
        return []
    values = pc.unique(table.column(column)).to_pylist()
    return sorted(str(v) for v in values if v is not None)[:limit]


def _remember_gen_config(manifest: dict, out: Collected) -> None:
    """The sampling settings behind a gen_config fingerprint, so a trace can say how it was generated."""
    fp, config = manifest.get("gen_config"), manifest.get("config")
    if isinstance(fp, str) and isinstance(config, dict):
        keys = (
            "teacher",
            "backend",
            "n",
            "temperature",
            "top_p",
            "max_tokens",
            "seed",
            "system",
            "instruction",
            "prefill_think",
            "dtype",
            "chat_template",
            "tools",
            "max_turns",
        )
        out.data["gen_configs"][fp] = {k: config[k] for k in keys if k in config}
