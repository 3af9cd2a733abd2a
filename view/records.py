"""What the page is made of, shared by collect.py and sections.py: the options, the data being built, the records
read beside the rows (JSON files, images inlined)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

from reasonkit.errors import UserError

#: The page's renderer for each table kind of schema.py (and the GRPO rollouts, a traces table with rewards).
VIEWS = {
    "traces": "trace",
    "verdicts": "trace",
    "scores": "trace",
    "trajectories": "trajectory",
    "sft_tools": "trajectory",
    "prefs": "pair",
    "prefs_text": "pair",
    "sft": "messages",
    "prompts": "prompt",
    "steps": "steps",
}
#: Rows a table holds on the page by default, and the dropped rows kept per drop reason within them: a page of
#: a few MB for short traces, tens of MB for R1-length ones (``--serve`` for more).
DEFAULT_ROWS = 2000
DEFAULT_PER_REASON = 200
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}


@dataclass
class Options:
    rows: int = DEFAULT_ROWS
    per_reason: int = DEFAULT_PER_REASON
    remote: bool = False  # --serve: stage tables are read on demand, not embedded


@dataclass
class Collected:
    data: dict  # the page's JSON
    sources: dict = field(default_factory=dict)  # a table's key -> its shards.Shards, where --serve reads its rows


def images(root: Path, names: list[str]) -> dict[str, str]:
    """``{relative path: data URL}`` of the image files named that exist under ``root`` (nothing outside it)."""
    found = {}
    base = root.resolve()
    for name in names:
        path = (root / name).resolve()
        kind = _IMAGE_TYPES.get(path.suffix.lower())
        if kind and path.is_file() and path.is_relative_to(base):
            found[name] = f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode()
    return found


def load_json(path: Path) -> dict | None:
    """A JSON object from ``path``; None where it is absent or no object."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def read_json(path: Path) -> dict | None:
    """A record beside the rows (report.json, summary.json): None where absent; a damaged one is one line naming it."""
    if not path.exists():
        return None
    found = load_json(path)
    if found is None:
        raise UserError(f"{path}: unreadable JSON (expected the object its stage writes)")
    return found
