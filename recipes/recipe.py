"""A recipe: an ordered list of steps, each one stage with its config, chained by references.

```yaml
out: runs/quickstart            # every step writes OUT/<step name>
steps:
  - name: traces
    stage: generate
    with: {prompts: data/train.parquet, teacher: recipes/assets/teacher, n: 4}
  - name: verified
    stage: filter
    with: {traces: ${traces}}   # ${step} is that step's output directory
```

A reference may only name an earlier step, so a recipe is a chain that can be validated, resumed
and partially rerun without loading any model. ``${step}/sft`` reaches a sub-directory, and
``${reasonkit}`` is the installed package (for shipped assets).

>>> r = parse_recipe({"out": "o", "steps": [{"name": "a", "stage": "synth", "with": {}}]}, "r.yaml")
>>> [s.name for s in r.steps], step_dir(r, "a")
(['a'], 'o/a')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasonkit.config import parse_assignment, set_path, suggest
from reasonkit.errors import UserError

REF = re.compile(r"\$\{([A-Za-z0-9_\-]+)\}")
#: ``${reasonkit}`` is the installed package's directory, so a shipped recipe can name shipped
#: assets (``${reasonkit}/recipes/assets/teacher``) wherever it is run from.
BUILTINS = {"reasonkit": str(Path(__file__).resolve().parent.parent)}
_RECIPE_KEYS = ("name", "description", "out", "steps", "report", "compare", "sandbox")
_STEP_KEYS = ("name", "stage", "with")


@dataclass(frozen=True)
class Step:
    name: str
    stage: str
    config: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    path: str
    out: str
    steps: tuple[Step, ...]
    name: str = ""
    description: str = ""
    report: bool = True
    #: Pairs of eval steps ``(A, B)`` that report.md compares problem by problem (B - A in pass@1,
    #: paired bootstrap 95% interval: distill/eval/compare.py).
    compare: tuple[tuple[str, str], ...] = ()
    #: How every step's model programs run (the code verifier, the python tool): "auto" (the strongest
    #: isolation here, refuse if none) or "none" (no namespaces, opt-in: `distill filter --sandbox none`).
    sandbox: str = "auto"

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise UserError(f"{self.path}: no step named {name!r}{suggest(name, {s.name: 0 for s in self.steps})}")


def step_dir(recipe: Recipe, name: str) -> str:
    return str(Path(recipe.out) / name)


def parse_recipe(data: dict, path: str, overrides: list[str] = (), out: str | None = None) -> Recipe:
    """Check a recipe's shape (not yet the stage configs: see runner.validate) and apply ``--set``.

    ``--set traces.n=8`` sets key ``n`` of step ``traces``; ``--set out=DIR`` moves the run.
    """
    data = dict(data)
    for key in data:
        if key not in _RECIPE_KEYS:
            raise UserError(f"{path}: {key}: unknown key{suggest(str(key), dict.fromkeys(_RECIPE_KEYS))}")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise UserError(f"{path}: steps: expected a non-empty list of steps")
    steps: list[Step] = []
    for i, raw in enumerate(raw_steps):
        steps.append(_parse_step(raw, f"{path}: steps[{i}]", steps))
    recipe_out = _apply_overrides(steps, overrides, data.get("out") or str(Path("runs") / Path(path).stem))
    if out is not None:
        recipe_out = out
    compare = _compare_pairs(data.get("compare"), steps, path)
    return Recipe(
        path=path,
        out=str(recipe_out),
        steps=tuple(steps),
        name=str(data.get("name") or Path(path).stem),
        description=str(data.get("description") or ""),
        report=bool(data.get("report", True)),
        compare=compare,
        sandbox=_sandbox_choice(data.get("sandbox", "auto"), path),
    )


def _parse_step(raw: Any, where: str, earlier: list[Step]) -> Step:
    """One entry of ``steps:`` checked (``where`` names it in an error; ``earlier``: the steps before it)."""
    from reasonkit.stages import STAGES

    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a mapping with name, stage and with")
    for key in raw:
        if key not in _STEP_KEYS:
            raise UserError(f"{where}.{key}: unknown key{suggest(str(key), dict.fromkeys(_STEP_KEYS))}")
    name, stage = raw.get("name"), raw.get("stage")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", name or ""):
        raise UserError(f"{where}.name: expected a name of letters, digits, - and _; found {name!r}")
    if any(s.name == name for s in earlier):
        raise UserError(f"{where}.name: duplicate step name {name!r}")
    if stage not in STAGES:
        raise UserError(f"{where}.stage: unknown stage {stage!r}{suggest(str(stage), STAGES)}")
    config = raw.get("with") or {}
    if not isinstance(config, dict):
        raise UserError(f"{where}.with: expected a mapping of {stage} settings")
    return Step(name, stage, dict(config))


def _apply_overrides(steps: list[Step], overrides: list[str], recipe_out: str) -> str:
    """Apply each ``--set STEP.KEY=VALUE`` to ``steps`` in place; returns the run directory (``--set out=DIR``)."""
    for item in overrides:
        key, value = parse_assignment(item)
        if key == "out":
            recipe_out = str(value)
            continue
        head, _, rest = key.partition(".")
        if not rest:
            raise UserError(f"--set {item!r}: expected STEP.KEY=VALUE (steps: {', '.join(s.name for s in steps)})")
        index = next((j for j, s in enumerate(steps) if s.name == head), None)
        if index is None:
            raise UserError(f"--set {item!r}: no step named {head!r}{suggest(head, {s.name: 0 for s in steps})}")
        config = _deep_copy(steps[index].config)
        set_path(config, rest.split("."), value, item)
        steps[index] = Step(steps[index].name, steps[index].stage, config)
    return recipe_out


def _sandbox_choice(value: Any, path: str) -> str:
    from reasonkit.sandbox.stage import CHOICES

    if value not in CHOICES:
        raise UserError(f"{path}: sandbox: expected one of {', '.join(CHOICES)}; found {value!r}")
    return value


def _compare_pairs(raw: Any, steps: list[Step], path: str) -> tuple[tuple[str, str], ...]:
    """``compare: [[eval_a, eval_b], ...]``: each a pair of eval step names of this recipe.

    >>> s = [Step("e1", "eval"), Step("e2", "eval")]
    >>> _compare_pairs([["e1", "e2"]], s, "r.yaml")
    (('e1', 'e2'),)
    >>> _compare_pairs([["e1", "e3"]], s, "r.yaml")
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: r.yaml: compare[0]: e3 is not an eval step of this recipe (eval steps: e1, e2)
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise UserError(f"{path}: compare: expected a list of [eval step A, eval step B] pairs")
    evals = [s.name for s in steps if s.stage == "eval"]
    pairs = []
    for i, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise UserError(f"{path}: compare[{i}]: expected [eval step A, eval step B], found {pair!r}")
        for name in pair:
            if name not in evals:
                raise UserError(
                    f"{path}: compare[{i}]: {name} is not an eval step of this recipe (eval steps: {', '.join(evals)})"
                )
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def placeholders(value: Any) -> list[str]:
    """Every ``${name}`` anywhere inside a config value: step names and builtins."""
    if isinstance(value, str):
        return REF.findall(value)
    if isinstance(value, dict):
        return [r for v in value.values() for r in placeholders(v)]
    if isinstance(value, (list, tuple)):
        return [r for v in value for r in placeholders(v)]
    return []


def references(value: Any) -> list[str]:
    """Step names referenced anywhere inside a config value."""
    return [r for r in placeholders(value) if r not in BUILTINS]


def resolve(value: Any, recipe: Recipe) -> Any:
    """Replace every ``${step}`` with that step's output directory."""
    if isinstance(value, str):
        return REF.sub(lambda m: BUILTINS.get(m.group(1)) or step_dir(recipe, m.group(1)), value)
    if isinstance(value, dict):
        return {k: resolve(v, recipe) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, recipe) for v in value]
    return value


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
