"""What a path holds, as the page's data: its stages, evaluations and training runs, and a run's report.

A path is one of: a stage directory (``_manifest.json``), an evaluation (``summary.json`` beside ``samples/``), a
training run (``train_config.json``), or a directory of those (a recipe run, in the order its steps ran). Each
becomes a section; each table of rows becomes an entry of ``tables`` (sampled, or ``remote`` when the rows are
served on demand), so one renderer on the page serves every stage that writes the same kind of rows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from reasonkit.errors import UserError
from reasonkit.view import sections
from reasonkit.view.records import Collected, Options, images, load_json

_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")  # a Markdown image: ![alt](path)


def collect(path: str | Path, options: Options) -> Collected:
    """The page's data for ``path``; a path holding nothing to show is one line saying what was looked for."""
    root = Path(path)
    if not root.is_dir():
        raise UserError(f"{root}: no such directory (expected a stage directory or a recipe run)")
    out = Collected(
        {
            "title": root.resolve().name,
            "path": str(root),
            "sections": [],
            "tables": {},
            "gen_configs": {},
            "report": None,
            "mode": "serve" if options.remote else "file",
            "limits": {"rows": options.rows, "per_reason": options.per_reason},
        }
    )
    single = _section(root, root.resolve().name, options, out, run=None)
    if single:
        out.data["sections"].append(single)
    else:
        steps = _steps_in_order(root)
        consumed = _consumed_by_filters(root, steps)
        for name in steps:
            section = _section(root / name, name, options, out, run=root, shown_elsewhere=consumed.get(name))
            if section:
                out.data["sections"].append(section)
        out.data["report"] = _report(root)
    if not out.data["sections"] and not out.data["report"]:
        raise UserError(f"{root}: nothing to view (no stage directory, evaluation or training run in it)")
    return out


def _steps_in_order(root: Path) -> list[str]:
    """A run's step folders: in the order _recipe_state.json recorded them, then any others by name."""
    try:
        recorded = list(json.loads((root / "_recipe_state.json").read_text()))
    except (OSError, ValueError):
        recorded = []
    present = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return [n for n in recorded if n in present] + [n for n in present if n not in recorded]


def _consumed_by_filters(root: Path, steps: list[str]) -> dict[str, str]:
    """Generated tables a filter of the same run read: their rows are on the page once, with the verdicts."""
    consumed = {}
    for name in steps:
        manifest = load_json(root / name / "_manifest.json") or {}
        if manifest.get("stage") != "filter":
            continue
        inputs = manifest.get("input_path") or []
        for p in [inputs] if isinstance(inputs, str) else inputs:
            source = Path(p).name
            if source in steps and (load_json(root / source / "_manifest.json") or {}).get("stage") == "generate":
                consumed[source] = name
    return consumed


def _section(
    d: Path, name: str, options: Options, out: Collected, *, run: Path | None, shown_elsewhere: str | None = None
) -> dict | None:
    if (d / "summary.json").is_file() and ((d / "samples").is_dir() or (d / "problems.parquet").is_file()):
        return sections.evaluation(d, name, options, out)
    if (
        (d / "train_config.json").is_file()
        or (d / "report.json").is_file()
        and "method" in (load_json(d / "report.json") or {})
    ):
        return sections.training(d, name, options, out)
    if (d / "_manifest.json").is_file():
        return sections.stage(d, name, options, out, shown_elsewhere=shown_elsewhere)
    return None


def _report(root: Path) -> dict | None:
    """A run's report.md and the images it shows, inlined (the page must open alone, anywhere)."""
    try:
        text = (root / "report.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return {"markdown": text, "images": images(root, _IMAGE.findall(text))}
