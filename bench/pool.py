"""Benchmark: filters/math/pool.py's TimeoutPool against pebble's ProcessPool on the same work.

    python bench/pool.py ROWS STUCK      # e.g. 4000 0 (no stuck item), 1600 1 (three stuck items)

The work is the filter's: math-verify on the distinct (prediction, gold) pairs of ROWS synthetic
LaTeX traces, 2 workers, a 3 s timeout per item; with STUCK=1 three items that never return
(sympy evaluating a power tower in C) are spread through it. pebble runs as it must to give each
item its own timeout: ``schedule`` per item (its ``map`` timeout covers a whole chunk), from a
forkserver context whose server preloads math-verify, with an initializer that imports it.
Rounds alternate; the results must be identical. Needs ``pip install pebble`` (the bench extra).
"""

import multiprocessing as mp
import sys
import time
from concurrent.futures import TimeoutError as FTimeout


def preload():
    import reasonkit.filters.math.check  # noqa


# long: a benchmark script: setup, the timed runs and the printed table, in the order they run
def main():
    from reasonkit.filters.math.extract import extract_answer
    from reasonkit.tests.helpers.synthetic import synthetic_rows

    rows = synthetic_rows(int(sys.argv[1]) // 4, "latex", seed=0)
    pairs = list(dict.fromkeys((extract_answer(r["response"])[0], r["answer"]) for r in rows))
    stuck = ("9^{9^{9^{9}}}", "1")  # sympy evaluates a power tower in C: never returns
    k = int(sys.argv[2])
    items = (
        pairs
        if k == 0
        else pairs[: len(pairs) // 3]
        + [stuck]
        + pairs[len(pairs) // 3 : 2 * len(pairs) // 3]
        + [stuck]
        + pairs[2 * len(pairs) // 3 :]
        + [stuck]
    )
    timeout = 3.0
    out = {}
    for rnd in range(2):
        for who in ("ours", "pebble") if rnd == 0 else ("pebble", "ours"):
            t0 = time.perf_counter()
            if who == "ours":
                from reasonkit.filters.math.pool import TimeoutPool

                with TimeoutPool(
                    "reasonkit.filters.math.check:check_math",
                    workers=2,
                    timeout=timeout,
                    preload=["reasonkit.filters.math.check"],
                ) as pool:
                    res = pool.map(items)
            else:
                try:
                    from pebble import ProcessPool
                except ImportError:
                    raise SystemExit("bench/pool.py needs pebble: pip install 'reasonkit[bench]'") from None
                from reasonkit.filters.math.check import check_math

                ctx = mp.get_context("forkserver")
                ctx.set_forkserver_preload(["reasonkit.filters.math.check"])
                with ProcessPool(max_workers=2, context=ctx, initializer=preload) as pool:
                    futs = [pool.schedule(check_math, args=it, timeout=timeout) for it in items]
                    res = []
                    for f in futs:
                        try:
                            res.append(f.result())
                        except FTimeout:
                            res.append((None, "timeout"))
                        except Exception as e:
                            res.append((None, f"error:{type(e).__name__}"))
            dt = time.perf_counter() - t0
            out.setdefault(who, []).append(dt)
            out.setdefault(who + "_res", res)
            print(
                who,
                rnd,
                f"{dt:.2f} s",
                len(items),
                "items",
                sum(r == (None, "timeout") for r in res),
                "timeouts",
                flush=True,
            )
    print("same results:", out["ours_res"] == out["pebble_res"])
    print({k: [round(x, 2) for x in v] for k, v in out.items() if not k.endswith("_res")})


if __name__ == "__main__":
    main()
