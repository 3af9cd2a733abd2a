r"""Language consistency of a chain of thought, as DeepSeek-R1 defines it.

R1's language-consistency reward is "the proportion of target language words in the CoT". Here:

1. Remove what is not prose: fenced and inline code, LaTeX math (``$..$``, ``$$..$$``, ``\(..\)``,
   ``\[..\]``, ``\begin{..}..\end{..}``), remaining ``\commands``, URLs. Numbers and symbols are
   never words: a word is a run of letters, and every CJK character (Han, kana, Hangul) is a word.
2. Split into sentences, and sentences into runs of one script (Latin, Cyrillic, CJK, ...).
3. Give each run a language. A script that only one candidate language uses decides alone (kana
   means Japanese, Hangul Korean). A script shared by several candidates (Latin: en, fr, de, es)
   asks lingua, restricted to those candidates, on runs of at least :data:`MIN_WORDS` words; a
   shorter run, or one lingua is unsure of, counts for the target when the target uses that script.
4. ``lang_ratio`` = words in the target language / all words; ``None`` when there are no words.

Example (target ``en``): ``"So $x^2 = 4$, 所以 x = 2."`` has the words ``So``, ``所``, ``以``,
``x``: the CJK run is not English, so the ratio is 2/4 = 0.5.

>>> lang_ratio("So $x^2 = 4$, 所以 x = 2.", "en")
0.5
>>> lang_ratio("Let me compute 37 * 48 first. Then add them.", "en")
1.0
>>> lang_ratio(r"$$\frac{1}{2}$$ 42", "en") is None
True
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from functools import lru_cache

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.filters.base import RowFilter

#: Languages a chain of thought is checked against when the user names none.
DEFAULT_CANDIDATES = ("en", "zh", "ja", "ko", "ru", "fr", "de", "es")
#: Shorter runs of a shared script are too short for any detector to judge.
MIN_WORDS = 3

# (first code point, last code point, script); letters outside these ranges are "other".
_RANGES = sorted([
    (0x41, 0x5A, "latin"), (0x61, 0x7A, "latin"), (0xC0, 0x24F, "latin"), (0x1E00, 0x1EFF, "latin"),
    (0x370, 0x3FF, "greek"), (0x1F00, 0x1FFF, "greek"), (0x400, 0x52F, "cyrillic"),
    (0x530, 0x58F, "armenian"), (0x590, 0x5FF, "hebrew"), (0x600, 0x6FF, "arabic"), (0x750, 0x77F, "arabic"),
    (0x900, 0x97F, "devanagari"), (0x980, 0x9FF, "bengali"), (0xA00, 0xA7F, "gurmukhi"),
    (0xA80, 0xAFF, "gujarati"), (0xB80, 0xBFF, "tamil"), (0xC00, 0xC7F, "telugu"), (0xE00, 0xE7F, "thai"),
    (0x10A0, 0x10FF, "georgian"), (0x1100, 0x11FF, "hangul"), (0x3040, 0x30FF, "kana"),
    (0x3130, 0x318F, "hangul"), (0x31F0, 0x31FF, "kana"), (0x3400, 0x4DBF, "han"), (0x4E00, 0x9FFF, "han"),
    (0xAC00, 0xD7AF, "hangul"), (0xF900, 0xFAFF, "han"), (0xFB50, 0xFDFF, "arabic"), (0xFE70, 0xFEFF, "arabic"),
    (0xFF66, 0xFF9F, "kana"), (0x20000, 0x2FFFF, "han"),
])
_STARTS = [r[0] for r in _RANGES]
_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff"
_TOKEN = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W\d_])+")
_SENTENCE = re.compile(r"[.!?;:\n。！？；：]+")
_STRIP = [
    (re.compile(r"```.*?(?:```|$)", re.S), "\n"),
    (re.compile(r"`[^`\n]*`"), " "),
    (re.compile(r"\$\$.*?\$\$|\\\[.*?\\\]|\\begin\{([a-zA-Z*]+)\}.*?\\end\{\1\}", re.S), "\n"),
    (re.compile(r"\$[^$]*\$|\\\(.*?\\\)", re.S), " "),
    (re.compile(r"\\[a-zA-Z]+|https?://\S+"), " "),
]
_SPECIAL = {"zh": {"han"}, "ja": {"han", "kana"}, "ko": {"hangul"}, "el": {"greek"}, "he": {"hebrew"},
            "th": {"thai"}, "bn": {"bengali"}, "gu": {"gujarati"}, "pa": {"gurmukhi"}, "ta": {"tamil"},
            "te": {"telugu"}, "ka": {"georgian"}, "hy": {"armenian"}}


def script_of(char: str) -> str:
    cp = ord(char)
    i = bisect.bisect_right(_STARTS, cp) - 1
    if i >= 0 and cp <= _RANGES[i][1]:
        return _RANGES[i][2]
    return "other"


@lru_cache(maxsize=None)
def _lingua():
    import lingua

    return lingua


@lru_cache(maxsize=None)
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
    for script, group in (("cyrillic", "all_with_cyrillic_script"), ("arabic", "all_with_arabic_script"),
                          ("devanagari", "all_with_devanagari_script")):
        if lang in getattr(lingua.Language, group)():
            return frozenset({script})
    return frozenset({"latin"})


@lru_cache(maxsize=64)
def _detector(codes: tuple[str, ...]):
    lingua = _lingua()
    langs = [lingua.Language.from_iso_code_639_1(lingua.IsoCode639_1.from_str(c)) for c in codes]
    return lingua.LanguageDetectorBuilder.from_languages(*langs).with_minimum_relative_distance(0.2).build()


def clean(text: str) -> str:
    """``text`` without code, LaTeX and URLs (the prose whose words are counted)."""
    for pattern, repl in _STRIP:
        text = pattern.sub(repl, text)
    return text


def runs(text: str) -> list[tuple[str, list[str]]]:
    """``(script, words)`` for each single-script run of each sentence of cleaned ``text``."""
    out: list[tuple[str, list[str]]] = []
    for sentence in _SENTENCE.split(clean(text)):
        current, words = None, []
        for word in _TOKEN.findall(sentence):
            script = script_of(word[0])
            script = "cjk" if script in ("han", "kana") else script
            if script != current and words:
                out.append((current, words))
                words = []
            current = script
            words.append(word)
        if words:
            out.append((current, words))
    return out


def lang_ratios(
    texts: Sequence[str | None], target: str, candidates: Sequence[str] = DEFAULT_CANDIDATES
) -> list[float | None]:
    """:func:`lang_ratio` of many texts, with one parallel lingua call per set of candidates."""
    codes = tuple(dict.fromkeys([target, *candidates]))
    scripts = {c: language_scripts(c) for c in codes}
    counts = [[0, 0] for _ in texts]  # [target words, all words]
    ask: dict[tuple[str, ...], list[tuple[int, str, int]]] = {}
    for t, text in enumerate(texts):
        for script, words in runs(text or ""):
            if script == "cjk":
                # Kana means Japanese; Han alone is Chinese or Japanese.
                needed = "kana" if any(script_of(w) == "kana" for w in words) else "han"
                cands = tuple(c for c in codes if needed in scripts[c])
            else:
                cands = tuple(c for c in codes if script in scripts[c])
            counts[t][1] += len(words)
            if target in cands and (len(cands) == 1 or len(words) < MIN_WORDS):
                counts[t][0] += len(words)
            elif target in cands:
                ask.setdefault(cands, []).append((t, " ".join(words), len(words)))
    for cands, items in ask.items():
        found = _detector(cands).detect_languages_in_parallel_of([s for _, s, _ in items])
        for (t, _, n), lang in zip(items, found):
            if lang is None or lang.iso_code_639_1.name.lower() == target:
                counts[t][0] += n
    return [None if total == 0 else hits / total for hits, total in counts]


def lang_ratio(text: str, target: str, candidates: Sequence[str] = DEFAULT_CANDIDATES) -> float | None:
    """Share of ``target``-language words in ``text`` (see the module docstring), or None."""
    return lang_ratios([text], target, candidates)[0]


class LanguageFilter(RowFilter):
    """Drops rows whose chain of thought has ``lang_ratio < min_ratio`` (reason ``language``).

    The chain of thought is ``reasoning``, or the whole ``completion`` when there is none. Rows
    with no words at all (``lang_ratio`` None) are kept: there is nothing to judge.
    """

    name = "language"
    reasons = ("language",)

    def __init__(self, lang: str = "en", min_ratio: float = 0.95, candidates: Sequence[str] = DEFAULT_CANDIDATES):
        for code in (lang, *candidates):
            language_scripts(code)  # unknown codes fail here, before any work
        self.lang, self.min_ratio, self.candidates = lang, min_ratio, tuple(candidates)

    def judge(self, batch: pa.Table, rows: list[int]):
        reasoning = batch.column("reasoning").to_pylist()
        completion = batch.column("completion").to_pylist()
        texts = [reasoning[i] if reasoning[i] is not None else completion[i] for i in rows]
        ratios = lang_ratios(texts, self.lang, self.candidates)
        reasons = ["language" if r is not None and r < self.min_ratio else None for r in ratios]
        return reasons, {"lang_ratio": ratios}
