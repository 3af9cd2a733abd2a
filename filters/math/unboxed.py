r"""The answer of a response that boxes none: where math-verify's default ``parse`` looks, read stricter.

math-verify (``parse`` with its default LaTeX and expression extraction) finds an unboxed answer in
a "final answer is" phrase, then an "answer" phrase, then the rightmost LaTeX expression or bare
number. Here the same places are read as strings (no sympy in the filter's process), in that order:

1. "the answer is X" / "Answer: X": the one value the phrase names (``$X$``, ``\(X\)``, a number or
   a plain expression), read after its last "is" / "=" ("Final Answer: The largest $n$ is 34") and
   before any reason given for it ("56 because 7 \times 8 = 56"); a short answer in words ("Ada
   Vell") as it is. A phrase naming two values ("3 or 5") or none ("the answer is unclear") is no
   answer: None, never a guess.
2. Else the rightmost of: the last LaTeX expression (with the ones joined to it by "and", "or" or
   commas, as math-verify joins them; an equation chain reduced to its last side, as math-verify's
   ``get_last_eq`` does) and a bare value ending the text: a last line that is a value or an
   equation (``72``, ``8 * 9 = 72``: its right-hand side), or a last sentence that ends "is X".
   A bare value offered as one of two ("either 3 or 5") is no answer.

Sign-offs after the answer ("I hope it is correct.", a chat template's ``<|im_start|>user``) are not
text the answer is looked for in. Bounded: only the last :data:`TAIL` characters are read.

>>> unboxed_answer(r"So $\binom{6}{3} = 20$.")
'\\binom{6}{3} = 20'
>>> unboxed_answer("First compute 8*9.\n72"), unboxed_answer("The answer is 56 because 7*8 = 56.")
('72', '56')
>>> unboxed_answer(r"The roots are $x = 1 + 1 = 2$ and $x=3$."), unboxed_answer("The answer is 3 or 5.")
('2, x=3', None)
>>> unboxed_answer("Thus the probability that Ada wins is 2/3."), unboxed_answer("It is either 3 or 5")
('2/3', None)
"""

from __future__ import annotations

import re

#: How much of a response's end is read (an unboxed answer ends a response).
TAIL = 4000
#: Most LaTeX expressions joined into one answer (math-verify joins up to 6).
MAX_JOINED = 6
#: Longest LaTeX expression read (a display block of a whole derivation is longer than any answer).
MAX_ENV = 400

# A LaTeX expression: display ($$, \[) or inline ($, \(); an inline $ never spans lines and a $ after
# a digit closes nothing (math-verify's patterns). An escaped \$ is a dollar sign, not a delimiter.
# Each is at most MAX_ENV characters long: an unclosed \[ is not scanned to the end of the text from
# every one of its kind (quadratic on a response of many).
_ENV = re.compile(
    r"(?<!\\)\$\$(?P<dd>(?:[^$]|\$(?!\$)){1,%(n)d}?)(?<!\\)\$\$"
    r"|(?<!\\)\\\[(?P<db>(?:[^\\]|\\(?!\])){1,%(n)d}?)\\\]"
    r"|(?<![\\\d])\$(?P<id>(?:\\\$|[^\n$]){1,%(n)d}?)(?<!\\)\$"
    r"|(?<!\\)\\\((?P<ip>(?:[^\\\n]|\\(?!\))){1,%(n)d}?)\\\)" % {"n": MAX_ENV},
    re.DOTALL,
)
_PERCENT_AFTER = re.compile(r"\s*(?:\\?%|percent(?:age)?\b|pct\b)", re.IGNORECASE)
_JOIN = re.compile(r"\s*(?:,\s*)?(?:and|or|,)\s*", re.IGNORECASE)
# A bare number or plain expression: digits with canonical thousands commas, decimals, operators
# between numbers (2/3, 3**(1/2), 6 \times 4), an optional percent.
_NUM = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+|-?\\[dt]?frac\{\d+\}\{\d+\}"
_VALUE = re.compile(
    rf"(?<![\w.,^/])\(?(?:{_NUM})(?:\s*(?:\*\*|[-+*/^×÷]|\\times|\\div|\\cdot)\s*\(?(?:{_NUM})\)?\)?)*"
    r"(?:\s*(?:\\?%|percent\b|pct\b))?(?![\w,]*\d)",
    re.IGNORECASE,
)
# "answer is", "answer:", "answer =", in any case; never "I hope the answer is correct".
_ANSWER = re.compile(r"\banswer\b\s*(?:is\b|:|=)(?!\s*(?:correct|right|wrong|incorrect)\b)", re.IGNORECASE)
# Where a sentence ends: a period, ! or ? before a space or the end (not "2.5"), or a line break.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
# What gives a reason for the value, or goes on to something else: the value is before it.
_REASON = re.compile(r"\b(?:because|since|as|which|from|given|when|where|so|for|using|by|if)\b|[;(]", re.IGNORECASE)
_LAST_IS = re.compile(
    r"(?:\bis\b|\bare\b|\bequals\b|\bwas\b|(?<![<>!\\])=)(?!.*(?:\bis\b|\bare\b|\bequals\b|\bwas\b|(?<![<>!\\])=))",
    re.IGNORECASE | re.DOTALL,
)
# An answer in words: one to six words of letters (names, titles), and what says there is none.
_ANSWER_WORDS = re.compile(r"[^\W\d_][\w'’-]*(?:[ ,]+[^\W\d_][\w'’-]*){0,5}")
_NO_ANSWER = re.compile(
    r"(?:not|no|none|unclear|unknown|undefined|undetermined|indeterminate|impossible|ambiguous|cannot|can't|"
    r"uncertain|missing|different|above|below|that|this|it|as follows|the following)\b",
    re.IGNORECASE,
)
# A sign-off that may follow the answer, at the end of the text (removed one at a time).
_SIGN_OFF = re.compile(
    r"(?:<\|[a-z_]+\|>\w*|I hope (?:it|this|that) (?:is|was) (?:correct|right|helpful)\.?"
    r"|(?:Thank you|Thanks)[.!]?|Hope (?:this|that|it) helps[.!]?)$",
    re.IGNORECASE,
)
#: The end of a text a sign-off is looked for in (no scan of a whole response per sign-off).
SIGN_OFF_WINDOW = 80
# What stands in for LaTeX in prose-only views of a text: a character no response holds ("#" does:
# GSM8K's "#### 72").
_MASK = "\x00"
_EQ_SPLIT = re.compile(r"(?<![\\<>!])=")
# A currency sign or a short unit around a bare value ("$1,000.99", "1,000.99€", "12 cm", "7 m²").
_CURRENCY = re.compile(r"^[$€£¥]\s*|\s*(?:[$€£¥]|[a-zA-Z]{1,5}[²³]?)$")
# What comes just before a value that ends its sentence: "... is 2/3", "... equals 12", "... = 120".
_ENDS_WITH_VALUE = re.compile(
    r"(?:\bis\b|(?<=\w)['’]s\b|\bequals\b|\bbe\b|(?<![<>!\\])=)\s*[$€£¥]?\s*$", re.IGNORECASE
)


def _last_side(latex: str) -> str:
    """math-verify's ``get_last_eq``: a chain ``a = b = c`` (no comma or semicolon) is its last side;
    a single equation stays whole (math-verify compares it as an equation, or its right side)."""
    if "," in latex or ";" in latex:
        return latex
    parts = _EQ_SPLIT.split(latex)
    return parts[-1].strip() if len(parts) > 2 else latex.strip()


def _mask(text: str) -> str:
    """``text`` with every LaTeX expression replaced by as many :data:`_MASK`: prose only, same offsets."""
    return _ENV.sub(lambda m: _MASK * len(m.group(0)), text)


def _env_content(m: re.Match) -> str:
    return next(g for g in m.group("dd", "db", "id", "ip") if g is not None).strip()


def _latex_at_end(text: str) -> tuple[str | None, int]:
    """The last LaTeX expression with the ones joined to it, and where it ends (-1: none)."""
    envs = list(_ENV.finditer(text))
    if not envs:
        return None, -1
    parts, end = [], None
    next_start = None
    for m in reversed(envs[-MAX_JOINED:]):
        if end is None:
            end = m.end()
        elif not _JOIN.fullmatch(text[m.end() : next_start]):
            break
        content = _last_side(_env_content(m))
        percent = _PERCENT_AFTER.match(text, m.end())
        if percent and "%" not in content:
            content += r"\%"
        if content:
            parts.insert(0, content)
        next_start = m.start()
    return (", ".join(parts) or None), end


def _one_value(clause: str) -> str | None:
    """The one value a clause of prose names, or None when it names none or two."""
    clause = clause.strip()
    reason = _REASON.search(_mask(clause))
    if reason and reason.start() > 0:
        clause = clause[: reason.start()]
    envs = list(_ENV.finditer(clause))
    outside = _ENV.sub(" ", clause)
    values = [m.group(0) for m in _VALUE.finditer(outside)]
    if not envs and not values:
        return _words(clause)
    if len(envs) + len(values) != 1:
        return None
    value = _env_content(envs[0]) if envs else values[0].strip()
    return _last_side(value) or None


def _words(clause: str) -> str | None:
    """A short answer in words ("Ada Vell", "The Glass Orchard": the exact verifier's answers), or
    None for a clause that says there is none ("unclear", "not determined") or runs on."""
    words = clause.strip().strip("*").strip().rstrip(".").strip()
    if not _ANSWER_WORDS.fullmatch(words) or _NO_ANSWER.match(words):
        return None
    return words


def answer_phrase(text: str) -> tuple[str | None, bool]:
    """``(value, found)``: the value the last "answer is" phrase names; ``found`` says whether there
    was such a phrase (then a None value means it named none, or two)."""
    phrases = list(_ANSWER.finditer(text))
    if not phrases:
        return None, False
    rest = text[phrases[-1].end() :]
    end = _sentence_end(rest)
    clause = rest[:end]
    last_is = _LAST_IS.search(_mask(clause))
    if last_is:
        clause = clause[last_is.end() :]
    return _one_value(clause), True


def _sentence_end(text: str) -> int:
    """Where the sentence that ``text`` starts ends; math ($...$) does not end it."""
    masked = _mask(text)
    m = _SENTENCE_END.search(masked)
    return m.start() if m else len(text)


def _number(value: str) -> str:
    """A bare value as math-verify's expression reader reads it: ``1,000.99`` is 1000.99."""
    return re.sub(r"(?<=\d),(?=\d{3})", "", value.strip())


def _bare_at_end(text: str) -> tuple[str | None, int]:
    """A value ending the text outside LaTeX, and where it starts (-1: none): the last line as a
    value or an equation (its right side), else the last sentence's value when it ends the sentence
    ("... is X", "... = X") or is the only one the sentence names."""
    masked = _mask(text)
    line_start = masked.rfind("\n") + 1
    line = _CURRENCY.sub("", masked[line_start:].strip().rstrip(".").strip().strip("*").strip())
    if line and _MASK not in line:
        side = _EQ_SPLIT.split(line)[-1].strip() if "=" in line else line
        if _VALUE.fullmatch(side):
            return _number(side), line_start
    stripped = masked.rstrip().rstrip(".").rstrip()
    sentence_start = (
        max(
            stripped.rfind(". "),
            stripped.rfind("\n"),
            stripped.rfind("? "),
            stripped.rfind("! "),
            stripped.rfind(_MASK),
        )
        + 1
    )
    sentence = stripped[sentence_start:]
    if _MASK in sentence:
        return None, -1
    values = list(_VALUE.finditer(sentence))
    if not values:
        return None, -1
    last = values[-1]
    ends_sentence = (
        _ENDS_WITH_VALUE.search(sentence[: last.start()]) and not _CURRENCY.sub("", sentence[last.end() :]).strip()
    )
    if len(values) == 1 or ends_sentence:
        return _number(last.group(0)), sentence_start + last.start()
    return None, -1


def _named_as_one_of_two(text: str, start: int) -> bool:
    """Whether the value at ``start`` is the second of two offered ("3 or 5")."""
    before = text[max(0, start - 60) : start]
    return bool(re.search(rf"(?:{_NUM})\$?\s*(?:,\s*)?(?:or|and)\s*\$?\s*$", before, re.IGNORECASE))


def _without_sign_offs(text: str) -> str:
    """``text`` without the sign-offs that end it ("I hope it is correct. <|im_start|>user")."""
    text = text.rstrip()
    while m := _SIGN_OFF.search(text, max(0, len(text) - SIGN_OFF_WINDOW)):
        text = text[: m.start()].rstrip()
    return text


def unboxed_answer(text: str) -> str | None:
    """The answer of a response without a box, or None (module docstring)."""
    text = _without_sign_offs(text[-TAIL:])
    value, found = answer_phrase(text)
    if found:
        return value
    latex, latex_end = _latex_at_end(text)
    bare, bare_start = _bare_at_end(text)
    if bare is not None and bare_start >= latex_end:
        return None if _named_as_one_of_two(text, bare_start) else bare
    return latex
