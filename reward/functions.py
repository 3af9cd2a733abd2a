r"""Reward functions for GRPO: the filter's verdicts, as numbers.

Each reward runs the code the filter runs on the same text, so a reward and a filter verdict can
never disagree: the same think split (think.py), the same answer extractor (filters/math/extract.py),
the same :class:`~reasonkit.filters.math.verify.Verifier` (integer fast path, then math-verify in the
killable pool), the same format checks (filters/format.py) and the same language ratio
(filters/language.py). They have TRL's reward signature,
``(prompts, completions, completion_ids=None, **columns)`` (every dataset column but ``prompt``
arrives as a list), and return one float or ``None`` ("no reward": the sample cannot be judged)
per completion.

=============  ====================================================================================
``accuracy``   1.0 right, 0.0 wrong or no answer, None when the verifier cannot tell or the row has
               no gold ``answer`` (the filter's ``correct``: True / False or ``no_answer`` / None).
               The answer is read from the response (after ``</think>``), never from the reasoning;
               a truncated completion has no answer (0.0), as in evaluation (R1's protocol).
``format``     1.0 when the filter's format checks pass with a think block required and a boxed
               answer required (closed ``<think>``, not truncated, a response, not repetitive) *and*
               the response holds exactly one box, which the extractor reads; else 0.0.
``language``   R1's language-consistency reward: the language filter's ``lang_ratio`` of the chain of
               thought (share of target-language words); None when it has no words to judge.
``length``     DAPO's soft overlong punishment (TRL's): 0 up to ``max_len - cache`` tokens, then
               linear down to -1 at ``max_len``.
``cosine``     open-r1's cosine-scaled reward: a right answer earns 1.0 short down to 0.5 at
               ``max_len``, a wrong one -1.0 short up to -0.5 long; None where accuracy is None.
``arithmetic`` share of the chain of thought's integer arithmetic claims that are true
               (:mod:`reasonkit.filters.math.arithmetic`); None when it makes none.
``code``       1.0 when the response's last Python block passes every test of the row's ``tests`` column in
               the sandbox (``distill filter --verifier code``'s checker, :mod:`reasonkit.filters.code.verify`),
               0.0 when it fails one or there is no program (or the completion is truncated), None when the
               row has no tests or the sandbox itself failed.
``rm``         a trained reward model's score, the number ``distill score`` writes for the same
               completion (:mod:`reasonkit.reward.model`; ``make_rewards(reward_model=PATH)``).
=============  ====================================================================================

The chain of thought is the reasoning inside the think block, or the whole completion when there is
none (as the language filter reads it). A completion arrives as a string or, for conversational
prompts, as a list of messages (the last assistant message is the completion; a
``reasoning_content`` field is joined back as a think block). When the prompt opened the think block
(a chat template that ends the generation prompt with ``<think>``, R1's and QwQ's), the completion
holds only ``</think>``: a rendered string prompt says so itself (:func:`~reasonkit.think.opens_think`),
an assistant prefill in a conversational prompt too, otherwise pass ``prefilled=True`` to
:func:`make_rewards`.

``length`` and ``cosine`` need the generation limit, and ``accuracy``/``format`` need it to know a
truncated completion (one that used all ``max_completion_length`` tokens without ending): build
them with :func:`make_rewards`. The module-level functions know no limit (a truncated completion is
judged on its text) and ``length``/``cosine`` refuse to run without one. In a TRL script::

    funcs, weights = make_rewards({"accuracy": 1.0, "format": 0.2}, max_completion_length=1024)
    GRPOTrainer(model, reward_funcs=funcs, args=GRPOConfig(reward_weights=weights, max_completion_length=1024), ...)

TRL sums the weighted rewards leaving out the ``None`` ones (an unverifiable answer adds nothing,
the other rewards still count); a completion every function says ``None`` to gets no advantage.

>>> from reasonkit.reward.functions import accuracy_reward
>>> completions = [r"<think>17 * 23 = 391</think>The answer is \boxed{391}.",
...                r"<think>17 * 23 = 381</think>The answer is \boxed{381}.",
...                r"<think>17 * 23 = \boxed{391}</think>I give up.",  # a box in the reasoning is no answer
...                r"<think>17 * 23 = 391</think>\boxed{391}"]
>>> accuracy_reward(["Compute 17 x 23"] * 4, completions, answer=["391", "391", "391", None])
[1.0, 0.0, 0.0, None]
>>> format_reward(["Compute 17 x 23"] * 2, [r"<think>ok</think>\boxed{391}", r"<think>ok</think>\boxed{3} or \boxed{4}"])
[1.0, 0.0]
>>> arithmetic_reward(["Compute 17 x 23"], ["<think>17 * 3 = 51\n170 + 51 = 231</think>\\boxed{231}"])
[0.5]
>>> fns, weights = make_rewards({"accuracy": 1.0, "format": 0.2}, max_completion_length=512)
>>> [f.__name__ for f in fns], weights
(['accuracy', 'format'], [1.0, 0.2])
"""  # noqa: E501

from __future__ import annotations

import atexit
import math
from collections.abc import Callable, Collection, Sequence

from reasonkit.errors import UserError
from reasonkit.reward.completions import Sample, completion_text, prompt_opens_think, samples  # noqa: F401 (re-exported)
from reasonkit.reward.setup import RewardSetup

#: The reward names :func:`make_rewards` knows, in the order the docs list them.
NAMES = ("accuracy", "format", "language", "length", "cosine", "arithmetic", "code")
#: open-r1's cosine-scaled reward bounds (min_value_wrong, max_value_wrong, min_value_correct, max_value_correct).
COSINE_BOUNDS = (-1.0, -0.5, 0.5, 1.0)
#: DAPO's overlong cache when none is given: its 4,096 of 20,480 tokens, a fifth of the limit.
OVERLONG_CACHE_SHARE = 0.2
#: Verdicts remembered per (verifier, prediction, gold): GRPO samples the same answers again and again.
MEMO_SIZE = 65_536


class Reward:
    """One reward function: a callable object (not a closure) so TRL can pickle it to a rollout worker.

    ``__name__`` is the reward's name, so TRL logs ``rewards/<name>/mean``.
    """

    def __init__(self, name: str, setup: RewardSetup = RewardSetup()):
        if name not in NAMES:
            raise _unknown(name)
        self.__name__, self.setup = name, setup

    def __call__(
        self, prompts: Sequence, completions: Sequence, completion_ids: Sequence | None = None, **columns
    ) -> list[float | None]:
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        setup = self.setup
        parsed = samples(
            prompts,
            completions,
            completion_ids,
            prefilled=setup.prefilled,
            limit=setup.max_completion_length,
            eos_token_ids=setup.eos_token_ids,
        )
        return _SCORERS[self.__name__](self.setup, parsed, completion_ids, columns)

    def __repr__(self) -> str:
        return f"Reward({self.__name__!r}, {self.setup!r})"


# -- accuracy ------------------------------------------------------------------------------------

_VERIFIERS: dict = {}
_MEMO: dict = {}


def _verifier(kind: str, timeout: float):
    """The process-wide Verifier of ``kind`` (its math-verify pool starts on the first answer that
    needs it and is closed at exit)."""
    key = (kind, timeout)
    if key not in _VERIFIERS:
        from reasonkit.filters.math.verify import Verifier

        if not _VERIFIERS:
            atexit.register(close)
        _VERIFIERS[key] = Verifier(kind, timeout=timeout)
    return _VERIFIERS[key]


def close() -> None:
    """Stop the verifiers' pools (run at exit; safe to call any time: they restart when needed)."""
    for verifier in _VERIFIERS.values():
        verifier.close()
    _VERIFIERS.clear()


def _gold(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value if isinstance(value, str) else str(value)


def correctness(setup: RewardSetup, parsed: Sequence[Sample], answers: Sequence | None) -> list[bool | None]:
    """The verify filter's ``correct`` for each sample, except that no answer (none extracted, or
    truncated) is False here: a reward has no ``drop_reason`` to say ``no_answer`` with."""
    from reasonkit.filters.math.extract import extract_answer

    if answers is None:
        raise UserError(
            "the accuracy reward needs an 'answer' column (the gold answer of each prompt) "
            "in the prompts table; it has none"
        )
    if len(answers) != len(parsed):
        raise ValueError(f"{len(answers)} answers for {len(parsed)} completions")
    golds = [_gold(a) for a in answers]
    extract = extract_answer
    if setup.trajectory:  # a plain short final answer counts too, as the filter reads a trajectory's
        from reasonkit.filters.trajectory import final_answer as extract
    preds = [None if s.truncated else extract(s.response)[0] for s in parsed]
    out: list[bool | None] = [None] * len(parsed)
    todo = []
    for i, (pred, gold) in enumerate(zip(preds, golds)):
        if gold is None or not gold.strip():
            continue  # no gold: None, whatever the completion says
        if pred is None:
            out[i] = False
        elif (setup.verifier, setup.trajectory, pred, gold) in _MEMO:
            out[i] = _MEMO[(setup.verifier, setup.trajectory, pred, gold)]
        else:
            todo.append(i)
    if todo:
        verifier = _verifier(setup.verifier, setup.verify_timeout)
        if setup.trajectory:
            from reasonkit.filters.trajectory import TextAwareVerifier

            verifier = TextAwareVerifier(verifier)
        checked = verifier.check([(preds[i], golds[i]) for i in todo])
        if len(_MEMO) > MEMO_SIZE:
            _MEMO.clear()
        for i, (ok, why) in zip(todo, checked):
            out[i] = ok
            if why not in ("timeout", "worker_died"):  # a verdict, not an accident of load
                _MEMO[(setup.verifier, setup.trajectory, preds[i], golds[i])] = ok
    return out


def _accuracy(setup, parsed, completion_ids, columns):
    return [None if ok is None else float(ok) for ok in correctness(setup, parsed, columns.get("answer"))]


# -- format, language, arithmetic -----------------------------------------------------------------


def format_options() -> dict:
    """format_reason's keywords for the format reward: a think block and a box required, the rest
    as ``distill filter`` defaults (truncated dropped, repetition limit)."""
    from reasonkit.filters.config import FilterConfig

    fields = FilterConfig.__dataclass_fields__
    return {
        "drop_truncated": True,
        "require_boxed": True,
        "think": "required",
        "max_repetition": fields["max_repetition"].default,
        "repetition_ngram": fields["repetition_ngram"].default,
    }


def _format(setup, parsed, completion_ids, columns):
    from reasonkit.filters.format import format_reason
    from reasonkit.filters.math.extract import BOX, final_boxes  # the extractor's own box pattern

    options = format_options()
    rewards = []
    for s in parsed:
        reason = format_reason(
            s.text,
            s.response,
            "length" if s.truncated else "stop",
            s.tokens,
            opened=s.reasoning is not None,
            **options,
        )
        one_box = reason is None and len(BOX.findall(s.response)) == 1 and final_boxes(s.response)[0] is not None
        rewards.append(1.0 if one_box else 0.0)
    return rewards


_LANG_CACHES: dict = {}


def _language(setup, parsed, completion_ids, columns):
    from reasonkit.filters.language import DEFAULT_CANDIDATES, lang_ratios

    candidates = setup.lang_candidates or DEFAULT_CANDIDATES
    cache = _LANG_CACHES.setdefault((setup.lang, candidates), {})
    return lang_ratios([s.chain_of_thought for s in parsed], setup.lang, candidates, cache)


def _arithmetic(setup, parsed, completion_ids, columns):
    from reasonkit.filters.math.arithmetic import score

    rewards = []
    for s in parsed:
        true, total = score(s.chain_of_thought)
        rewards.append(true / total if total else None)
    return rewards


def _code(setup, parsed, completion_ids, columns):
    from reasonkit.filters.code.verify import code_scores
    from reasonkit.filters.math.verify import default_workers

    tests = columns.get(setup.tests_column)
    if tests is None:
        raise UserError(
            f"the code reward needs a {setup.tests_column!r} column (each prompt's tests, JSON) in the "
            "prompts table; it has none"
        )
    if len(tests) != len(parsed):
        raise ValueError(f"{len(tests)} test sets for {len(parsed)} completions")
    responses = [None if s.truncated else s.response for s in parsed]
    return code_scores(responses, tests, timeout=setup.verify_timeout, workers=default_workers())


# -- length ---------------------------------------------------------------------------------------


def _limit(setup: RewardSetup, name: str, completion_ids) -> int:
    if setup.max_completion_length is None:
        raise UserError(
            f"the {name} reward needs the generation limit: build it with "
            f"make_rewards({{{name!r}: 1.0}}, max_completion_length=N)"
        )
    if completion_ids is None:
        raise UserError(f"the {name} reward needs completion_ids (TRL's GRPOTrainer passes them)")
    return setup.max_completion_length


def overlong_cache(setup: RewardSetup) -> int:
    limit = setup.max_completion_length or 0
    return setup.overlong_cache if setup.overlong_cache is not None else max(1, round(limit * OVERLONG_CACHE_SHARE))


def _length(setup, parsed, completion_ids, columns):
    from trl.rewards import get_soft_overlong_punishment

    limit = _limit(setup, "length", completion_ids)
    return get_soft_overlong_punishment(limit, overlong_cache(setup))(completion_ids)


def _cosine(setup, parsed, completion_ids, columns):
    # TRL's get_cosine_scaled_reward computes the same curve, but judges correctness with its own
    # math-verify call (no extractor, no killable pool, no None for "cannot tell"): only the curve is
    # repeated here, with the accuracy above.
    limit = _limit(setup, "cosine", completion_ids)
    wrong_short, wrong_long, right_long, right_short = COSINE_BOUNDS
    rewards: list[float | None] = []
    for ok, ids in zip(correctness(setup, parsed, columns.get("answer")), completion_ids):
        if ok is None:
            rewards.append(None)
            continue
        cosine = math.cos(min(len(ids) / limit, 1.0) * math.pi)  # 1 when short, -1 at the limit
        lo, hi = (right_long, right_short) if ok else (wrong_long, wrong_short)
        rewards.append(lo + 0.5 * (hi - lo) * (1.0 + cosine))
    return rewards


_SCORERS = {
    "accuracy": _accuracy,
    "format": _format,
    "language": _language,
    "length": _length,
    "cosine": _cosine,
    "arithmetic": _arithmetic,
    "code": _code,
}

accuracy_reward = Reward("accuracy")
format_reward = Reward("format")
language_reward = Reward("language")
soft_overlong_reward = Reward("length")
cosine_length_reward = Reward("cosine")
arithmetic_reward = Reward("arithmetic")
code_reward = Reward("code")

#: name -> the module-level reward (no generation limit, English, the math verifier).
REWARDS: dict[str, Reward] = {
    "accuracy": accuracy_reward,
    "format": format_reward,
    "language": language_reward,
    "length": soft_overlong_reward,
    "cosine": cosine_length_reward,
    "arithmetic": arithmetic_reward,
    "code": code_reward,
}


def _unknown(name: str) -> UserError:
    return UserError(f"unknown reward {name!r}; expected one of {', '.join(NAMES)}")


def make_rewards(
    weights: dict[str, float],
    *,
    max_completion_length: int,
    lang: str = "en",
    verifier: str = "math",
    overlong_cache: int | None = None,
    verify_timeout: float = 5.0,
    prefilled: bool = False,
    eos_token_ids: Collection[int] = (),
    lang_candidates: Sequence[str] | None = None,
    reward_model: str | None = None,
    trajectory: bool = False,
) -> tuple[list[Callable], list[float]]:
    """The reward functions named in ``weights`` and their weights, in that order, for
    ``GRPOTrainer(reward_funcs=...)`` and ``GRPOConfig(reward_weights=...)``.

    ``prefilled``: the chat template opens the think block in the generation prompt (the completion starts inside it);
    ``eos_token_ids`` tell a completion that ended on the very last token from a cut one. ``reward_model``: the model
    the ``rm`` reward scores with (reward/model.py). ``trajectory``: completions are tool-use trajectories
    (GRPO with tools), whose final answer accuracy reads as ``distill filter`` reads a trajectory's
    (:func:`reasonkit.filters.trajectory.final_answer`, :class:`~reasonkit.filters.trajectory.TextAwareVerifier`). A
    UserError for an unknown name, a bad weight or limit, an unknown verifier or language, ``rm`` without a model.

    >>> make_rewards({"accuracy": 1.0, "speed": 1.0}, max_completion_length=64)
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: unknown reward 'speed'; expected one of accuracy, format, language, length, cosine, arithmetic, code
    """  # noqa: E501
    _check_arguments(weights, max_completion_length, verifier, verify_timeout, overlong_cache)
    setup = RewardSetup(
        verifier=verifier,
        verify_timeout=float(verify_timeout),
        lang=lang,
        max_completion_length=max_completion_length,
        overlong_cache=overlong_cache,
        prefilled=prefilled,
        eos_token_ids=tuple(int(i) for i in eos_token_ids),
        trajectory=bool(trajectory),
        lang_candidates=None if lang_candidates is None else tuple(lang_candidates),
    )
    if "language" in weights:
        from reasonkit.filters.language import language_scripts

        for code in (lang, *(lang_candidates or ())):
            language_scripts(code)  # an unknown code fails now, not at the first step
    if ("rm" in weights) != (reward_model is not None):
        raise UserError("the rm reward and its reward model come together: --reward rm=PATH (or rm=PATH:WEIGHT)")
    if reward_model is not None:
        from reasonkit.reward.model import ModelReward

        model_reward = ModelReward(reward_model, setup)  # a path that is no reward model fails here, before training
    return (
        [model_reward if name == "rm" else Reward(name, setup) for name in weights],
        [float(w) for w in weights.values()],
    )


def _check_arguments(
    weights: dict[str, float],
    max_completion_length: int,
    verifier: str,
    verify_timeout: float,
    overlong_cache: int | None,
) -> None:
    """make_rewards' arguments, each a UserError naming what is wrong: the names and weights, the length limits,
    the verifier and its timeout."""
    from reasonkit.filters.math.verify import VERIFIERS

    if not weights:
        raise UserError(f"no reward asked for; expected one or more of {', '.join(NAMES)}")
    for name, weight in weights.items():
        if name not in NAMES and name != "rm":
            raise _unknown(name)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise UserError(f"reward {name}: the weight must be a finite number, got {weight!r}")
    if (
        isinstance(max_completion_length, bool)
        or not isinstance(max_completion_length, int)
        or max_completion_length < 1
    ):
        raise UserError(f"max_completion_length must be a positive integer, got {max_completion_length!r}")
    if verifier not in VERIFIERS:
        raise UserError(f"unknown verifier {verifier!r}; expected one of {', '.join(VERIFIERS)}")
    if not verify_timeout > 0:
        raise UserError(f"verify_timeout must be > 0 seconds, got {verify_timeout}")
    if overlong_cache is not None and not 1 <= overlong_cache <= max_completion_length:
        raise UserError(
            f"overlong_cache must be within [1, max_completion_length={max_completion_length}], got {overlong_cache}"
        )
