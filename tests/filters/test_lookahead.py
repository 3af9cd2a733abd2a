"""The language filter's helper process (filters/lookahead.py): same verdicts with it as without,
answers used only for the inputs they were computed from, a dead helper costs nothing but time,
and the helper starts only where it pays and is always stopped."""

import os
import signal
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reasonkit.errors import UserError
from reasonkit.filters import lookahead
from reasonkit.filters.command import filter as filter_command
from reasonkit.filters.config import LANGUAGE_WARM_UP, FilterConfig, language_lookahead
from reasonkit.filters.language import DEFAULT_CANDIDATES, LanguageFilter
from reasonkit.filters.lookahead import Lookahead
from reasonkit.filters.pass1 import build_deduper, build_filters, filter_shards
from reasonkit.filters.run import run_filter
from reasonkit.store import read_stage

from ..helpers.synthetic import trace, traces_table, write_traces

EN = "Let me compute the product of these two numbers first, then check it against an estimate."
FR = "Alors nous calculons le produit de ces deux nombres, puis nous le vérifions avec une estimation."
DE = "Zuerst berechnen wir das Produkt der beiden Zahlen und prüfen es dann mit einer Schätzung."
ZH = "我们先来仔细计算这两个数的乘积。"
REASONINGS = [EN, FR, f"{EN} {ZH}", f"{EN} {DE}", DE, f"{EN} {EN}", "Donc x = 2. Alors y = 3.", "42"]
BATCH = 8


def rows(n=80):
    """Traces in several languages and mixes, some wrong (dropped before the language filter)."""
    out = []
    for i in range(n):
        answer = "4" if i % 5 else "5"  # every fifth wrong: the language filter never sees it
        out.append(trace(f"p{i // 4}", i % 4, reasoning=f"{REASONINGS[i % len(REASONINGS)]} Step {i}.", answer=answer))
    return out


@pytest.fixture
def two_cores(monkeypatch):
    """The helper runs wherever the test runs (it needs two usable cores)."""
    monkeypatch.setattr(lookahead, "usable_cores", lambda: 2)


@pytest.fixture
def launches(monkeypatch):
    """The helpers started, as their pools."""
    pools = []
    real = lookahead._launch

    def spy(*args):
        pool = real(*args)
        pools.append(pool)
        return pool

    monkeypatch.setattr(lookahead, "_launch", spy)
    return pools


def kill(ahead: Lookahead) -> None:
    for pid in list(ahead._pool._processes):
        os.kill(pid, signal.SIGKILL)


def pass1(path, ahead: bool, killed: bool = False):
    """Pass 1's work tables over ``path`` (and the language filter), with or without the helper
    (``killed``: its process killed before the first batch)."""
    config = FilterConfig(traces=str(path), out="unused", workers=1, batch_rows=BATCH)
    filters = build_filters(config, [], lookahead=ahead)
    language = filters[-1]
    if killed:
        kill(language.ahead)
    shards = sorted(path.glob("part-*.parquet"))
    tables = []
    try:
        for table in filter_shards(shards, config, filters, build_deduper(config), set()):
            tables.append(table)
    finally:
        taken = language.ahead.taken
        for f in filters:
            getattr(f, "close", lambda: None)()
    return pa.concat_tables(tables), language, taken


def verdicts(table):
    return {c: table.column(c).to_pylist() for c in ("id", "sample", "lang_ratio", "keep", "drop_reason", "correct")}


def test_the_helper_gives_the_verdicts_the_filter_gives_alone(tmp_path, two_cores):
    write_traces(tmp_path / "t", rows(), shard_rows=30)  # batches cross shard ends
    alone, _, none_taken = pass1(tmp_path / "t", ahead=False)
    helped, language, taken = pass1(tmp_path / "t", ahead=True)
    assert verdicts(helped) == verdicts(alone)
    reasons = verdicts(alone)["drop_reason"]
    assert reasons.count("language") >= 20 and reasons.count("wrong") == 16  # the case is not trivial
    batches = -(-30 // BATCH) * 2 + -(-20 // BATCH)  # 4 + 4 + 3 batches over shards of 30, 30, 20 rows
    assert none_taken == 0 and taken == batches  # every batch's answer came from the helper


def test_a_killed_helper_leaves_the_filter_to_judge_alone(tmp_path, two_cores):
    write_traces(tmp_path / "t", rows(), shard_rows=40)
    alone, _, _ = pass1(tmp_path / "t", ahead=False)
    helped, language, taken = pass1(tmp_path / "t", ahead=True, killed=True)
    assert verdicts(helped) == verdicts(alone)
    assert taken == 0 and not language.ahead.running


def test_a_helper_killed_with_work_in_hand_is_no_answer(two_cores):
    ahead = Lookahead("os:getpid")
    try:
        ahead.submit(["fast"], sorted)
        assert ahead.take(["fast"]) == ["fast"]
        ahead.submit(30, time.sleep)  # sleeps 30 s: still running when the helper dies
        kill(ahead)
        started = time.monotonic()
        assert ahead.take(30) is None and not ahead.running
        assert time.monotonic() - started < 20  # the death is seen, not the sleep waited out
    finally:
        ahead.close()


def test_the_trajectory_language_filter_judges_prose_through_the_helper(tmp_path, two_cores):
    from reasonkit.filters.trajectory import TrajectoryLanguageFilter

    messages = [[{"role": "user", "content": "Q"}, {"role": "assistant", "content": text}] for text in REASONINGS * 3]
    table = pa.table({"messages": messages})
    alone = TrajectoryLanguageFilter("en")
    helped = TrajectoryLanguageFilter("en", lookahead=True)
    try:
        rows_ = list(range(table.num_rows))
        helped.prefetch(pa.table({"messages": messages, "keep": [True] * len(messages)}))
        assert helped.judge(table, rows_) == alone.judge(table, rows_)
        assert helped.ahead.taken == 1
    finally:
        helped.close()


def test_an_answer_is_used_only_for_its_own_inputs(two_cores):
    ahead = Lookahead("os:getpid")
    try:
        assert ahead.running
        ahead.submit(["b", "a"], sorted)
        ahead.submit(["d", "c"], sorted)
        assert ahead.take(["x"]) is None  # never submitted: both older answers dropped
        ahead.submit(["b", "a"], sorted)
        ahead.submit(["d", "c"], sorted)
        assert ahead.take(["d", "c"]) == ["c", "d"]  # the older one, never asked for, is dropped
        assert ahead.take(["b", "a"]) is None and ahead.ready()
        ahead.submit(["z", "y"], sorted)
        deadline = time.monotonic() + 30
        while not ahead.ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ahead.ready() and ahead.take(["z", "y"]) == ["y", "z"] and ahead.taken == 2
    finally:
        ahead.close()
    ahead.close()  # idempotent
    assert not ahead.running and ahead.take(["z", "y"]) is None


def test_an_error_in_the_helper_is_no_answer(two_cores):
    ahead = Lookahead("os:getpid")
    try:
        ahead.submit([1, "a"], sorted)  # TypeError in the helper
        assert ahead.take([1, "a"]) is None and not ahead.running
    finally:
        ahead.close()
    broken = Lookahead("no_such_module:warm")  # the warm-up fails: the pool breaks
    broken.submit(["a"], sorted)
    assert broken.take(["a"]) is None and not broken.running


def test_one_core_or_no_lookahead_starts_no_helper(monkeypatch, launches):
    monkeypatch.setattr(lookahead, "usable_cores", lambda: 1)
    assert not Lookahead("os:getpid").running
    assert not LanguageFilter("en", lookahead=True).ahead.running
    monkeypatch.setattr(lookahead, "usable_cores", lambda: 2)
    assert not LanguageFilter("en").ahead.running
    assert launches == [None, None]  # asked twice (one core each time), never for the filter without lookahead


def test_a_started_helper_is_adopted_by_the_filter(two_cores, launches):
    lookahead.start(LANGUAGE_WARM_UP, "en", DEFAULT_CANDIDATES)
    lookahead.start(LANGUAGE_WARM_UP, "en", DEFAULT_CANDIDATES)  # one helper per warm-up
    assert len(launches) == 1 and lookahead._started
    f = LanguageFilter("en", lookahead=True)
    try:
        assert f.ahead._pool is launches[0] and not lookahead._started and len(launches) == 1
    finally:
        f.close()
    lookahead.start(LANGUAGE_WARM_UP, "fr", DEFAULT_CANDIDATES)
    lookahead.stop_started()
    assert not lookahead._started and len(launches) == 2
    assert_exits(launches)


def assert_exits(pools, seconds=30):
    """Every helper process of ``pools`` ends."""
    processes = [p for pool in pools if pool is not None for p in (pool._processes or {}).values()]
    deadline = time.monotonic() + seconds
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.is_alive() for p in processes)


def test_the_helper_starts_only_for_a_large_input_on_the_local_engine():
    config = FilterConfig(traces="t", out="o", batch_rows=100)
    assert not language_lookahead(config, 399) and language_lookahead(config, 400)
    assert not language_lookahead(FilterConfig(traces="t", out="o", batch_rows=100, lang="none"), 10_000)
    assert not language_lookahead(FilterConfig(traces="t", out="o", batch_rows=100, engine="ray"), 10_000)


def test_distill_filter_starts_the_helper_early_and_the_filter_adopts_it(tmp_path, two_cores, launches):
    write_traces(tmp_path / "t", rows(), shard_rows=40)
    args = [str(tmp_path / "t"), "--workers", "1", "--set", f"batch_rows={BATCH}", "-q"]
    result = CliRunner().invoke(filter_command, [*args, "--out", str(tmp_path / "helped")])
    assert result.exit_code == 0, result.output
    assert len(launches) == 1 and launches[0] is not None and not lookahead._started
    assert_exits(launches)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(lookahead, "usable_cores", lambda: 1)
        result = CliRunner().invoke(filter_command, [*args, "--out", str(tmp_path / "alone")])
    assert result.exit_code == 0, result.output
    helped, alone = read_stage(tmp_path / "helped"), read_stage(tmp_path / "alone")
    assert verdicts(helped) == verdicts(alone) and helped.num_rows > 0
    assert read_stage(tmp_path / "helped" / "rejected").equals(read_stage(tmp_path / "alone" / "rejected"))


def test_a_small_input_judges_language_in_process(tmp_path, two_cores, launches):
    write_traces(tmp_path / "t", rows(16))
    report = run_filter(FilterConfig(traces=str(tmp_path / "t"), out=str(tmp_path / "o"), workers=1, batch_rows=BATCH))
    assert report["rows_in"] == 16 and launches == []


def test_a_failed_run_stops_its_helper(tmp_path, two_cores, launches):
    write_traces(tmp_path / "t", rows(), shard_rows=40)
    config = FilterConfig(traces=str(tmp_path / "t"), out=str(tmp_path / "o"), workers=1, batch_rows=BATCH)
    bad = next(iter(sorted((tmp_path / "t").glob("part-*.parquet"))[1:]))
    table = pq.read_table(bad)
    pq.write_table(
        table.set_column(
            table.column_names.index("completion"), "completion", pa.array([None] * table.num_rows, pa.string())
        ),
        bad,
    )
    with pytest.raises(UserError, match="completion"):
        run_filter(config)
    assert len(launches) == 1
    assert_exits(launches)


def test_a_bad_batch_after_good_ones_commits_the_good_ones_first(tmp_path, two_cores):
    write_traces(tmp_path / "t", rows(40), shard_rows=40)
    good = tmp_path / "t" / "part-00000.parquet"
    bad = tmp_path / "t" / "part-00001.parquet"
    table = traces_table(rows(8))
    pq.write_table(table.set_column(table.column_names.index("id"), "id", pa.array([None] * 8, pa.string())), bad)
    config = FilterConfig(traces=str(tmp_path / "t"), out="unused", workers=1, batch_rows=BATCH)
    filters = build_filters(config, [], lookahead=True)
    seen = []
    try:
        with pytest.raises(UserError, match="'id' must not be null"):
            for batch in filter_shards([good, bad], config, filters, build_deduper(config), set()):
                seen.append(batch.num_rows)
    finally:
        for f in filters:
            getattr(f, "close", lambda: None)()
    assert sum(seen) == 40  # every batch read before the bad one was judged and handed on


def test_the_helper_imports_neither_numpy_nor_pyarrow():
    # Its start is on the run's critical path (lingua's models load after its imports): the filter
    # classes' module it imports must not pull numpy or pyarrow (~0.1 s) in at import time.
    import subprocess
    import sys

    code = (
        "import sys, reasonkit.filters.language as l; l._warm_up('en', ('en', 'fr')); "
        "print(sorted(m for m in ('numpy', 'pyarrow', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_batches_wait_for_a_slow_helper_only_up_to_the_cap(tmp_path, monkeypatch):
    from reasonkit.filters import pass1
    from reasonkit.filters.base import RowFilter

    class NeverReady(RowFilter):
        name, reasons = "never_ready", ()
        prefetched = 0

        def prefetch(self, batch):
            self.prefetched += 1

        def ready(self):
            return False

        def judge(self, batch, rows):
            return [None] * len(rows)

    write_traces(tmp_path / "t", rows(40), shard_rows=40)
    config = FilterConfig(traces=str(tmp_path / "t"), out="unused", workers=1, batch_rows=2)
    early = NeverReady()
    monkeypatch.setattr(pass1, "MAX_WAITING_BATCHES", 3)
    most = 0
    for done, _ in enumerate(
        filter_shards(sorted((tmp_path / "t").glob("part-*.parquet")), config, [early], build_deduper(config), set()),
        start=1,
    ):
        most = max(most, early.prefetched - done + 1)
    assert early.prefetched == 20 and most == 4  # the yielded batch and 3 waiting
    monkeypatch.setattr(pass1, "MAX_WAITING_BATCHES", 1000)
    monkeypatch.setattr(pass1, "MAX_WAITING_BYTES", 1)  # any batch is over a byte: none waits
    early.prefetched, most = 0, 0
    for done, _ in enumerate(
        filter_shards(sorted((tmp_path / "t").glob("part-*.parquet")), config, [early], build_deduper(config), set()),
        start=1,
    ):
        most = max(most, early.prefetched - done + 1)
    assert most == 1
