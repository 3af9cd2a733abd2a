r"""Language consistency of a chain of thought, as DeepSeek-R1 defines it.

R1's language-consistency reward is "the proportion of target language words in the CoT". Here:

1. Words as :mod:`reasonkit.filters.words` counts them, script by script: letter runs in alphabetic
   scripts, Chinese/Japanese characters by a chars-per-word equivalence; LaTeX, code, numbers and
   math symbols (``25π``, a lone ``θ``) are no language's words.
2. Split into sentences, and sentences into runs of one script (Latin, Cyrillic, Han, ...).
3. Give each run a language. A script only one candidate language uses decides alone (Cyrillic:
   Russian among the defaults, kana Japanese, Hangul Korean); a script no candidate uses is not the
   target. A script several candidates share (Latin: en, fr, de, es) needs a verdict, for runs of at
   least :data:`MIN_WORDS` words; shorter runs of that script are pooled (consecutive ones) or
   follow the nearest long run of the same script in the text, never the target by default:
   - first the candidates' stopwords (stopwordsiso): a run holding the target's distinctive
     stopwords (ones no other candidate lists), at least twice as many as the other candidates'
     (distinct words), is the target's: the cheap path most sentences in the target language take;
   - otherwise lingua, restricted to the candidates sharing the script; a run it cannot tell
     apart (its two best under a relative distance of 0.2) counts for no language: it leaves both
     the numerator and the denominator.
4. ``lang_ratio`` = words in the target language / words given a language; ``None`` when no word
   was given one (nothing to judge).

Example (target ``en``): ``"Let me compute this now. 我们先来仔细计算这两个数的乘积。"`` has 5 English
words and a 15-character Chinese run (10 words): the ratio is 5/15.

>>> lang_ratio("Let me compute the product first. Then add them.", "en")
1.0
>>> lang_ratio("Donc x = 2. Alors y = 3. Puis z = 4.", "en")  # French connectives, pooled
0.0
>>> lang_ratio("The area is 25π, so θ = α/2 and the answer follows.", "en")  # symbols are no words
1.0
>>> round(lang_ratio("Let me compute this now. 我们先来仔细计算这两个数的乘积。", "en"), 3)
0.333
>>> lang_ratio(r"$$\frac{1}{2}$$ 42", "en") is None
True
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from reasonkit.errors import UserError
from reasonkit.filters.base import RowFilter, alive_rows
from reasonkit.filters.config import LANGUAGE_WARM_UP
from reasonkit.filters.lookahead import Lookahead
from reasonkit.filters.words import count, runs

if TYPE_CHECKING:  # only in annotations: the lookahead helper imports this module and needs no Arrow
    import pyarrow as pa

#: Languages a chain of thought is checked against when the user names none.
DEFAULT_CANDIDATES = ("en", "zh", "ja", "ko", "ru", "fr", "de", "es")
#: Shorter runs of a shared script are too short for a verdict of their own (pooled instead).
MIN_WORDS = 3
#: Verdicts remembered per filter (R1 traces repeat sentences: "Wait, let me check.").
CACHE_SIZE = 200_000


@cache
def _lingua():
    import lingua

    return lingua


_SPECIAL = {
    "zh": {"han"},
    "ja": {"han", "kana"},
    "ko": {"hangul"},
    "el": {"greek"},
    "he": {"hebrew"},
    "th": {"thai"},
    "bn": {"bengali"},
    "gu": {"gujarati"},
    "pa": {"gurmukhi"},
    "ta": {"tamil"},
    "te": {"telugu"},
    "ka": {"georgian"},
    "hy": {"armenian"},
}


@cache
def language_scripts(code: str) -> frozenset[str]:
    """The scripts language ``code`` (ISO 639-1) is written in; a UserError for an unknown code."""
    lingua = _lingua()
    try:
        lang = lingua.Language.from_iso_code_639_1(lingua.IsoCode639_1.from_str(code.strip().lower()))
    except (ValueError, AttributeError):
        known = ", ".join(sorted(lang.iso_code_639_1.name.lower() for lang in lingua.Language.all()))
        raise UserError(f"unknown language code {code!r}; expected an ISO 639-1 code, one of {known}") from None
    if code in _SPECIAL:
        return frozenset(_SPECIAL[code])
    for script, group in (
        ("cyrillic", "all_with_cyrillic_script"),
        ("arabic", "all_with_arabic_script"),
        ("devanagari", "all_with_devanagari_script"),
    ):
        if lang in getattr(lingua.Language, group)():
            return frozenset({script})
    return frozenset({"latin"})


@lru_cache(maxsize=64)
def _detector(codes: tuple[str, ...]):
    """lingua restricted to ``codes``, its models loaded now: it is built when a run first needs it,
    and the lookahead helper's warm-up builds it before any batch arrives."""
    lingua = _lingua()
    langs = [lingua.Language.from_iso_code_639_1(lingua.IsoCode639_1.from_str(c)) for c in codes]
    builder = lingua.LanguageDetectorBuilder.from_languages(*langs).with_minimum_relative_distance(0.2)
    return builder.with_preloaded_language_models().build()


@lru_cache(maxsize=64)
def _stopwords(target: str, codes: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """The target's stopwords that no other of ``codes`` lists, and the other candidates' stopwords
    that the target does not list (stopwordsiso's lists, letters only)."""
    import stopwordsiso

    lists = {
        c: {w for w in stopwordsiso.stopwords(c) if w.isalpha()} if stopwordsiso.has_lang(c) else set() for c in codes
    }
    others = set().union(*(lists[c] for c in codes if c != target))
    return frozenset(lists[target] - others), frozenset(others - lists[target])


def _by_stopwords(lowered: list[str], lexicons: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether the run (lowercased words) is the target's without asking the detector: it holds
    the target's distinctive stopwords, at least twice as many (distinct words, so a repeated word
    is one piece of evidence) as the other candidates'.

    Only the target is decided this way: stopword lists are broad (Spanish's holds "final",
    French's "plus"), so a stray hit in an English sentence must not send it to the detector, and
    must never name a foreign language; a foreign sentence holds its own language's stopwords
    (its articles, pronouns, prepositions) and reaches lingua.
    """
    mine, others = lexicons
    words = set(lowered)
    hits = len(words & mine)
    return hits > 0 and hits >= 2 * len(words & others)


def _units(parts: list[tuple[list[str], float]]) -> list[tuple[list[str], float]]:
    """Runs of one shared script, in text order -> ``(words judged, words counted)`` per verdict.

    A long run stands alone. Consecutive short runs pool; a pool of :data:`MIN_WORDS` words or more
    stands alone, a shorter one is counted with the verdict of the unit before it (the first unit
    when it comes before every unit). With no unit at all, the short runs stand together.

    >>> _units([(["Donc", "x"], 2), (["Alors", "y"], 2), (["Puis", "z"], 2)])
    [(['Donc', 'x', 'Alors', 'y', 'Puis', 'z'], 6.0)]
    >>> _units([(["So"], 1), (["Let", "me", "compute"], 3), (["Wait"], 1)])
    [(['Let', 'me', 'compute'], 5.0)]
    """
    units: list[list] = []
    pool: list[str] = []
    pool_n = early = 0.0
    early_words: list[str] = []
    for words, n in [*parts, ([], float("inf"))]:  # the sentinel closes the last pool
        if n < MIN_WORDS:
            pool, pool_n = pool + words, pool_n + n
            continue
        if pool_n >= MIN_WORDS:
            units.append([pool, pool_n])
        elif pool_n and units:
            units[-1][1] += pool_n
        elif pool_n:
            early, early_words = early + pool_n, early_words + pool
        pool, pool_n = [], 0.0
        if words:
            units.append([words, n])
    if not units:
        return [(early_words, early)] if early_words else []
    units[0][1] += early
    return [(w, n) for w, n in units]


def lang_ratios(
    texts: Sequence[str | None],
    target: str,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    cache: MutableMapping | None = None,
) -> list[float | None]:
    """:func:`lang_ratio` of many texts: one batched, parallel lingua call per set of candidates,
    for the runs neither the script, the stopwords nor ``cache`` (verdicts by run) decided."""
    codes = tuple(dict.fromkeys([target, *candidates]))
    scripts = {c: language_scripts(c) for c in codes}
    cache = {} if cache is None else cache
    cands_of = {}  # script -> the candidates written in it
    counts = [[0.0, 0.0] for _ in texts]  # [target words, words given a language]
    ask: dict[tuple[str, ...], dict[str, list[tuple[int, float]]]] = {}
    for t, text in enumerate(texts):
        shared: dict[tuple[str, tuple[str, ...]], list[tuple[list[str], float]]] = {}
        for script, words in runs(text or ""):
            cands = cands_of.get(script)
            if cands is None:
                cands = cands_of[script] = tuple(c for c in codes if script in scripts[c])
            n = count(script, words)
            if target in cands and len(cands) > 1:
                shared.setdefault((script, cands), []).append((words, n))
                continue
            counts[t][1] += n
            if cands == (target,):
                counts[t][0] += n
        for (script, cands), parts in shared.items():
            joiner = "" if script in ("han", "kana") else " "
            for words, n in _units(parts):
                key = (cands, joiner.join(words).lower())
                verdict = cache.get(key, "?")
                if verdict == "?":
                    if not _by_stopwords(key[1].split(), _stopwords(target, cands)):
                        ask.setdefault(cands, {}).setdefault(key[1], []).append((t, n))
                        continue
                    verdict = cache[key] = target
                _tally(counts[t], verdict, target, n)
    for cands, pending in ask.items():
        found = _detector(cands).detect_languages_in_parallel_of(list(pending))
        for text, lang in zip(pending, found):
            verdict = None if lang is None else lang.iso_code_639_1.name.lower()
            cache[(cands, text)] = verdict
            for t, n in pending[text]:
                _tally(counts[t], verdict, target, n)
    if len(cache) > CACHE_SIZE:
        cache.clear()
    return [None if judged == 0 else hits / judged for hits, judged in counts]


def _tally(counts: list[float], verdict: str | None, target: str, n: float) -> None:
    if verdict is not None:  # lingua could not tell: no language's words
        counts[1] += n
        counts[0] += n if verdict == target else 0.0


def lang_ratio(text: str, target: str, candidates: Sequence[str] = DEFAULT_CANDIDATES) -> float | None:
    """Share of ``target``-language words in ``text`` (see the module docstring), or None."""
    return lang_ratios([text], target, candidates)[0]


#: The helper's verdicts by run (one filter per helper: its own process).
_HELPER_CACHE: dict = {}


def _warm_up(target: str, candidates: tuple[str, ...]) -> None:
    """The lookahead helper's start: the detectors lang_ratios will ask, their models loaded."""
    codes = tuple(dict.fromkeys([target, *candidates]))
    for script in language_scripts(target):
        cands = tuple(c for c in codes if script in language_scripts(c))
        if len(cands) > 1:
            _stopwords(target, cands)
            _detector(cands)


def _helper_ratios(texts: list[str | None], target: str, candidates: tuple[str, ...]) -> list[float | None]:
    return lang_ratios(texts, target, candidates, _HELPER_CACHE)


class LanguageFilter(RowFilter):
    """Drops rows whose chain of thought has ``lang_ratio < min_ratio`` (reason ``language``).

    The chain of thought is ``reasoning``, or the whole ``completion`` when there is none. Rows
    with no words at all (``lang_ratio`` None) are kept: there is nothing to judge.

    ``lookahead=True`` (the filter stage's local loop, on two cores or more) starts a helper process
    that judges each batch :meth:`prefetch` is given while the loop goes on with the next batches
    (filters/lookahead.py, filters/pass1.py); verdicts are the same as without. :meth:`close` stops it.
    """

    name = "language"
    reasons = ("language",)

    def __init__(
        self,
        lang: str = "en",
        min_ratio: float = 0.95,
        candidates: Sequence[str] = DEFAULT_CANDIDATES,
        *,
        lookahead: bool = False,
    ):
        for code in (lang, *candidates):
            language_scripts(code)  # unknown codes fail here, before any work
        self.lang, self.min_ratio, self.candidates = lang, min_ratio, tuple(candidates)
        self.cache: dict = {}
        self.ahead = Lookahead(LANGUAGE_WARM_UP, lang, self.candidates, workers=2 if lookahead else 0)

    def texts(self, batch: pa.Table, rows: list[int]) -> list[str]:
        """The text judged in each row (a tool-use trajectory's differs: filters/trajectory.py)."""
        reasoning = batch.column("reasoning").to_pylist()
        completion = batch.column("completion").to_pylist()
        return [reasoning[i] if reasoning[i] is not None else completion[i] for i in rows]

    def prefetch(self, batch: pa.Table) -> None:
        """Have the helper judge the rows still kept in ``batch``, as :meth:`judge` will see them."""
        rows = alive_rows(batch)
        if self.ahead.running and rows:
            self.ahead.submit(self.texts(batch, rows), _helper_ratios, self.lang, self.candidates)

    def ready(self) -> bool:
        """Whether the oldest batch given to :meth:`prefetch` is judged (or there is no helper)."""
        return self.ahead.ready()

    def judge(self, batch: pa.Table, rows: list[int]):
        texts = self.texts(batch, rows)
        ratios = self.ahead.take(texts)  # None without a helper, or when it failed
        if ratios is None:
            ratios = lang_ratios(texts, self.lang, self.candidates, self.cache)
        reasons = ["language" if r is not None and r < self.min_ratio else None for r in ratios]
        return reasons, {"lang_ratio": ratios}

    def close(self) -> None:
        self.ahead.close()
