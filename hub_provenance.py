"""Provenance of a published table: what the stage directories themselves recorded.

The teachers and generation fingerprints are counted in the rows; the sampling parameters come
from the ``generate`` manifest reached by walking the stage chain upward (each manifest's
``input_path``, verified by its ``input_fingerprint``); the funnel and decontamination counts come
from ``report.json``; versions from ``versions`` dicts and ``*_version`` keys. What is not recorded
is reported as unknown, never guessed. :mod:`reasonkit.hub_card` renders it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasonkit import __version__

REPORT = "report.json"

SAMPLING_KEYS = (
    "teacher", "backend", "n", "temperature", "top_p", "top_k", "min_p", "max_tokens", "seed",
    "system", "instruction", "prefill_think", "chat_template", "dtype", "max_model_len",
)


@dataclass
class Config:
    """One table published as one dataset config."""

    name: str  # "default" for the stage's own table, else the sub-stage directory's name
    dir: Path
    manifest: dict
    shards: list[Path]  # local shard files, in manifest order
    files: list[str]  # their paths in the repository, same order

    @property
    def rows(self) -> int:
        return int(self.manifest.get("rows", 0))


@dataclass
class Link:
    """One stage of the chain that led to the published table (the published stage first)."""

    dir: Path | None
    manifest: dict | None
    report: dict | None = None
    source: str | None = None  # a non-stage input (a prompts file, a Hub id)
    notes: list[str] = field(default_factory=list)


def read_report(stage_dir: Path) -> dict | None:
    try:
        data = json.loads((stage_dir / REPORT).read_text())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return {"unreadable": f"{REPORT}: {e}"}
    return data if isinstance(data, dict) else {"report": data}


# Where a stage records what it read: the manifest's ``input_path`` first, then the names the
# stages use in their run config / config. A guess is safe: it is trusted only when it reproduces
# the manifest's ``input_fingerprint``.
_INPUT_KEYS = ("input_path", "input", "inputs", "traces", "verdicts", "prompts")


def recorded_inputs(manifest: dict) -> list[str]:
    """The input(s) a stage recorded, as strings (paths or Hub ids).

    >>> recorded_inputs({"input_path": "runs/traces"}), recorded_inputs({"run_config": {"prompts": "a/b"}})
    (['runs/traces'], ['a/b'])
    """
    for where in (manifest, manifest.get("run_config"), manifest.get("config")):
        if not isinstance(where, dict):
            continue
        for key in _INPUT_KEYS:
            v = where.get(key)
            if isinstance(v, str) and v:
                return [v]
            if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
                return list(v)
    return []


def lineage(stage_dir: Path, manifest: dict, *, max_depth: int = 16) -> list[Link]:
    """The published stage, then each stage it read, back to its source.

    A relative input path was relative to the working directory of the run that wrote it, which
    is unknown now: it is tried against the current directory and each ancestor of the stage
    directory, and followed only if it reproduces the recorded ``input_fingerprint`` (so a path
    that now names something else, or nothing, is reported rather than trusted). With several
    inputs the chain follows the first stage directory among them and notes the others.
    """
    from reasonkit.errors import UserError
    from reasonkit.store import is_stage_dir, load_manifest

    chain = [Link(stage_dir, manifest, read_report(stage_dir))]
    seen = {stage_dir.resolve()}
    while len(chain) < max_depth:
        here = chain[-1]
        inputs = recorded_inputs(here.manifest or {})
        resolved = _verified(inputs, here) if inputs else None
        if resolved is None:
            break
        stages = [(r, p) for r, p in zip(inputs, resolved) if p is not None and is_stage_dir(p)]
        if not stages:
            chain.append(Link(None, None, source=", ".join(map(public_path, inputs))))  # a prompts file, a Hub id
            break
        recorded, path = stages[0]
        here.notes += [f"also read `{public_path(r)}`" for r in inputs if r != recorded]
        if path.resolve() in seen:
            here.notes.append(f"input `{public_path(recorded)}` loops back to an earlier stage")
            break
        seen.add(path.resolve())
        try:
            chain.append(Link(path, load_manifest(path), read_report(path)))
        except UserError as e:
            here.notes.append(str(e))
            break
    return chain


def _verified(inputs: list[str], here: Link) -> list[Path | None] | None:
    """The inputs resolved to local paths (None: remote), or None, with a note, when they cannot be trusted."""
    from reasonkit.store import fingerprint, fingerprint_path

    resolved = [_resolve(r, here.dir) for r in inputs]
    # As the stages fingerprint their input: one by fingerprint_path (a missing path, such as a
    # Hub id, by its string), several as the list of those (judges/pairs.py).
    each = [fingerprint_path(p) if p is not None else fingerprint(r) for r, p in zip(inputs, resolved)]
    actual = each[0] if len(each) == 1 else fingerprint(each)
    expected = here.manifest.get("input_fingerprint")
    missing = [r for r, p in zip(inputs, resolved) if p is None and (expected or _looks_local(r))]
    if expected and actual != expected or not expected and missing:
        shown = ", ".join(f"`{public_path(r)}`" for r in (missing or inputs))
        why = "is not reachable from here" if missing else "has changed since this stage read it"
        here.notes.append(f"input {shown} {why}; provenance stops at this stage")
        return None
    return resolved


def _resolve(recorded: str, stage_dir: Path | None) -> Path | None:
    p = Path(recorded).expanduser()
    if p.is_absolute():
        return p if p.exists() else None
    candidates = [Path.cwd() / p]
    if stage_dir is not None:
        candidates += [a / p for a in stage_dir.resolve().parents]
    return next((c for c in candidates if c.exists()), None)


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".txt", ".arrow")


def _looks_local(recorded: str) -> bool:
    """Without a fingerprint to tell: a Hub dataset id is ``org/name``, anything else was a local path."""
    return not _HUB_ID.fullmatch(recorded) or recorded.lower().endswith(_FILE_SUFFIXES)


def teacher_counts(configs: list[Config], chain: list[Link]) -> Counter:
    """(teacher, gen_config) -> rows, counted in the published tables (or the nearest traces upstream)."""
    import pyarrow.parquet as pq
    from reasonkit.store import shard_paths

    def count(paths: list[Path]) -> Counter | None:
        counts: Counter = Counter()
        for p in paths:
            names = pq.read_schema(p).names
            if "teacher" not in names:
                return None
            cols = ["teacher"] + (["gen_config"] if "gen_config" in names else [])
            t = pq.read_table(p, columns=cols).to_pydict()
            counts.update(zip(t["teacher"], t.get("gen_config", [None] * len(t["teacher"]))))
        return counts

    for c in configs:
        found = count(c.shards)
        if found:
            return found
    for link in chain[1:]:
        if link.dir is not None and link.manifest and link.manifest.get("complete"):
            found = count(shard_paths(link.dir))
            if found:
                return found
    return Counter()


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested config dicts as dotted keys.

    >>> flatten({"a": {"b": 1}, "c": [1, 2]})
    {'a.b': 1, 'c': [1, 2]}
    """
    if not isinstance(obj, dict):
        return {prefix: obj} if prefix else {}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def sampling(chain: list[Link]) -> tuple[Link, dict[str, Any]] | None:
    """The generate stage in the chain and its sampling parameters."""
    for link in chain:
        m = link.manifest or {}
        if m.get("stage") == "generate" or m.get("kind") == "traces":
            flat = flatten(m.get("config") or {})
            return link, {k: v for k, v in flat.items() if k.rsplit(".", 1)[-1] in SAMPLING_KEYS}
    return None


def versions(chain: list[Link]) -> dict[str, str]:
    """Verifier, detector and library versions recorded by any stage: a ``versions`` dict or ``*_version`` keys."""
    out: dict[str, str] = {}
    for link in chain:
        for source in (link.manifest or {}, link.report or {}):
            if isinstance(source.get("versions"), dict):
                out.update({str(k): str(v) for k, v in source["versions"].items()})
            for k, v in source.items():
                if k.endswith("_version") and k != "reasonkit_version" and isinstance(v, (str, int, float)):
                    out[k[: -len("_version")]] = str(v)
    return out


def funnel(report: dict) -> tuple[int | None, list[tuple[str, int]], int | None] | None:
    """(rows in, [(reason, dropped)] in order, rows out) from a filter report, in the shapes it may take.

    >>> funnel({"funnel": {"in": 10, "dropped": {"wrong": 3, "length": 1}, "out": 6}})
    (10, [('wrong', 3), ('length', 1)], 6)
    >>> funnel({"rows_in": 4, "steps": [{"reason": "dup", "dropped": 1}], "rows_out": 3})
    (4, [('dup', 1)], 3)
    """
    body = report.get("funnel", report)
    if not isinstance(body, (dict, list)):
        return None
    if isinstance(body, list):
        body = {"steps": body}

    def first(*keys: str) -> Any:
        return next((body[k] for k in keys if k in body), None)

    rows_in = first("in", "rows_in", "input_rows", "total")
    rows_out = first("out", "rows_out", "kept", "output_rows")
    drops = first("dropped", "drops", "steps", "reasons", "dropped_per_reason")
    pairs: list[tuple[str, int]] = []
    if isinstance(drops, dict):
        pairs = [(str(k), v) for k, v in drops.items() if isinstance(v, int)]
    elif isinstance(drops, list):
        for item in drops:
            if isinstance(item, dict):
                name = next((item[k] for k in ("reason", "step", "filter", "name") if k in item), None)
                n = next((item[k] for k in ("dropped", "count", "rows", "n") if isinstance(item.get(k), int)), None)
                if name is not None and n is not None:
                    pairs.append((str(name), n))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                pairs.append((str(item[0]), int(item[1])))
    if not pairs and rows_in is None and rows_out is None:
        return None
    return rows_in if isinstance(rows_in, int) else None, pairs, rows_out if isinstance(rows_out, int) else None


def decontamination(chain: list[Link]) -> tuple[dict[str, Any], list[str]]:
    """(benchmark -> rows dropped, eval files checked against) from reports and filter configs."""
    found: dict[str, Any] = {}
    checked: list[str] = []
    for link in chain:
        report = link.report or {}
        for k, v in report.items():
            if "contam" in k.lower():
                if isinstance(v, dict):
                    found.update({str(b): n for b, n in v.items()})
                else:
                    found[k] = v
        parsed = funnel(report)
        from_funnel = {r: n for r, n in (parsed[1] if parsed else []) if "contam" in r.lower()}
        if not any("contam" in k.lower() for k in report):  # a dedicated section already says it per benchmark
            found.update(from_funnel)
        for k, v in flatten((link.manifest or {}).get("config") or {}).items():
            if "decontam" in k.lower() and v not in (None, [], ""):
                checked += [str(x) for x in v] if isinstance(v, list) else [str(v)]
    return found, checked


def recipe_text(recipe: str | os.PathLike | None, chain: list[Link]) -> str | None:
    """The recipe given to push, else one a stage recorded (a path that still exists, or a dict)."""
    if recipe is not None:
        return Path(recipe).read_text()
    import yaml

    for link in chain:
        r = (link.manifest or {}).get("recipe")
        if isinstance(r, dict):
            return yaml.safe_dump(r, sort_keys=False)
        if isinstance(r, str) and Path(r).is_file():
            return Path(r).read_text()
    return None


# -- rendering -------------------------------------------------------------------------------


def public_path(recorded: str) -> str:
    """A recorded local path as it may appear in a public card: no home or machine-specific prefix.

    >>> public_path("/home/alice/work/data/prompts.jsonl"), public_path("runs/traces")
    ('.../data/prompts.jsonl', 'runs/traces')
    """
    p = Path(recorded)
    if not (p.is_absolute() or recorded.startswith("~")) or len(p.parts) <= 3:
        return recorded
    return ".../" + "/".join(p.parts[-2:])


# Manifest keys left out of provenance.json: where and how a run executed on its machine (local
# paths, endpoints, timings), not what decided the rows; and the shard list, which the repo renames.
_PRIVATE_KEYS = ("shards", "run_config", "last_run")


def public_manifest(m: dict | None) -> dict | None:
    if m is None:
        return None
    out = {k: v for k, v in m.items() if k not in _PRIVATE_KEYS}
    if isinstance(out.get("input_path"), str):
        out["input_path"] = public_path(out["input_path"])
    if isinstance(out.get("backend_info"), dict):
        out["backend_info"] = {k: v for k, v in out["backend_info"].items() if k != "base_url"}
    return out


def provenance(configs: list[Config], chain: list[Link]) -> dict:
    """The machine-readable twin of the card (``provenance.json`` in the repository)."""
    return {
        "reasonkit_version": __version__,
        "configs": {c.name: {"files": c.files, "manifest": public_manifest(c.manifest)} for c in configs},
        "lineage": [
            {"manifest": public_manifest(link.manifest), "report": link.report,
             "source": public_path(link.source) if link.source else None, "notes": link.notes}
            for link in chain
        ],
    }
