"""The judge's model behind any gen backend, and asking it a batch of prompts.

The backends are the generate stage's (gen/): a judge is one more client of the same protocol, so
vLLM, an OpenAI-compatible server and transformers all work, with the same preflight checks. Each
prompt is one request with its own seed derived from ``(seed, key)``, so a resumed run asks
exactly what an uninterrupted one asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reasonkit.errors import UserError
from reasonkit.judges.config import JudgeModel


def generation_config(model: JudgeModel, seed: int = 0):
    """The generate stage's config of a judge's model: its sampling and backend groups whole (gen/settings.py),
    so a judge runs its model as ``distill generate`` with the same settings would."""
    from reasonkit.gen.run import GenerateConfig
    from reasonkit.gen.settings import BackendSettings, SamplingSettings, values_of

    return GenerateConfig(
        prompts="",
        teacher=model.judge,
        out="",
        **values_of(model, SamplingSettings, seed=seed),
        **values_of(model, BackendSettings),
    )


def make_backend(model: JudgeModel, *, seed: int = 0):
    """Build the backend ``model`` names (preflight first: a bad setting fails before any load)."""
    from reasonkit.gen.render import load_chat_template
    from reasonkit.gen.run import make_backend as gen_backend
    from reasonkit.gen.run import preflight

    try:
        config = generation_config(model, seed)
        info = preflight(config)
        return gen_backend(config, info=info, chat_template=load_chat_template(model.chat_template))
    except UserError as e:  # the generate stage names its model --teacher; here it is --judge
        raise UserError(str(e).replace("--teacher ", "--judge ")) from None


@dataclass(frozen=True)
class Answer:
    """One judge reply: its text (None when the backend gave none) and what it cost."""

    text: str | None
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def failure(self) -> str | None:
        """Why this reply cannot be read at all (None: it can)."""
        if self.finish_reason == "error":
            return "judge request failed (finish_reason=error)"
        if self.text is None:
            return "no reply from the judge"
        return None


def ask(backend, prompts: Mapping[str, Sequence[dict]], model: JudgeModel, seed: int) -> dict[str, Answer]:
    """Send every ``key -> messages`` prompt once; replies by key. Order of replies does not matter."""
    from reasonkit.gen.backend import Request, derive_seed
    from reasonkit.think import join

    if not prompts:
        return {}
    requests = [
        Request(
            id=key, messages=[dict(m) for m in messages], n=1, sampling=model.request_sampling(derive_seed(seed, key))
        )
        for key, messages in prompts.items()
    ]
    answers: dict[str, Answer] = {}
    for c in backend.generate(requests):
        text = join(c.reasoning, c.text) if c.reasoning is not None else c.text
        answers[c.id] = Answer(text, c.finish_reason, int(c.prompt_tokens or 0), int(c.completion_tokens or 0))
    for key in prompts:
        answers.setdefault(key, Answer(None, "missing"))
    return answers


def tokens(answers: Mapping[str, Answer]) -> dict[str, int]:
    return {
        "calls": len(answers),
        "prompt_tokens": sum(a.prompt_tokens for a in answers.values()),
        "completion_tokens": sum(a.completion_tokens for a in answers.values()),
    }
