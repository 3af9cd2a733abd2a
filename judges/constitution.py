"""A constitution: the principles ``distill critique`` revises by, loaded strictly from YAML.

```yaml
name: my-constitution            # optional
description: ...                 # optional
principles:
  - name: concise                # optional; defaults to principle-<index>
    critique_request: Identify the parts of your previous response that ...
    revision_request: Rewrite your previous response without ...
```

Every principle needs both requests (Constitutional AI pairs each critique with the revision that
answers it). Any mistake is one error naming the file, the principle and the key.

>>> c = load_constitution(None)
>>> [p.name for p in c.principles]
['correct', 'verifiable', 'concise', 'one-language']
>>> choose(c, seed=0, key="q1/0", round=1) == choose(c, seed=0, key="q1/0", round=1)
True
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from reasonkit.errors import UserError

DEFAULT = Path(__file__).resolve().parent / "constitution.yaml"
_TOP = ("name", "description", "principles")
_PRINCIPLE = ("name", "critique_request", "revision_request")


@dataclass(frozen=True)
class Principle:
    name: str
    critique_request: str
    revision_request: str


@dataclass(frozen=True)
class Constitution:
    path: str
    name: str
    principles: tuple[Principle, ...]

    def as_dict(self) -> dict:
        """What the stage fingerprints: the principles' text, not the file's path."""
        return {"name": self.name, "principles": [p.__dict__ for p in self.principles]}


def load_constitution(path: str | os.PathLike | None) -> Constitution:
    """The constitution at ``path`` (None: the shipped ``judges/constitution.yaml``)."""
    from reasonkit.config import load_yaml, suggest

    file = Path(path) if path is not None else DEFAULT
    if file.is_dir():
        raise UserError(f"{file}: is a directory; expected a constitution YAML file")
    data = load_yaml(file)
    for key in data:
        if key not in _TOP:
            raise UserError(f"{file}: {key}: unknown key{suggest(str(key), dict.fromkeys(_TOP))}")
    raw = data.get("principles")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{file}: principles: expected a non-empty list of principles")
    principles: list[Principle] = []
    for i, item in enumerate(raw):
        where = f"{file}: principles[{i}]"
        if not isinstance(item, dict):
            raise UserError(f"{where}: expected a mapping with critique_request and revision_request")
        name = item.get("name", f"principle-{i}")
        if not isinstance(name, str) or not name.strip():
            raise UserError(f"{where}.name: expected a non-empty string, found {name!r}")
        where = f"{file}: principles[{i}] ({name})"
        for key in item:
            if key not in _PRINCIPLE:
                raise UserError(f"{where}: {key}: unknown key{suggest(str(key), dict.fromkeys(_PRINCIPLE))}")
        for key in ("critique_request", "revision_request"):
            value = item.get(key)
            if value is None:
                raise UserError(f"{where}: missing {key}")
            if not isinstance(value, str) or not value.strip():
                raise UserError(f"{where}: {key}: expected non-empty text, found {value!r}")
        if any(p.name == name for p in principles):
            raise UserError(f"{where}: duplicate principle name {name!r}")
        principles.append(Principle(name.strip(), item["critique_request"].strip(), item["revision_request"].strip()))
    return Constitution(str(file), str(data.get("name") or file.stem), tuple(principles))


def choose(constitution: Constitution, *, seed: int, key: str, round: int) -> Principle:
    """The principle for one row and round: seeded by ``(seed, key, round)``, not by row order."""
    from reasonkit.gen.backend import derive_seed

    rng = random.Random(derive_seed(seed, key, round))
    return constitution.principles[rng.randrange(len(constitution.principles))]
