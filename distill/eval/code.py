"""``distill eval --verifier code``: each sample's program run against its problem's tests; cons@k votes
on what the programs print, not on their text.

A sample's ``pred`` is its program (filters/code/verify.py's extraction), ``correct`` whether it passed every
test, ``verify_reason`` the first failure (``wrong_answer``, ``timeout``, ``compile_error`` ...) or
why there is no program (``no_code``, ``unclosed_fence``, ``truncated``). For the vote, two programs
are one answer when they produce the same outputs on every test (the verdict's ``key``: a digest of
each test's normalised output or failure); a program that does not compile, or no program, does not
vote. pass@k counts a problem solved when one of k programs passes everything.

>>> votes = [["k1", "k2", "k1", None]]
>>> from reasonkit.distill.eval.vote import vote_groups
>>> vote_groups(votes, lambda pairs: [False] * len(pairs))
[[0, 1, 0, None]]
"""

from __future__ import annotations

import pyarrow as pa

from reasonkit.errors import UserError

TRUNCATED = "truncated"


def tests_of(traces: pa.Table, column: str) -> list:
    """Every row's parsed tests (a UserError naming the problem when one is missing or malformed)."""
    from reasonkit.filters.code.verify import read_tests

    if column not in traces.column_names:
        raise UserError(
            f"--verifier code reads each problem's tests from column {column!r}; the eval data has "
            f"columns {traces.column_names}"
        )
    ids = traces.column("id").to_pylist()
    tests = read_tests(traces.column(column).to_pylist(), ids, column, "eval data")
    missing = [i for i, t in zip(ids, tests) if t is None]
    if missing:
        raise UserError(
            f"eval data: problem {missing[0]!r}: no tests in column {column!r}; every eval problem needs some"
        )
    return tests


def verify_programs(traces: pa.Table, config, rows_of: list[list[int]], *, score_truncated: bool):
    """``(preds, [(correct, reason)], reasons without a program, vote groups per problem)``, the
    shapes :func:`reasonkit.distill.eval.score.verify_samples` builds its table from."""
    from reasonkit.distill.eval.vote import vote_groups
    from reasonkit.filters.code.verify import CodeChecker, extract_code
    from reasonkit.filters.math.verify import default_workers

    tests = tests_of(traces, getattr(config, "tests_col", "tests"))
    preds, reasons = [], []
    for response, finish in zip(traces.column("response").to_pylist(), traces.column("finish_reason").to_pylist()):
        code, why = (None, TRUNCATED) if finish == "length" and not score_truncated else extract_code(response)
        preds.append(code)
        reasons.append(why)
    todo = [i for i, code in enumerate(preds) if code is not None]
    checker = CodeChecker(timeout=config.verify_timeout, workers=default_workers())
    verdicts = dict(zip(todo, checker.check([(preds[i], tests[i]) for i in todo])))
    checked = [(verdicts[i].correct, verdicts[i].reason) if i in verdicts else (None, None) for i in range(len(preds))]
    # the vote: same outputs on every test, same answer; no program or one that does not compile: no vote
    keys = [
        ("out:" + v.key) if (v := verdicts.get(i)) is not None and v.key is not None else None
        for i in range(len(preds))
    ]
    grouped = vote_groups([[keys[i] for i in rows] for rows in rows_of], lambda pairs: [False] * len(pairs))
    return preds, checked, reasons, grouped
