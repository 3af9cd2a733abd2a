r"""Answer verification: ``correct`` is True, False, or None ("cannot tell", with a reason).

Four paths. A prediction written exactly as its gold (up to ``\dfrac``/``\tfrac`` for ``\frac`` and
``\left``/``\right``) is correct without parsing. Integer answers (AIME-style: ``042``, ``1,000``, ``42.0``) are
compared as Python ints in this process, in microseconds, never touching sympy. Fractions, radicals, decimals and
intervals or tuples of them are read exactly (:mod:`~reasonkit.filters.math.exact`) where math-verify's verdict is
certain, also in this process. Everything else goes to math-verify in a
:class:`~reasonkit.filters.math.pool.TimeoutPool`, whose deadline turns a hang into ``None`` with
reason ``timeout``. ``None`` is never "wrong": the ``unverifiable`` policy decides whether such a
row is dropped (reason ``unverifiable``; the detail is in the ``verify_reason`` column). A row with
no extracted answer or no gold is not "unverifiable": it is dropped as ``no_answer`` / ``no_gold``.

>>> parse_int(r"\!1{,}000"), parse_int("042"), parse_int("42.0"), parse_int("4.5"), parse_int("1,00")
(1000, 42, 42, None, None)
>>> parse_int("12,345,678"), parse_int("1, 234"), parse_int("2 3")  # only canonical separators
(12345678, None, None)
>>> same_as_written(r"\dfrac{1}{2}", r"\frac{1}{2}"), same_as_written(r"\left(1, 2\right]", "(1, 2]")
(True, True)
>>> same_as_written("(1,2]", "(1, 2]"), same_as_written(r"\leftarrow", "arrow")  # spaces and words count
(False, False)
>>> check_int("042", "42"), check_int("x", "42"), check_int("7", "1/2")
((True, None), (None, 'pred_not_integer'), (None, 'gold_not_integer'))
>>> same_text(r"$\text{Ada Vell}$.", "ada  vell"), same_text("042", "42")  # the exact verifier: text, not value
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa

from reasonkit.engine import usable_cores
from reasonkit.filters.base import RowFilter, update_rows
from reasonkit.filters.math.exact import exact_verdict
from reasonkit.filters.math.extract import MAX_ANSWER, extract_answer

VERIFIERS = ("math", "int", "exact", "none")
# An integer as a model boxes it: optional $...$ and spacing commands around it, a sign, digits
# with one kind of canonical thousands separator throughout (1,234 / 1\,234 / 1{,}234), and an
# optional all-zero decimal part. Anything else ("1, 234", "2 3", "12,34") is not an integer here
# and goes to math-verify, which never reads "2 3" as 23 (deleting every space did).
_INT = re.compile(
    r"\s*\${0,2}(?:\s|\\[,!;: ])*"
    r"([+-]?)(\d{1,3}(?:(,|\\,|\{,\})\d{3})(?:\3\d{3})*|\d+)(?:\.0*)?"
    r"(?:\s|\\[,!;: ])*\${0,2}\s*"
)
_SEPARATORS = re.compile(r"\\,|\{,\}|,")
# Spellings that render alike and that math-verify parses alike. Spaces are never removed: in
# "2 3" or "1, 2" they may separate numbers.
_TEXT = re.compile(r"\\(?:text|textrm|mathrm)\s*\{([^{}]*)\}")
_SAME_AS_WRITTEN = [
    (re.compile(r"\\[dt]frac(?![a-zA-Z])"), r"\\frac"),
    (re.compile(r"\\(?:left|right)(?![a-zA-Z])"), ""),
]


def parse_int(text: str | None) -> int | None:
    """The integer ``text`` spells, or None if it spells anything else (a pure-Python parse, no sympy)."""
    if text is None or len(text) > 80:
        return None
    m = _INT.fullmatch(text)
    if m is None:
        return None
    return int(m.group(1) + _SEPARATORS.sub("", m.group(2)))


def check_int(pred: str, gold: str) -> tuple[bool | None, str | None]:
    """The integer verifier: both sides must be integers."""
    g = parse_int(gold)
    if g is None:
        return None, "gold_not_integer"
    p = parse_int(pred)
    if p is None:
        return None, "pred_not_integer"
    return p == g, None


def _as_written(text: str) -> str:
    for pattern, repl in _SAME_AS_WRITTEN:
        text = pattern.sub(repl, text)
    return text.strip()


def same_as_written(pred: str, gold: str) -> bool:
    """Whether ``pred`` is ``gold`` as written, up to spellings that render alike: then it is
    correct without math-verify's ~5 ms parse (most correct R1 answers to MATH-style problems are
    boxed exactly as the gold is written)."""
    return pred == gold or _as_written(pred) == _as_written(gold)


def answer_text(text: str) -> str:
    """An answer as the exact verifier compares it: outer ``$``, ``\\text{}`` wrappers, a final period,
    case and runs of spaces do not count."""
    text = _TEXT.sub(r"\1", text.strip().rstrip(".").strip().strip("$"))
    return " ".join(text.rstrip(".").split()).casefold()


def same_text(pred: str, gold: str) -> bool:
    """The ``exact`` verifier: whether ``pred`` is ``gold`` as text (for answers that are names or
    titles, never parsed as math: "042" is not "42" here)."""
    return answer_text(pred) == answer_text(gold)


def _int_verdict(pred: str, gold_int: int) -> bool | None:
    p = parse_int(pred)
    return None if p is None else p == gold_int


def fast_verdict(pred: str, gold: str, gold_int: int | None = None) -> bool | None:
    r"""The math verifier's verdict where it is certain without math-verify (both integers, written
    alike, or read exactly by filters/math/exact.py), else None: ask math-verify. ``gold_int`` is
    ``parse_int(gold)`` when the caller has it. tests/filters/math/test_peer_classes.py sweeps it against
    ``check_math``.

    >>> fast_verdict("1{,}000", "1000"), fast_verdict(r"\dfrac{1}{2}", r"\frac{1}{2}"), fast_verdict("x = 3", "3")
    (True, True, None)
    """
    g = parse_int(gold) if gold_int is None else gold_int
    if g is not None and (verdict := _int_verdict(pred, g)) is not None:
        return verdict
    if same_as_written(pred, gold):
        return True
    return exact_verdict(pred, gold)


def default_workers() -> int:
    """The cores this process may use: one verification process each."""
    return usable_cores()


class Verifier:
    """Verifies ``(pred, gold)`` pairs: fast paths here (``fast`` counts them), the rest in a lazily
    started pool (``pooled`` counts its distinct pairs)."""

    def __init__(self, kind: str = "math", *, timeout: float = 5.0, workers: int | None = None):
        if kind not in VERIFIERS:
            raise ValueError(f"unknown verifier {kind!r}; expected one of {VERIFIERS}")
        self.kind, self.timeout, self.workers = kind, timeout, workers or default_workers()
        self._pool = None
        self.fast = self.pooled = 0

    def check(self, pairs: Sequence[tuple[str | None, str | None]]) -> list[tuple[bool | None, str | None]]:
        out: list = [None] * len(pairs)
        slow: list[int] = []
        ints: dict[str, int | None] = {}  # gold answers parsed once per prompt
        for i, (pred, gold) in enumerate(pairs):
            if gold is None or not gold.strip():
                out[i] = (None, "no_gold")
                continue
            if pred is None or len(pred) > MAX_ANSWER:
                out[i] = (None, "no_answer" if pred is None else "answer_too_long")
                continue
            if self.kind == "exact":
                out[i] = (same_text(pred, gold), None)
                self.fast += 1
                continue
            if gold not in ints:
                ints[gold] = parse_int(gold)
            g = ints[gold]
            verdict = fast_verdict(pred, gold, g) if self.kind == "math" else None
            if verdict is not None or (
                self.kind == "int" and g is not None and (verdict := _int_verdict(pred, g)) is not None
            ):
                out[i] = (verdict, None)
                self.fast += 1
            elif self.kind == "int":
                out[i] = (None, "gold_not_integer" if g is None else "pred_not_integer")
            else:
                slow.append(i)
        if slow:
            # Samples of a prompt often give the same answer: verify each distinct pair once.
            distinct = list(dict.fromkeys((pairs[i][0], pairs[i][1]) for i in slow))
            self.pooled += len(distinct)
            answers = dict(zip(distinct, self.pool().map(distinct)))
            for i in slow:
                out[i] = answers[(pairs[i][0], pairs[i][1])]
        return out

    def pool(self):
        if self._pool is None:
            from reasonkit.filters.math.pool import TimeoutPool

            self._pool = TimeoutPool(
                "reasonkit.filters.math.check:check_math",
                workers=self.workers,
                timeout=self.timeout,
                preload=["reasonkit.filters.math.check"],
            )
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class VerifyFilter(RowFilter):
    """Extracts ``pred`` from every response, verifies the rows still kept against ``answer``.

    Drops ``no_gold`` rows (the prompt has no answer to check against), ``no_answer`` rows (the
    response has none: no box, a torn or empty last box; the detail is in ``verify_reason``),
    ``wrong`` rows, and ``unverifiable`` ones (the verifier could not tell: a timeout, an answer
    it cannot parse) unless ``unverifiable="keep"``. Keep means only that: a row with no answer or
    no gold is never kept as unverifiable. With ``verifier="none"`` it only extracts. ``extract``
    reads ``(answer, reason)`` off a response (a tool-use trajectory's also takes a plain final
    answer: filters/trajectory.py).
    """

    name = "verify"
    reasons = ("no_gold", "no_answer", "wrong", "unverifiable")

    def __init__(
        self,
        verifier: str = "math",
        *,
        unverifiable: str = "drop",
        timeout: float = 5.0,
        workers: int | None = None,
        extract=extract_answer,
    ):
        if unverifiable not in ("drop", "keep"):
            raise ValueError(f"unverifiable must be 'drop' or 'keep', got {unverifiable!r}")
        self.verifier = Verifier(verifier, timeout=timeout, workers=workers)
        self.unverifiable = unverifiable
        self.extract = extract

    def prepare(self, batch: pa.Table) -> pa.Table:
        # pred for every row (the pairs stage wants the answers of rejected samples too);
        # verify_reason only for rows that reach the verifier and come out None.
        preds = [self.extract(r)[0] for r in batch.column("response").to_pylist()]
        batch = update_rows(batch, "pred", range(len(preds)), preds)
        if "verify_reason" in batch.column_names:
            batch = batch.drop_columns(["verify_reason"])
        return batch.append_column(pa.field("verify_reason", pa.string()), pa.nulls(batch.num_rows, pa.string()))

    def judge(self, batch: pa.Table, rows: list[int]):
        if self.verifier.kind == "none":
            return [None] * len(rows)
        preds = batch.column("pred").to_pylist()
        responses = batch.column("response").to_pylist()
        golds = batch.column("answer").to_pylist() if "answer" in batch.column_names else [None] * batch.num_rows
        # No gold is a property of the prompt, so it wins over no answer: the funnel then says
        # how many rows the data's missing answers cost.
        todo = [i for i in rows if preds[i] is not None and golds[i] is not None and golds[i].strip()]
        results = dict(zip(todo, self.verifier.check([(preds[i], golds[i]) for i in todo])))
        correct, reasons, detail = [], [], []
        for i in rows:
            if i in results:
                ok, why = results[i]
                reason = (
                    "wrong"
                    if ok is False
                    else ("unverifiable" if ok is None and self.unverifiable == "drop" else None)
                )
            elif golds[i] is None or not golds[i].strip():
                ok, why, reason = None, "no_gold", "no_gold"
            else:
                ok, why, reason = None, self.extract(responses[i])[1], "no_answer"
            correct.append(ok)
            detail.append(why)
            reasons.append(reason)
        return reasons, {"correct": correct, "verify_reason": detail}

    def close(self) -> None:
        self.verifier.close()
