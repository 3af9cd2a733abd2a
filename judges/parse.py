"""Reading a judge's verdict out of free text: a score or a winner, or None with the reason.

A judge is asked (judges/templates/) to end with ``Score: N`` or ``Verdict: A|B|tie``, and may
instead answer in JSON, in MT-Bench's ``[[N]]`` / ``[[A]]`` brackets, in bold markdown, or not at
all. Whatever it wrote, the result is either a value the text states unambiguously or ``None`` with
a reason: two different scores, a score off the scale, a think block that never closed. Never a
guess, because a preference built on a misread verdict is worse than no preference.

A reasoning judge's ``<think>`` block is not read (its drafts often mention other scores): only
the text after ``</think>``.

>>> parse_score('{"rationale": "Correct and brief.", "score": 9}')
Parsed(value=9.0, rationale='Correct and brief.', reason=None)
>>> parse_score("The steps are right.\\nScore: 8/10")
Parsed(value=8.0, rationale='The steps are right.', reason=None)
>>> parse_score("Rating: [[3]]").value
3.0
>>> parse_score("Score: 7\\nOn reflection:\\nScore: 4")
Parsed(value=None, rationale=None, reason='conflicting scores: 7, 4')
>>> parse_score("12 * 34 = 408 \\\\boxed{408}")
Parsed(value=None, rationale=None, reason='no score found')
>>> parse_verdict("Both are correct; B is shorter.\\nVerdict: B").value
'B'
>>> parse_verdict("[[C]]").value
'tie'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Parsed:
    value: float | str | None
    rationale: str | None = None
    reason: str | None = None  # why value is None


_NUM = r"(-?\d+(?:\.\d+)?)"
# "Score: 7", "**Rating**: 7/10", "score = 7.5", "Final score: [[7]]" -- one per line, anchored.
_SCORE_LINE = re.compile(
    r"^[\s>*#_-]*(?:final\s+|overall\s+)?(?:score|rating)[\s*_]*[:=][\s*_]*\[{0,2}\s*" + _NUM + r"\s*\]{0,2}"
    r"(?:\s*(?:/|out\s+of)\s*10)?[\s*_.]*$",
    re.IGNORECASE | re.MULTILINE,
)
_BRACKET_NUM = re.compile(r"\[\[\s*" + _NUM + r"\s*\]\]")
_VERDICT_LINE = re.compile(
    r"^[\s>*#_-]*(?:final\s+)?(?:verdict|winner|better(?:\s+response)?|preferred)[\s*_]*[:=][\s*_]*"
    r"\[{0,2}\s*(?:response\s+|assistant\s+)?(A|B|C|tie)\b\s*\]{0,2}[\s*_.]*$",
    re.IGNORECASE | re.MULTILINE,
)
_BRACKET_VERDICT = re.compile(r"\[\[\s*(A|B|C|tie)\s*\]\]", re.IGNORECASE)
_JSON_BLOCK = re.compile(r"\{[^{}]*\}", re.DOTALL)  # flat objects only: what judges are asked for
_SCORE_KEYS = ("score", "rating")
_VERDICT_KEYS = ("verdict", "winner", "better", "preferred", "choice")
_RATIONALE_KEYS = ("rationale", "explanation", "reasoning", "reason", "justification", "critique")


def answer_part(text: str | None) -> tuple[str | None, str | None]:
    """The text after a judge's think block, or None and why.

    >>> answer_part("<think>maybe 3?</think>Score: 8")
    ('Score: 8', None)
    >>> answer_part("<think>still going")
    (None, 'judge output ended inside <think>')
    """
    if text is None or not text.strip():
        return None, "empty judge output"
    start, end = text.find("<think>"), text.rfind("</think>")
    if end != -1:
        text = text[end + len("</think>") :]
    elif start != -1:
        return None, "judge output ended inside <think>"
    text = text.strip()
    return (text, None) if text else (None, "nothing after </think>")


def _json_objects(text: str) -> list[dict]:
    found = []
    for block in _JSON_BLOCK.findall(text):
        try:
            obj = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            found.append({str(k).strip().lower(): v for k, v in obj.items()})
    return found


def _rationale_from(obj: dict | None, text: str, match_start: int | None) -> str | None:
    if obj:
        for key in _RATIONALE_KEYS:
            if isinstance(obj.get(key), str) and obj[key].strip():
                return obj[key].strip()
        return None
    before = text[:match_start].strip() if match_start is not None else ""
    return before or None


def _one(values: list, what: str) -> tuple[object, str | None]:
    distinct = list(dict.fromkeys(values))
    if len(distinct) > 1:
        shown = ", ".join(_fmt(v) for v in distinct[:4])
        return None, f"conflicting {what}s: {shown}"
    return distinct[0], None


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def parse_score(text: str | None, lo: float = 1, hi: float = 10) -> Parsed:
    """A ``lo``..``hi`` score from a judge's output (JSON, a marked line, ``[[N]]`` or a bare number)."""
    body, why = answer_part(text)
    if body is None:
        return Parsed(None, reason=why)
    objects = [o for o in _json_objects(body) if any(k in o for k in _SCORE_KEYS)]
    values: list[float] = []
    obj, start = None, None
    if objects:
        for o in objects:
            raw = next(o[k] for k in _SCORE_KEYS if k in o)
            number = _number(raw)
            if number is None:
                return Parsed(None, reason=f"JSON score is not a number: {str(raw)[:40]!r}")
            values.append(number)
        obj = objects[-1]
    else:
        matches = list(_SCORE_LINE.finditer(body)) or list(_BRACKET_NUM.finditer(body))
        if not matches and re.fullmatch(r"\s*" + _NUM + r"\s*(?:/\s*10)?\s*\.?\s*", body):
            matches = [re.match(r"\s*" + _NUM, body)]
        if not matches:
            if "{" in body and any(k in body.lower() for k in _SCORE_KEYS):
                return Parsed(None, reason="malformed JSON: no parseable object with a score")
            return Parsed(None, reason="no score found")
        values = [float(m.group(1)) for m in matches]
        start = matches[0].start()
    value, why = _one(values, "score")
    if why:
        return Parsed(None, reason=why)
    if not lo <= value <= hi:
        return Parsed(None, reason=f"score {_fmt(value)} outside {_fmt(float(lo))}-{_fmt(float(hi))}")
    return Parsed(float(value), _rationale_from(obj, body, start))


def parse_verdict(text: str | None) -> Parsed:
    """``"A"``, ``"B"`` or ``"tie"`` from a pairwise judge's output (``C`` is MT-Bench's tie)."""
    body, why = answer_part(text)
    if body is None:
        return Parsed(None, reason=why)
    objects = [o for o in _json_objects(body) if any(k in o for k in _VERDICT_KEYS)]
    obj, start = None, None
    if objects:
        values = [_label(str(next(o[k] for k in _VERDICT_KEYS if k in o))) for o in objects]
        if None in values:
            return Parsed(None, reason="JSON verdict is not A, B or tie")
        obj = objects[-1]
    else:
        matches = list(_VERDICT_LINE.finditer(body)) or list(_BRACKET_VERDICT.finditer(body))
        if not matches:
            if re.fullmatch(r"\s*(A|B|tie)\s*\.?\s*", body, re.IGNORECASE):
                return Parsed(_label(body.strip().rstrip(".")))
            return Parsed(None, reason="no verdict found")
        values = [_label(m.group(1)) for m in matches]
        start = matches[0].start()
    value, why = _one(values, "verdict")
    if why:
        return Parsed(None, reason=why)
    return Parsed(value, _rationale_from(obj, body, start))


def _label(raw: str) -> str | None:
    word = raw.strip().strip("[]").strip().lower()
    word = re.sub(r"^(response|assistant)\s+", "", word)
    return {"a": "A", "b": "B", "c": "tie", "tie": "tie", "draw": "tie", "equal": "tie"}.get(word)


def _number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str):
        m = re.fullmatch(r"\s*" + _NUM + r"\s*(?:/\s*10)?\s*", raw)
        return float(m.group(1)) if m else None
    return None
