"""Benchmark: our answer extraction + Verifier against math-verify alone, on Math-Verify's own tests.

    pip download math-verify==0.9.0 --no-binary :all: --no-deps -d /tmp/mv && tar xzf /tmp/mv/*.tar.gz -C /tmp/mv
    python bench/answers.py /tmp/mv/math_verify-0.9.0        # add -v to list every case

Math-Verify's regression tests (``tests/*.py``) are ``(gold, pred, expected)`` cases; those whose
``pred`` is a whole response that boxes its answer are the ones a distillation filter meets. For
each, a side agrees with the label when it says correct exactly where the label says 1:

- ours: ``extract_answer(pred)``, then ``Verifier("math").check`` against the gold;
- math-verify alone (the open-r1 baseline): ``parse`` the gold, ``parse`` the whole response, ``verify``.

Both run in the same process pool the filter uses (math-verify's SIGALRM timeouts fail off the main
thread). Measured here with math-verify 0.9.0: 95 such cases; ours 82 before issue 14 item 13
(several boxes read as their last one; a "final answer is" phrase after the last box missed),
95 after; math-verify alone 95.

``--all`` counts every case whose test compares at math-verify's default settings (255 with 0.9.0),
boxed or not, per test. Issue 27 (answers outside a box, golds that are not LaTeX, separators and
units): ours 124 before, 249 after; math-verify alone 251. Ours is ahead on test_latex_notation
(23 to 21: "Answer $ \n 9 \n $" names no value) and behind only on test_number_extraction (15 to
19), whose misses are read so on purpose: a decimal comma (``1000,99``, ``2,74``, a gold ``1,22``)
is a list of two numbers here, and a space between digit groups (``1 000``) is two numbers, as in a
box (``\boxed{2 3}`` is not 23).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def boxed_cases(root: Path, *, every: bool = False) -> list[dict]:
    """Every parametrized ``(gold, pred, expected)`` case in ``root/tests`` whose pred has a box
    (``every``: with a box or not, as long as the test compares with its default settings)."""
    sys.path.insert(0, str(root))  # the tests import each other as ``tests.test_all``
    cases = []
    for path in sorted((root / "tests").glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"mv_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # a test module that needs what is not installed
            print(f"skipped {path.name}: {e}", file=sys.stderr)
            continue
        for name in sorted(dir(module)):
            for mark in getattr(getattr(module, name), "pytestmark", []):
                if mark.name != "parametrize":
                    continue
                names = mark.args[0]
                names = [n.strip() for n in (names.split(",") if isinstance(names, str) else names)]
                if not {"gold", "pred"} <= set(names) or (
                    every and not set(names) <= {"gold", "pred", "expected", "precision"}
                ):
                    continue
                for values in mark.args[1]:
                    row = dict(zip(names, getattr(values, "values", values)))
                    label = row.get("expected", row.get("result"))
                    boxed = "\\boxed" in row["pred"] or "\\fbox" in row["pred"]
                    if isinstance(label, (bool, int)) and isinstance(row["pred"], str) and (boxed or every):
                        cases.append(
                            {
                                "where": f"{path.name}::{name}",
                                "gold": row["gold"],
                                "response": row["pred"],
                                "label": int(label),
                            }
                        )
    return cases


def main() -> None:
    from reasonkit.filters.math.extract import extract_answer
    from reasonkit.filters.math.pool import TimeoutPool
    from reasonkit.filters.math.verify import Verifier

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("math_verify_src", type=Path, help="an unpacked math-verify sdist (holds tests/)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument(
        "--all", action="store_true", help="every case at default settings, boxed or not, counted per test"
    )
    args = ap.parse_args()
    cases = boxed_cases(args.math_verify_src, every=args.all)
    preds = [extract_answer(c["response"]) for c in cases]
    verifier = Verifier("math", timeout=5)
    try:
        ours = verifier.check([(p, c["gold"]) for (p, _), c in zip(preds, cases)])
    finally:
        verifier.close()
    with TimeoutPool(
        "reasonkit.filters.math.check:check_response",
        workers=verifier.workers,
        timeout=5,
        preload=["reasonkit.filters.math.check"],
    ) as pool:
        alone = pool.map([(c["response"], c["gold"]) for c in cases])
    agree_ours = agree_alone = 0
    groups: dict[str, list[int]] = {}
    for c, (pred, why), (ok, reason), (ok_alone, _) in zip(cases, preds, ours, alone):
        a, b = (ok is True) == bool(c["label"]), (ok_alone is True) == bool(c["label"])
        agree_ours, agree_alone = agree_ours + a, agree_alone + b
        g = groups.setdefault(c["where"], [0, 0, 0])
        g[0], g[1], g[2] = g[0] + 1, g[1] + a, g[2] + b
        if args.verbose or not (a and b):
            print(
                f"{'ours ok ' if a else 'ours BAD'} {'alone ok ' if b else 'alone BAD'} {c['where']} "
                f"label={c['label']} pred={pred!r:.60} ({reason or why}) tail={c['response'][-80:]!r}"
            )
    if args.all:
        for where, (n, a, b) in sorted(groups.items()):
            print(f"{where:55s} {n:3d} cases: ours {a:3d}, math-verify alone {b:3d}")
    print(
        f"{len(cases)} {'' if args.all else 'boxed '}cases: ours agrees with {agree_ours}, math-verify alone with "
        f"{agree_alone}"
    )


if __name__ == "__main__":
    main()
