"""Hostile answers each end within the timeout as None with a reason, and the run goes on."""

import time

import pytest

from reasonkit.filters.base import apply
from reasonkit.filters.math.extract import extract_answer
from reasonkit.filters.math.pool import TimeoutPool
from reasonkit.filters.math.verify import Verifier, VerifyFilter

from ...helpers.synthetic import trace, traces_table

TIMEOUT = 1.0

ADVERSARIAL = {
    "megabyte": "7" * 1_000_000,
    "nested_braces": "{" * 10_000 + "}" * 10_000,
    "tower": "5^(5^(5^5))",
    "latex_tower": "9^{9^{9}}",
    "nul": "4\x002",
    "lone_surrogate": "\ud800" + "1",
    "deep_braces": "{" * 450 + "1" + "}" * 450,  # under the length cap: reaches math-verify
    "latex_garbage": r"\frac{\frac{\frac{" + r"\sqrt{" * 150,
}


@pytest.fixture(scope="module")
def verifier():
    v = Verifier("math", timeout=TIMEOUT, workers=2)
    yield v
    v.close()


def test_each_adversarial_answer_is_none_with_a_reason(verifier):
    names = list(ADVERSARIAL)
    pairs = [(ADVERSARIAL[n], "5") for n in names] + [("5", "5"), (r"\frac{10}{2}", "5")]
    start = time.perf_counter()
    results = verifier.check(pairs)
    elapsed = time.perf_counter() - start
    for name, (ok, why) in zip(names, results):
        assert ok is None or ok is False, name  # never a crash, never "correct"
        if ok is None:
            assert why, name
    assert results[names.index("latex_tower")] == (None, "timeout")
    assert results[-2:] == [(True, None), (True, None)]  # the run went on, with live workers
    # Stuck items cost one timeout each, two workers in parallel; the rest is fast.
    assert elapsed < TIMEOUT * len(names) + 5


def test_adversarial_responses_through_the_filter(verifier):
    rows = [
        trace(f"adv{i}", 0, response=rf"So \boxed{{{text}}}.", answer="5")
        for i, text in enumerate(ADVERSARIAL.values())
        if "\ud800" not in text
    ]  # Arrow strings are UTF-8: a lone surrogate cannot be in a table
    rows.append(trace("ok", 0, response=r"\boxed{5}", answer="5"))
    f = VerifyFilter("math", timeout=TIMEOUT, workers=2)
    f.verifier = verifier
    out = apply([f], traces_table(rows))
    reasons = out.column("drop_reason").to_pylist()
    assert reasons[-1] is None and out.column("correct").to_pylist()[-1] is True
    whys = out.column("verify_reason").to_pylist()
    for reason, why in zip(reasons[:-1], whys[:-1]):
        assert reason in ("no_answer", "unverifiable", "wrong")
        assert (reason != "wrong") == (why is not None)
    # Runaway boxes are no answer (too long to be one, or never closed); the rest reach the verifier.
    assert sorted(w for r, w in zip(reasons, whys) if r == "no_answer") == [
        "answer_too_long",
        "answer_too_long",
        "unbalanced_box",
    ]


def test_extraction_of_hostile_text_is_bounded():
    for text in ADVERSARIAL.values():
        start = time.perf_counter()
        extract_answer(rf"\boxed{{{text}}}")
        assert time.perf_counter() - start < 0.5


def test_pool_replaces_a_worker_that_dies():
    with TimeoutPool("os:_exit", workers=1, timeout=5, on_crash=("died",)) as pool:
        with pytest.raises(RuntimeError, match="die before answering"):
            pool.map([(1,), (2,), (3,)])


def test_pool_survives_one_crash_among_good_items():
    with TimeoutPool("reasonkit.filters.math.pool:_echo", workers=1, timeout=5) as pool:
        assert pool.map([("a",)]) == [("a", None)]
        pool.workers[0].proc.kill()  # dies while idle: replaced before the next chunk
        pool.workers[0].proc.join()
        assert pool.map([("b",), ("c",)]) == [("b", None), ("c", None)]
