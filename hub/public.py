"""What of a local run may appear in a public card: names, never where they lay on this machine.

Stage manifests and reports record local paths (the teacher's directory, the traces a filter read,
the eval sets it checked against), often absolute: the home directory, a scratch disk, a user
name. The card and ``provenance.json`` show a local data path by its last two parts (enough to
tell ``traces`` from ``student_samples``), a local model by its directory's name and content hash,
and a Hub id pinned to its revision (the identities identity.py records, where a stage recorded
them). Everything published goes through :func:`scrub`, so a key added to a manifest later cannot
leak a path either.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

#: Keys whose string values name a model (shown by :func:`public_model`), not data.
MODEL_KEYS = frozenset({"teacher", "model", "student", "tokenizer", "adapter", "judge", "reference"})

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_WINDOWS = re.compile(r"[A-Za-z]:[\\/]")
# An absolute path inside free text (a note, an error message): "/" or "~/" not inside a word, a
# URL ("http://host/v1") or the ".../" this module writes, then path characters.
_EMBEDDED = re.compile(r"(?<![\w.:/<~-])(?:~/|/)[\w.+@%-]+(?:/[\w.+@%-]+)*/?")


def is_local_path(text: str) -> bool:
    """Whether a recorded string is a path on the machine that ran the stage (not a Hub id).

    A relative ``a/b`` reads as a Hub id: showing it as it is reveals nothing of the machine.

    >>> [is_local_path(s) for s in ("/data/x", "~/x", "./x", "runs/sft/model", "Qwen/Qwen2.5-7B", "x.jsonl")]
    [True, True, True, True, False, True]
    """
    if text.startswith(("/", "~", "./", "../")) or _WINDOWS.match(text):
        return True
    return not _HUB_ID.fullmatch(text) or text.lower().endswith((".jsonl", ".json", ".parquet", ".csv", ".txt"))


def _parts(recorded: str) -> tuple[str, ...]:
    path = PureWindowsPath(recorded) if _WINDOWS.match(recorded) else PurePosixPath(recorded)
    parts = path.parts[1:] if path.anchor else path.parts
    return parts[1:] if parts[:1] == ("~",) else parts


def public_path(recorded: str) -> str:
    """A recorded data path as a public card may show it: relative paths as they are (they name
    nothing outside the run), absolute ones by their last two parts.

    >>> public_path("/home/alice/work/data/prompts.jsonl"), public_path("runs/traces"), public_path("/tmp/x")
    ('.../data/prompts.jsonl', 'runs/traces', '.../x')
    """
    if not (recorded.startswith(("/", "~")) or _WINDOWS.match(recorded)):
        return recorded
    parts = _parts(recorded)
    # Two parts need two directories above them, else the second-to-last is a machine's top level (/tmp).
    keep = parts[-2:] if len(parts) >= 4 else parts[-1:]
    return ".../" + "/".join(keep) if keep else "..."


def public_model(name: str, identity: str | None = None) -> str:
    """A model as a public card names it: a Hub id as it is, a local directory by its name; pinned
    by the content identity a stage recorded (identity.py: ``hub:ORG/NAME@SHA``, ``sha256:HEX``).

    >>> public_model("/srv/models/teacher"), public_model("runs/sft/model")
    ('teacher', 'model')
    >>> public_model("/srv/teacher", "sha256:" + "ab" * 32), public_model("Qwen/Q-7B", "hub:Qwen/Q-7B@" + "c" * 40)
    ('teacher@sha256:abababababababab', 'Qwen/Q-7B@cccccccccccccccccccccccccccccccccccccccc')
    """
    if identity and identity.startswith("hub:"):
        return identity[len("hub:") :]  # the revision in full: it is what `from_pretrained(revision=)` takes
    shown = (_parts(name)[-1:] or ("?",))[0] if is_local_path(name) else name
    if identity and identity.startswith("sha256:"):
        return f"{shown}@{identity[: len('sha256:') + 16]}"
    return shown


def scrub_text(text: str) -> str:
    """Free text with every absolute local path in it replaced by :func:`public_path`.

    >>> scrub_text("/home/a/run/traces: listed in /home/a/run/traces/_manifest.json but missing; see http://h:8/v1")
    '.../run/traces: listed in .../traces/_manifest.json but missing; see http://h:8/v1'
    """
    if text.startswith(("/", "~")) or _WINDOWS.match(text):
        return public_path(text) if not any(c.isspace() for c in text) else _EMBEDDED.sub(_sub, text)
    return _EMBEDDED.sub(_sub, text)


def _sub(match: re.Match) -> str:
    return public_path(match.group(0).rstrip("/"))


def scrub(value: Any, key: str | None = None) -> Any:
    """A manifest, report or config with local paths made public: model keys by :func:`public_model`,
    any other string by :func:`scrub_text`; dicts and lists walked.

    >>> scrub({"teacher": "/w/assets/teacher", "decontam": ["/tmp/q/run/evals"], "n": 2, "note": "ok"})
    {'teacher': 'teacher', 'decontam': ['.../run/evals'], 'n': 2, 'note': 'ok'}
    """
    if isinstance(value, dict):
        return {k: scrub(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, key) for v in value]
    if isinstance(value, str):
        if key is not None and key.rsplit(".", 1)[-1] in MODEL_KEYS and is_local_path(value):
            return public_model(value)
        return scrub_text(value)
    return value
