"""Difficulty as a column: ``distill filter --difficulty EVAL_DIR --pass-rate LO..HI``.

An eval directory (``distill eval``) holds each problem's samples verified correct (``problems.parquet``:
``id``, ``n``, ``correct``); a problem's pass rate is ``correct / n``, what eval's pass@1 averages. The
filter writes it as a column (``pass_rate``) and keeps the prompts inside the band: below ``LO`` the policy
(the model the eval sampled) never or rarely solves it, ``too_hard``; above ``HI`` it always does,
``too_easy``: either way a GRPO group of it has (nearly) no reward variance and teaches nothing (DAPO's
dynamic sampling drops those groups after paying for them; this drops them before).

A prompt the eval did not sample is dropped with the reason ``unrated`` (counted in the funnel, like
``unverifiable``): an eval often covers a sample of the prompts (``--limit``), and unknown is not a
difficulty. An eval that shares no problem with the input is an error instead (another dataset, or ids
written another way).

>>> parse_band("0.1..0.9"), parse_band("0..1")
((0.1, 0.9), (0.0, 1.0))
>>> verdicts([0.0, 0.5, 1.0, None], (0.1, 0.9))
['too_hard', None, 'too_easy', 'unrated']
"""

from __future__ import annotations

from pathlib import Path

from reasonkit.errors import UserError
from reasonkit.filters.base import RowFilter, set_column

#: The file of an eval directory holding the per-problem counts (distill/eval/run.py writes it).
PROBLEMS = "problems.parquet"


def parse_band(text: str) -> tuple[float, float]:
    """``"LO..HI"`` as two pass rates, ``0 <= LO <= HI <= 1`` (inclusive bounds)."""
    lo, sep, hi = str(text).partition("..")
    try:
        band = (float(lo), float(hi))
    except ValueError:
        band = None
    if not sep or band is None or not 0.0 <= band[0] <= band[1] <= 1.0:
        raise ValueError(f"expected LO..HI with 0 <= LO <= HI <= 1 (e.g. 0.1..0.9), found {text!r}")
    return band


def read_pass_rates(eval_dir: str | Path) -> dict[str, float]:
    """``{problem id: pass rate}`` of a finished eval directory (one line naming it when it is not one); a problem
    with no sample scores 0, as eval's pass@1 counts it. ``distill compare`` reads the same rates."""
    import pyarrow.parquet as pq

    path = Path(eval_dir) / PROBLEMS
    if not path.is_file():
        raise UserError(f"{eval_dir}: no {PROBLEMS} (not a finished `distill eval` directory)")
    try:
        table = pq.read_table(path, columns=["id", "n", "correct"])
    except Exception as e:  # a truncated or foreign file: one line, not a traceback
        raise UserError(f"{path}: unreadable, expected columns id, n, correct ({e})") from None
    ids, n, correct = (table.column(c).to_pylist() for c in ("id", "n", "correct"))
    return {pid: (c or 0) / k if k else 0.0 for pid, k, c in zip(ids, n, correct)}


def verdicts(rates: list[float | None], band: tuple[float, float]) -> list[str | None]:
    """Each rate's drop reason under ``band`` (None: kept)."""
    lo, hi = band
    return ["unrated" if r is None else "too_hard" if r < lo else "too_easy" if r > hi else None for r in rates]


def check_overlap(rates: dict[str, float], ids: set[str], eval_dir: str, source: str) -> None:
    """An eval that rates none of the input's prompts is the wrong eval: one line, before any work."""
    if ids and not ids & rates.keys():
        some = ", ".join(sorted(ids)[:3])
        raise UserError(
            f"--difficulty {eval_dir}: rates none of the {len(ids)} prompts of {source} (e.g. {some}); "
            f"it rates {len(rates)} others (an eval of another dataset?)"
        )


class DifficultyFilter(RowFilter):
    """Writes each row's ``pass_rate`` (null: unrated) and drops those outside the band."""

    name = "difficulty"
    reasons = ("too_easy", "too_hard", "unrated")

    def __init__(self, rates: dict[str, float], band: tuple[float, float]):
        self.rates, self.band = rates, band

    def prepare(self, batch):
        import pyarrow as pa

        rates = [self.rates.get(pid) for pid in batch.column("id").to_pylist()]
        return set_column(batch, "pass_rate", rates, pa.float32())

    def check_input(self, shards: list[Path], eval_dir: str, source: str) -> None:
        """Before any work: the eval rates some of the input's prompts (:func:`check_overlap`)."""
        import pyarrow.parquet as pq

        ids = {str(i) for shard in shards for i in pq.read_table(shard, columns=["id"]).column("id").to_pylist()}
        check_overlap(self.rates, ids, eval_dir, source)

    def judge(self, batch, rows: list[int]):
        rates = batch.column("pass_rate").to_pylist()
        return verdicts([rates[i] for i in rows], self.band)
