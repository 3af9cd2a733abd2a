"""What each evaluated model of a recipe cost in teacher tokens: report.md's "Teacher tokens" table.

A model's rung is the last train step its eval reads (``eval_student_dpo`` reads ``sft`` and ``dpo``: the rung is
``dpo``). Its teacher tokens are those of every step upstream of that rung (the rung included), read from what the
steps recorded, nothing recomputed:

- **generated**: the completion tokens of each ``generate`` step whose model is not made by the recipe (a teacher,
  not a student sampling itself: ``teacher: ${sft}/model`` is the student), its manifest's ``tokens``;
- **scored**: the completion tokens an on-policy distillation teacher scored (``train`` with ``method: distill``,
  its report.json's ``distill.tokens.teacher_scored``).

So a rung's cost includes what the model it starts from cost: GRPO on the SFT student costs the SFT student's
traces, on-policy distillation from it costs those plus what its own teacher scored.

>>> from types import SimpleNamespace as S
>>> steps = [S(name="traces", stage="generate", config={"teacher": "T"}),
...          S(name="sft", stage="train", config={"data": "${traces}/sft"}),
...          S(name="samples", stage="generate", config={"teacher": "${sft}/model"}),
...          S(name="dpo", stage="train", config={"student": "${sft}/model", "data": "${samples}"}),
...          S(name="eval_dpo", stage="eval", config={"model": "${sft}/model", "adapter": "${dpo}/adapter"})]
>>> [(e, rung, sorted(up)) for e, rung, up in rungs(steps)]
[('eval_dpo', 'dpo', ['dpo', 'samples', 'sft', 'traces'])]
>>> teacher_generators(steps)
['traces']
"""

from __future__ import annotations

import json
from pathlib import Path

from reasonkit.recipes.recipe import Recipe, references, step_dir


def upstream(steps, name: str) -> set[str]:
    """``name`` and every step it reads, directly or through others."""
    by_name = {s.name: s for s in steps}
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in by_name:
            continue
        seen.add(current)
        todo.extend(references(by_name[current].config))
    return seen


def rungs(steps) -> list[tuple[str, str, set[str]]]:
    """(eval step, the last train step it reads, that train step's upstream) for every eval of a trained model."""
    order = {s.name: i for i, s in enumerate(steps)}
    trains = {s.name for s in steps if s.stage == "train"}
    found = []
    for step in steps:
        if step.stage != "eval":
            continue
        read = [n for n in references(step.config) if n in trains]
        if read:
            rung = max(read, key=order.__getitem__)
            found.append((step.name, rung, upstream(steps, rung)))
    return found


def teacher_generators(steps) -> list[str]:
    """The generate steps whose model comes from outside the recipe (a teacher's traces, not a student's samples)."""
    return [s.name for s in steps if s.stage == "generate" and not references(s.config.get("teacher"))]


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def costs(recipe: Recipe) -> list[dict]:
    """One row per eval of a trained model: its rung, pass@1 (None until evaluated) and teacher tokens (None where
    an upstream step has not recorded them yet)."""
    generators = set(teacher_generators(recipe.steps))
    stages = {s.name: s for s in recipe.steps}
    rows = []
    for eval_name, rung, up in rungs(recipe.steps):
        generated = scored = 0
        for name in sorted(up):
            d = Path(step_dir(recipe, name))
            if name in generators:
                tokens = _json(d / "_manifest.json").get("tokens")
                generated = None if tokens is None or generated is None else generated + tokens
            elif stages[name].stage == "train" and stages[name].config.get("method") == "distill":
                tokens = (_json(d / "report.json").get("distill") or {}).get("tokens", {}).get("teacher_scored")
                scored = None if tokens is None or scored is None else scored + tokens
        summary = _json(Path(step_dir(recipe, eval_name)) / "summary.json")
        rows.append(
            {
                "eval": eval_name,
                "rung": rung,
                "pass@1": summary.get("pass@1"),
                "generated": generated,
                "scored": scored,
            }
        )
    return rows


def section(recipe: Recipe) -> str:
    """report.md's table, or nothing where the recipe evaluates no trained model."""
    rows = costs(recipe)
    if not rows:
        return ""

    def count(n):
        return "-" if n is None else f"{n:,}"

    lines = [
        "## Teacher tokens\n",
        "What each evaluated model cost in teacher tokens, its rung's upstream steps included "
        "(generated: a teacher's traces; scored: an on-policy distillation teacher's; recipes/teacher_tokens.py).\n",
        "| eval | rung | pass@1 | teacher tokens generated | scored | total |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        total = None if r["generated"] is None or r["scored"] is None else r["generated"] + r["scored"]
        p = "-" if r["pass@1"] is None else f"{r['pass@1']:.3f}"
        lines.append(
            f"| {r['eval']} | {r['rung']} | {p} | {count(r['generated'])} | {count(r['scored'])} | {count(total)} |"
        )
    return "\n".join(lines) + "\n"
