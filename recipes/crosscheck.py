"""Checks across a recipe's steps (and across recipes) that no single step's config can make.

- A path into what a train step writes (``${sft}/merged``, or another shipped recipe's
  ``runs/r1-distill-qwen-1.5b/sft/merged``) names a folder that step writes: ``model`` for full
  weights, ``adapter`` for LoRA, and ``merged`` too when LoRA is merged (distill/train.py OUTPUTS).
  Otherwise the step that reads it fails when it starts, after everything before it ran.
- On-policy pairs: a DPO step trained on pairs its recipe sampled (generate -> filter -> pairs, or
  label-steps) trains the model that sampled them; an eval of a trained adapter loads the base it was
  trained on. Overriding only the sampler (``--set samples.teacher=...``) leaves the pairs off-policy.

Each returns lines ``step.key: what is wrong; expected ...``; ``distill run`` and ``--plan`` refuse on any.
"""

from __future__ import annotations

from pathlib import Path

from reasonkit.recipes.recipe import references

_MODEL_KEYS = {
    "train": ("student", "reward_model"),
    "eval": ("model", "adapter"),
    "generate": ("teacher",),
    "prepare-student": ("model",),
    "label-steps": ("policy",),
    "critique": ("judge",),
    "score": ("model",),
}


def train_outputs(config) -> set[str]:
    """The model folders a train step writes into its OUT."""
    if config.full:
        return {"model"}
    return {"adapter", "merged"} if config.merge else {"adapter"}


def check_paths(planned: list, shipped: dict) -> list[str]:
    """``shipped``: {out directory: {step name: train config}} of the shipped recipes (another run's output)."""
    own = {p.step.name: p for p in planned}
    lines = []
    for p in planned:
        for key in _MODEL_KEYS.get(p.step.stage, ()):
            raw = str(p.step.config.get(key) or "")
            refs = references(raw)
            if refs and refs[0] in own and own[refs[0]].step.stage == "train":
                sub = raw.split("}", 1)[1].strip("/")
                writes = train_outputs(own[refs[0]].config)
                if sub and sub.split("/")[0] not in writes:
                    lines.append(
                        f"{p.step.name}.{key}: {raw}: step {refs[0]} writes "
                        f"{_listed(refs[0], writes, own[refs[0]].config)}, "
                        f"not {refs[0]}/{sub}"
                    )
            elif raw and not refs and not Path(raw).exists():
                found = _in_shipped(raw, shipped)
                if found:
                    lines.append(f"{p.step.name}.{key}: {raw}: {found}")
    return lines


def _listed(name: str, writes: set[str], config) -> str:
    how = "full: true" if config.full else ("LoRA, merge: true" if config.merge else "LoRA, merge: false")
    return " and ".join(f"{name}/{w}" for w in sorted(writes)) + f" ({how})"


def _in_shipped(path: str, shipped: dict) -> str | None:
    """Why ``path`` (under a shipped recipe's out) is not a folder its step writes; None when it is, or unknown."""
    parts = Path(path).parts
    for out, steps in shipped.items():
        head = Path(out).parts
        if tuple(parts[: len(head)]) != head or len(parts) < len(head) + 2:
            continue
        step, sub = parts[len(head)], parts[len(head) + 1]
        config = steps.get(step)
        if config is not None and sub not in train_outputs(config):
            return f"the recipe writing {out} has step {step} write {_listed(step, train_outputs(config), config)}, not {step}/{sub}"  # noqa: E501
    return None


def check_on_policy(planned: list) -> list[str]:
    """DPO on pairs its recipe sampled trains the sampler; an eval of a trained adapter loads its base."""
    own = {p.step.name: p for p in planned}
    lines = []
    for p in planned:
        if p.step.stage == "train" and getattr(p.config, "method", None) == "dpo":
            sampler = _sampler(p.step.config.get("data"), own)
            if sampler is not None:
                step, key, value = sampler
                student = p.step.config.get("student")
                if str(student) != str(value):
                    lines.append(
                        f"{p.step.name}.student: {student} is not the model that sampled its pairs "
                        f"({step}.{key}: {value}): the pairs are off-policy; expected {value} (--set "
                        f"{p.step.name}.student=... with the sampler's value)"
                    )
        if p.step.stage == "eval" and p.step.config.get("adapter"):
            refs = references(str(p.step.config["adapter"]))
            source = own.get(refs[0]) if refs else None
            if source is not None and source.step.stage == "train":
                base, model = source.step.config.get("student"), p.step.config.get("model")
                if str(base) != str(model):
                    lines.append(
                        f"{p.step.name}.model: {model} is not the base {refs[0]}'s adapter was trained on "
                        f"({refs[0]}.student: {base}); expected {base}"
                    )
    return lines


def _sampler(data, own: dict, depth: int = 0):
    """(step, key, value) of the generate/label-steps step whose samples ``data`` derives from, else None."""
    refs = references(str(data or ""))
    if not refs or refs[0] not in own or depth > 8:
        return None
    p = own[refs[0]]
    if p.step.stage == "generate":
        return p.step.name, "teacher", p.step.config.get("teacher")
    if p.step.stage == "label-steps":
        return p.step.name, "policy", p.step.config.get("policy")
    if p.step.stage in ("pairs", "filter"):
        upstream = p.step.config.get("verdicts") or p.step.config.get("traces")
        return _sampler(upstream, own, depth + 1)
    return None


def shipped_outputs() -> dict:
    """{out: {step: train config}} for every shipped recipe, read from recipes/*.yaml (validated loosely)."""
    from reasonkit.config import from_dict, load_yaml
    from reasonkit.distill.config import TrainConfig

    out = {}
    for path in sorted(Path(__file__).resolve().parent.glob("*.yaml")):
        try:
            data = load_yaml(str(path))
            steps = {}
            for s in data.get("steps", []):
                if s.get("stage") == "train":
                    steps[s["name"]] = from_dict(TrainConfig, {**s.get("with", {}), "out": "o"}, s["name"])
            out[str(data.get("out", ""))] = steps
        except Exception:  # noqa: BLE001 - a shipped recipe's own errors are its own test's to report
            continue
    return out


def problems(planned: list) -> list[str]:
    """Every cross-step problem of a validated recipe (``planned``: runner.validate's list)."""
    return check_paths(planned, shipped_outputs()) + check_on_policy(planned)
