r"""Words of a chain of thought, script by script: what the language ratio counts.

A word means a word in each script:

- **Alphabetic scripts** (Latin, Cyrillic, Greek, Hangul, ...): a run of letters between spaces or
  punctuation. A run that touches a digit (``25π``, ``2x``, ``x2``) is mathematics, not a word;
  so is a lone Greek letter (``θ``, ``α``: a variable, not Greek) and any letter from Unicode's
  mathematical or letterlike symbols (``𝑥``, ``ℝ``). Korean writes spaces between words, so a
  Hangul run is one word, not one per syllable.
- **Chinese and Japanese** write no spaces: a run of Han and kana characters counts
  ``len(run) / CJK_CHARS_PER_WORD`` words, a documented equivalence instead of a segmenter (no
  dictionary to ship, no per-character cost). Averages commonly cited for segmented modern Chinese
  lie between 1.5 and 1.7 characters per word; 1.5 is that convention, not a measurement made here,
  and Japanese runs use it too. So five English words beside a 15-character Chinese sentence are
  5 of 15 words (a third English), not 5 of 20.
- **Not words of any language**: LaTeX (``$..$``, ``$$..$$``, ``\(..\)``, ``\[..\]``,
  ``\begin{..}..\end{..}``, remaining ``\commands``), code (fenced and inline), URLs, numbers,
  operators and symbols.

>>> [(s, w) for s, w in runs(r"So $x^2 = 4$, hence 25π and θ: 计算乘积")]
[('latin', ['So', 'hence', 'and']), ('han', ['计算乘积'])]
>>> count("han", ["计算乘积"]), count("latin", ["So", "hence"])
(2.6666666666666665, 2)
"""

from __future__ import annotations

import bisect
import re

#: Characters of Chinese or Japanese text per word (see the module docstring).
CJK_CHARS_PER_WORD = 1.5

# (first code point, last code point, script); letters outside these ranges are "other".
_RANGES = sorted(
    [
        (0x41, 0x5A, "latin"),
        (0x61, 0x7A, "latin"),
        (0xC0, 0x24F, "latin"),
        (0x1E00, 0x1EFF, "latin"),
        (0x370, 0x3FF, "greek"),
        (0x1F00, 0x1FFF, "greek"),
        (0x400, 0x52F, "cyrillic"),
        (0x530, 0x58F, "armenian"),
        (0x590, 0x5FF, "hebrew"),
        (0x600, 0x6FF, "arabic"),
        (0x750, 0x77F, "arabic"),
        (0x900, 0x97F, "devanagari"),
        (0x980, 0x9FF, "bengali"),
        (0xA00, 0xA7F, "gurmukhi"),
        (0xA80, 0xAFF, "gujarati"),
        (0xB80, 0xBFF, "tamil"),
        (0xC00, 0xC7F, "telugu"),
        (0xE00, 0xE7F, "thai"),
        (0x10A0, 0x10FF, "georgian"),
        (0x1100, 0x11FF, "hangul"),
        (0x2100, 0x214F, "symbol"),
        (0x3040, 0x30FF, "kana"),
        (0x3130, 0x318F, "hangul"),
        (0x31F0, 0x31FF, "kana"),
        (0x3400, 0x4DBF, "han"),
        (0x4E00, 0x9FFF, "han"),
        (0xAC00, 0xD7AF, "hangul"),
        (0xF900, 0xFAFF, "han"),
        (0xFB50, 0xFDFF, "arabic"),
        (0xFE70, 0xFEFF, "arabic"),
        (0xFF66, 0xFF9F, "kana"),
        (0x1D400, 0x1D7FF, "symbol"),
        (0x20000, 0x2FFFF, "han"),
    ]
)
_STARTS = [r[0] for r in _RANGES]
_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff"
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
# A CJK run, or a run of letters and digits (kept only when it is all letters: "25π" is not a word).
_TOKEN = re.compile(rf"[{_CJK}]+|(?:(?![{_CJK}])[^\W_])+")
# an ASCII word: letters not touching a digit ("3x" is no word), as _TOKEN + isalpha decide
_ASCII_WORD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]+(?![A-Za-z0-9])")
_SENTENCE = re.compile(r"[.!?;:\n。！？；：]+")
_STRIP = [
    (re.compile(r"```.*?(?:```|$)", re.S), "\n"),
    (re.compile(r"`[^`\n]*`"), " "),
    (re.compile(r"\$\$.*?\$\$|\\\[.*?\\\]|\\begin\{([a-zA-Z*]+)\}.*?\\end\{\1\}", re.S), "\n"),
    (re.compile(r"\$[^$]*\$|\\\(.*?\\\)", re.S), " "),
    (re.compile(r"\\[a-zA-Z]+|https?://\S+"), " "),
]


def script_of(char: str) -> str:
    """The script of one character: ``latin``, ``cyrillic``, ``han``, ``kana``, ..., or ``other``."""
    cp = ord(char)
    i = bisect.bisect_right(_STARTS, cp) - 1
    if i >= 0 and cp <= _RANGES[i][1]:
        return _RANGES[i][2]
    return "other"


def clean(text: str) -> str:
    """``text`` without code, LaTeX and URLs (the prose whose words are counted)."""
    if "`" not in text and "$" not in text and "\\" not in text and "http" not in text:
        return text  # the common case: nothing to strip, five regex passes saved
    for pattern, repl in _STRIP:
        text = pattern.sub(repl, text)
    return text


def _script_of_token(token: str) -> str | None:
    """The script a token's words belong to, or None when it is not a word (see the docstring)."""
    script = script_of(token[0])
    if script in ("han", "kana"):
        return "kana" if _KANA.search(token) else "han"
    if not token.isalpha() or script == "symbol" or (script == "greek" and len(token) == 1):
        return None
    return script


def runs(text: str) -> list[tuple[str, list[str]]]:
    """``(script, words)`` for each single-script run of each sentence of cleaned ``text``
    (a Chinese or Japanese run's "words" are its unsegmented character runs)."""
    out: list[tuple[str, list[str]]] = []
    for sentence in _SENTENCE.split(clean(text)):
        if sentence.isascii():  # most traces: every word is Latin, no per-word script lookup
            words = _ASCII_WORD.findall(sentence)
            if words:
                out.append(("latin", words))
            continue
        current, words = None, []
        for token in _TOKEN.findall(sentence):
            script = _script_of_token(token)
            if script is None:
                continue
            if script != current and words:
                out.append((current, words))
                words = []
            current = script
            words.append(token)
        if words:
            out.append((current, words))
    return out


def count(script: str, words: list[str]) -> float:
    """How many words ``words`` of ``script`` are (Chinese/Japanese character runs by equivalence)."""
    if script in ("han", "kana"):
        return sum(len(w) for w in words) / CJK_CHARS_PER_WORD
    return len(words)
