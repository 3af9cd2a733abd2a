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
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def boxed_cases(root: Path) -> list[dict]:
    """Every parametrized ``(gold, pred, expected)`` case in ``root/tests`` whose pred has a box."""
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
                if not {"gold", "pred"} <= set(names):
                    continue
                for values in mark.args[1]:
                    row = dict(zip(names, getattr(values, "values", values)))
                    label = row.get("expected", row.get("result"))
                    if isinstance(label, (bool, int)) and ("\\boxed" in row["pred"] or "\\fbox" in row["pred"]):
                        cases.append({"where": f"{path.name}::{name}", "gold": row["gold"], "response": row["pred"],
                                      "label": int(label)})
    return cases


def main() -> None:
    from reasonkit.filters.extract import extract_answer
    from reasonkit.filters.pool import TimeoutPool
    from reasonkit.filters.verify import Verifier

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("math_verify_src", type=Path, help="an unpacked math-verify sdist (holds tests/)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    cases = boxed_cases(args.math_verify_src)
    preds = [extract_answer(c["response"]) for c in cases]
    verifier = Verifier("math", timeout=5)
    try:
        ours = verifier.check([(p, c["gold"]) for (p, _), c in zip(preds, cases)])
    finally:
        verifier.close()
    with TimeoutPool("reasonkit.filters.mathcheck:check_response", workers=verifier.workers, timeout=5,
                     preload=["reasonkit.filters.mathcheck"]) as pool:
        alone = pool.map([(c["response"], c["gold"]) for c in cases])
    agree_ours = agree_alone = 0
    for c, (pred, why), (ok, reason), (ok_alone, _) in zip(cases, preds, ours, alone):
        a, b = (ok is True) == bool(c["label"]), (ok_alone is True) == bool(c["label"])
        agree_ours, agree_alone = agree_ours + a, agree_alone + b
        if args.verbose or not (a and b):
            print(f"{'ours ok ' if a else 'ours BAD'} {'alone ok ' if b else 'alone BAD'} {c['where']} "
                  f"label={c['label']} pred={pred!r:.60} ({reason or why}) tail={c['response'][-80:]!r}")
    print(f"{len(cases)} boxed cases: ours agrees with {agree_ours}, math-verify alone with {agree_alone}")


if __name__ == "__main__":
    main()
