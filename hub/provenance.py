"""Provenance of a published table: what the stage directories themselves recorded.

The teachers and generation fingerprints are counted in the rows; the sampling parameters come
from the ``generate`` manifest reached by walking the stage chain upward (each manifest's
``input_path``, verified by its ``input_fingerprint``); the funnel and decontamination counts come
from ``report.json``; versions from ``versions`` dicts and ``*_version`` keys. What is not recorded
is reported as unknown, never guessed. :mod:`reasonkit.hub.card` renders it, and whatever either
publishes passes through :mod:`reasonkit.hub.public` first (no local path leaves the machine).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasonkit import __version__
from reasonkit.hub.public import is_local_path, public_model, public_path, scrub, scrub_text

REPORT = "report.json"

SAMPLING_KEYS = (
    "teacher",
    "backend",
    "n",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "seed",
    "system",
    "instruction",
    "prefill_think",
    "chat_template",
    "dtype",
    "max_model_len",
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


def recorded_inputs(manifest: dict) -> tuple[list[str], bool]:
    """The input(s) a stage recorded, as strings (paths or Hub ids), and whether as a list.

    A stage that records a list fingerprints the list (the filter: traces and eval sets; pairs:
    verdicts and ``rejected/``), even of one; a single input is fingerprinted alone.

    >>> recorded_inputs({"input_path": ["runs/traces"]}), recorded_inputs({"run_config": {"prompts": "a/b"}})
    ((['runs/traces'], True), (['a/b'], False))
    """
    for where in (manifest, manifest.get("run_config"), manifest.get("config")):
        if not isinstance(where, dict):
            continue
        for key in _INPUT_KEYS:
            v = where.get(key)
            if isinstance(v, str) and v:
                return [v], False
            if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
                return list(v), True
    return [], False


def lineage(stage_dir: Path, manifest: dict, *, max_depth: int = 16) -> list[Link]:
    """The published stage, then each stage it read, back to its source.

    A recorded input is looked for where it was recorded, then (a relative path was relative to
    a working directory unknown now) under each ancestor of the stage directory, then (the run
    was moved or copied: a recipe's steps are siblings) its trailing parts under those ancestors.
    It is followed only if it reproduces the recorded ``input_fingerprint``, so a path that now
    names something else, or nothing, is reported rather than trusted. With several inputs the
    chain follows the first stage directory among them and notes the others.
    """
    from reasonkit.errors import UserError
    from reasonkit.store import is_stage_dir, load_manifest

    chain = [Link(stage_dir, manifest, read_report(stage_dir))]
    seen = {stage_dir.resolve()}
    while len(chain) < max_depth:
        here = chain[-1]
        inputs, as_list = recorded_inputs(here.manifest or {})
        resolved = _verified(inputs, as_list, here) if inputs else None
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
            here.notes.append(scrub_text(str(e)))
            break
    return chain


_MAX_TRIES = 64  # combinations of candidate locations tried against the fingerprint


def _verified(inputs: list[str], as_list: bool, here: Link) -> list[Path | None] | None:
    """The inputs resolved to local paths (None: remote), or None, with a note, when they cannot be trusted."""
    import itertools

    from reasonkit.store import fingerprint, fingerprint_path

    # As the stages fingerprint their input: each by fingerprint_path (a Hub id by its string),
    # a recorded list as the list of those. Cached: a prompts file is hashed once, not per try.
    cache: dict[str, str] = {}

    def one(target: str | Path) -> str:
        if str(target) not in cache:
            cache[str(target)] = fingerprint_path(target)
        return cache[str(target)]

    def fingerprint_of(choice: tuple[Path | None, ...]) -> str:
        each = [one(p if p is not None else r) for r, p in zip(inputs, choice)]
        return fingerprint(each) if as_list else each[0]

    options = [_candidates(r, here.dir) for r in inputs]
    recorded_there = [_candidates(r, here.dir, moved=False) for r in inputs]
    expected = here.manifest.get("input_fingerprint")
    if expected:
        tries = itertools.islice(itertools.product(*[o + [None] for o in options]), _MAX_TRIES)
        found = next((list(c) for c in tries if fingerprint_of(c) == expected), None)
        if found is not None:
            return found
    # Missing: nothing where it was recorded (a guess beside the stage that did not match is no find).
    missing = [r for r, o in zip(inputs, recorded_there) if not o and (expected or is_local_path(r))]
    if expected is None and not missing:
        return [o[0] if o else None for o in options]
    shown = ", ".join(f"`{public_path(r)}`" for r in (missing or inputs))
    if missing:
        why = (
            f"inputs {shown} are not reachable from here (moved or deleted since this stage read them)"
            if len(missing) > 1
            else f"input {shown} is not reachable from here (moved or deleted since this stage read it)"
        )
    else:
        why = (
            f"inputs {shown} have changed since this stage read them"
            if len(inputs) > 1
            else f"input {shown} has changed since this stage read it"
        )
    here.notes.append(f"{why}; provenance stops at this stage")
    return None


def _candidates(recorded: str, stage_dir: Path | None, *, moved: bool = True) -> list[Path]:
    """Where a recorded input may be now, most likely first; only paths that exist."""
    p = Path(recorded).expanduser()
    ancestors = list(stage_dir.resolve().parents) if stage_dir is not None else []
    found = [p] if p.is_absolute() else [Path.cwd() / p] + [a / p for a in ancestors]
    parts = p.parts[1:] if p.is_absolute() else p.parts
    for k in range(1, len(parts) if moved else 0):  # moved: the input's last k parts under the stage's ancestors
        found += [a / Path(*parts[-k:]) for a in ancestors]
    unique: list[Path] = []
    for c in found:
        if c.exists() and c.resolve() not in {u.resolve() for u in unique}:
            unique.append(c)
    return unique


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
            config = m.get("config") or {}
            params = scrub({k: v for k, v in flatten(config).items() if k.rsplit(".", 1)[-1] in SAMPLING_KEYS})
            if isinstance(config.get("teacher"), str):
                params["teacher"] = public_model(config["teacher"], config.get("teacher_identity"))
            return link, params
    return None


def teacher_identities(chain: list[Link]) -> dict[str, str]:
    """teacher as recorded -> its content identity, from the generate manifests in the chain."""
    found: dict[str, str] = {}
    for link in chain:
        config = (link.manifest or {}).get("config") or {}
        if isinstance(config.get("teacher"), str) and isinstance(config.get("teacher_identity"), str):
            found.setdefault(config["teacher"], config["teacher_identity"])
    return found


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


@dataclass
class Funnel:
    """A filter's funnel as its report.json records it (filters/report.py)."""

    rows_in: int
    steps: list[tuple[str, str, int, int]]  # (filter, reason, dropped, remaining), in the order filters ran
    rows_out: int


def funnel(report: dict) -> Funnel | None:
    """The funnel of a filter report (None for any other report), read as ``Tally.report`` writes it.

    >>> import pyarrow as pa
    >>> from reasonkit.filters.report import Tally
    >>> t = Tally()
    >>> t.add(pa.table({"keep": [True, False], "drop_reason": [None, "wrong"], "correct": [True, False],
    ...                 "completion_tokens": [5, 6]}))
    >>> funnel(t.report([("format", "truncated"), ("verify", "wrong")]))
    Funnel(rows_in=2, steps=[('format', 'truncated', 0, 2), ('verify', 'wrong', 1, 1)], rows_out=1)
    """
    steps = report.get("funnel")
    rows_in, rows_out = report.get("rows_in"), report.get("rows_out")
    if not (isinstance(steps, list) and isinstance(rows_in, int) and isinstance(rows_out, int)):
        return None
    parsed = []
    for step in steps:
        if not (
            isinstance(step, dict) and isinstance(step.get("dropped"), int) and isinstance(step.get("remaining"), int)
        ):
            return None
        parsed.append((str(step.get("filter", "?")), str(step.get("reason", "?")), step["dropped"], step["remaining"]))
    return Funnel(rows_in, parsed, rows_out)


def decontamination(chain: list[Link]) -> tuple[dict[str, Any], list[str]]:
    """(benchmark -> rows dropped, eval files checked against) from reports and filter configs."""
    found: dict[str, Any] = {}
    checked: list[str] = []
    for link in chain:
        report = link.report or {}
        parsed = funnel(report)
        # A filter's funnel names every eval set it checked, zeros included ("contaminated:<name>").
        for _, reason, n, _ in parsed.steps if parsed else []:
            if reason.startswith("contaminated:"):
                found[reason.split(":", 1)[1]] = n
        for k, v in report.items():  # a section of its own ("contamination": {name: rows})
            if "contam" in k.lower() and k != "funnel":
                if isinstance(v, dict):
                    found.update({str(b): n for b, n in v.items()})
                else:
                    found[k] = v
        for k, v in flatten((link.manifest or {}).get("config") or {}).items():
            if k.rsplit(".", 1)[-1] in ("decontam", "decontam_against") and v not in (None, [], ""):
                checked += [scrub_text(str(x)) for x in (v if isinstance(v, list) else [v])]
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


# Manifest keys left out of provenance.json: where and how a run executed on its machine (local
# paths, endpoints, timings), not what decided the rows; and the shard list, which the repo renames.
_PRIVATE_KEYS = ("shards", "run_config", "last_run")


def public_manifest(m: dict | None) -> dict | None:
    if m is None:
        return None
    out = {k: v for k, v in m.items() if k not in _PRIVATE_KEYS}
    if isinstance(out.get("backend_info"), dict):
        out["backend_info"] = {k: v for k, v in out["backend_info"].items() if k != "base_url"}
    return scrub(out)


def provenance(configs: list[Config], chain: list[Link]) -> dict:
    """The machine-readable twin of the card (``provenance.json`` in the repository)."""
    return {
        "reasonkit_version": __version__,
        "configs": {c.name: {"files": c.files, "manifest": public_manifest(c.manifest)} for c in configs},
        "lineage": [
            {
                "manifest": public_manifest(link.manifest),
                "report": scrub(link.report),
                "source": link.source,
                "notes": [scrub_text(n) for n in link.notes],
            }
            for link in chain
        ],
    }
