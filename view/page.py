"""The page: assets/page.html with its styles, KaTeX (fonts inlined as data: URLs), the data and the script, in one
file.

The data travels as JSON inside ``<script type="application/json">`` with every ``<``, ``>`` and ``&`` written as a
``\\u`` escape, so no text a model wrote can close that element or open another; the script sets it as text. The
page's Content-Security-Policy lets only its own two scripts run (by their SHA-256) and fetch nothing (served:
its own rows only), so even markup that got into the page would neither run nor load anything.

>>> safe_json({"text": "</script><img src=x onerror=alert(1)>"})
'{"text":"\\\\u003c/script\\\\u003e\\\\u003cimg src=x onerror=alert(1)\\\\u003e"}'
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import time
from pathlib import Path

ASSETS = Path(__file__).parent / "assets"
KATEX = ASSETS / "katex"
_SLOT = re.compile(r"@@([A-Z_]+)@@")
_FONT_URL = re.compile(
    r"src:url\(fonts/([A-Za-z0-9_-]+)\.woff2\) format\(\"woff2\"\)(?:,url\([^)]*\) format\(\"[a-z]+\"\))*"
)


def safe_json(data: object) -> str:
    """JSON that is inert inside a ``<script>`` element: no ``<``, ``>``, ``&`` or line separators left as they are."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


@functools.cache
def katex_css() -> str:
    """KaTeX's stylesheet with each font as a woff2 data: URL (every browser that runs the page reads woff2)."""
    css = (KATEX / "katex.min.css").read_text(encoding="utf-8")

    def inline(match: re.Match) -> str:
        font = (KATEX / "fonts" / f"{match.group(1)}.woff2").read_bytes()
        return f'src:url(data:font/woff2;base64,{base64.b64encode(font).decode()}) format("woff2")'

    return _FONT_URL.sub(inline, css)


@functools.cache
def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def policy(scripts: list[str], *, served: bool) -> str:
    """The page's Content-Security-Policy: its own scripts by hash, inline styles, data: images and fonts, nothing else."""  # noqa: E501
    return "; ".join(
        [
            "default-src 'none'",
            "script-src " + " ".join(_sha256(s) for s in scripts),
            "style-src 'unsafe-inline'",
            "img-src data:",
            "font-src data:",
            "connect-src " + ("'self'" if served else "'none'"),
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )


def render(data: dict, *, served: bool = False) -> str:
    """The whole page for ``data`` (collect.py's), as one string of HTML."""
    from reasonkit import __version__

    data = dict(data, created=time.strftime("%Y-%m-%d %H:%M:%S"))
    scripts = [(KATEX / "katex.min.js").read_text(encoding="utf-8"), _asset("view.js")]
    slots = {
        "CSP": policy(scripts, served=served),
        "VERSION": __version__,
        "TITLE": _text(data.get("title") or "distill view"),
        "KATEX_CSS": katex_css(),
        "STYLE": _asset("view.css"),
        "DATA": safe_json(data),
        "KATEX_JS": scripts[0],
        "APP_JS": scripts[1],
    }
    # one pass: a slot's content is never searched for further slots (the data may hold "@@DATA@@" itself)
    return _SLOT.sub(lambda m: slots[m.group(1)], _asset("page.html"))


def _text(value: str) -> str:
    """``value`` as HTML text (the title: a folder name, which a user may have named anything)."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def write(data: dict, out: str | Path) -> Path:
    """Write the page to ``out`` atomically (a reader never opens half a page)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(render(data), encoding="utf-8")
    tmp.replace(out)
    return out
