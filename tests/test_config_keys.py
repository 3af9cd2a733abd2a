"""Every stage config accepts the YAML and ``--set`` keys it accepted before issue 39's groups, with the same
defaults (tests/config_keys.json, written from the code before the change). A group may add keys; none goes."""

import dataclasses
import importlib
import json
from pathlib import Path

import pytest

PINNED = json.loads(Path(__file__).with_name("config_keys.json").read_text())
WHERE = {
    "GenerateConfig": "reasonkit.gen.config",
    "EvalConfig": "reasonkit.distill.eval.config",
    "JudgeConfig": "reasonkit.judges.config",
    "CritiqueConfig": "reasonkit.judges.config",
    "PairsConfig": "reasonkit.judges.config",
    "LabelStepsConfig": "reasonkit.judges.steps.config",
    "FilterConfig": "reasonkit.filters.config",
    "TrainConfig": "reasonkit.distill.config",
    "ScoreConfig": "reasonkit.judges.score.config",
    "PrepareConfig": "reasonkit.distill.prepare.run",
}


def defaults(cls) -> dict[str, str]:
    def default(f):
        if f.default is not dataclasses.MISSING:
            return f.default
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else "REQUIRED"

    return {f.name: repr(default(f)) for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("name", sorted(WHERE))
def test_every_key_of_before_is_still_accepted_with_its_default(name):
    now = defaults(getattr(importlib.import_module(WHERE[name]), name))
    assert {key: now.get(key) for key in PINNED[name]} == PINNED[name]
