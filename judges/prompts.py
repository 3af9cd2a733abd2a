"""The judge's prompts: Jinja templates shipped in ``judges/templates/``, filled per item.

Templates live in files, not in code strings, so a prompt can be read and changed without
reading Python. Undefined variables are errors (``StrictUndefined``): a template that names a
field the stage does not fill fails on the first item, not silently with an empty hole.

>>> text = render("pointwise", rubric="- Correct.", question="What is 2 * 3?", answer="6", reference=None)
>>> "What is 2 * 3?" in text and text.rstrip().endswith("Score: N")
True
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from reasonkit.errors import UserError

TEMPLATES = Path(__file__).resolve().parent / "templates"


@functools.cache
def _template(name: str):
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
    )
    return env.get_template(f"{name}.jinja")


def render(name: str, **values: object) -> str:
    """Template ``name`` (``pointwise`` or ``pairwise``) filled with ``values``."""
    return _template(name).render(**values).strip() + "\n"


def load_rubric(path: str | os.PathLike | None) -> str:
    """The criteria a judge grades by: ``path``'s text, or the shipped ``templates/rubric.txt``."""
    file = Path(path) if path is not None else TEMPLATES / "rubric.txt"
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"--rubric {path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"--rubric {path}: is a directory; expected a text file of criteria") from None
    except UnicodeDecodeError:
        raise UserError(f"--rubric {path}: not UTF-8 text") from None
    if not text.strip():
        raise UserError(f"--rubric {file}: empty; expected the criteria the judge grades by")
    return text.strip()
