"""A property-based fuzz of the readers and of ``ope.evaluate`` (hypothesis).

Random schemas (missing, extra, nameless and repeated columns), types (float64/32/16, ints,
strings, bools, lists, nulls) and values (subnormals, 1e-308, 1e308, +-1e160, NaN, +-inf,
empty lists, empty tables) are fed to ``ope.read_logs`` from Arrow tables, DataFrames and
parquet files, and what reads is evaluated. Every outcome must be either a correct result or
an ``OPEError`` subclass: never another exception, never a NaN value, never a hang.

- correct reads: every kept row obeys the row rules, rows read = rows in the source, rows
  used + rejected = rows read, and the report's counts equal the rows dropped;
- correct estimates: finite where the input is finite (every estimate ope reports has a
  finite value and a finite or absent standard error), IPS and clipped IPS within
  [min(0, r_min), max(0, r_max)] * max weight, SNIPS within [r_min, r_max].

Hangs: each example runs under a hypothesis ``deadline`` and, where the platform has SIGALRM,
a watchdog that interrupts it. The run is deterministic (``derandomize=True``, no example
database). Budget: ``MAX_EXAMPLES`` examples per test, the whole file well under 60 s.
"""

from __future__ import annotations

import contextlib
import math
import signal
import tempfile
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ope
from ope.exceptions import OPEError, OPEWarning
from ope.io import read_logs, scan_logs
from ope.logs import BanditLogs
from ope.schema import REJECTION_REASONS

#: Examples per fuzz test (three tests): ~0.02-0.1 s each on one core.
MAX_EXAMPLES = 150

#: A generous per-example bound: examples take milliseconds, so only a hang-like slowdown
#: reaches it (the wall clock is never otherwise asserted on).
DEADLINE = timedelta(seconds=20)
WATCHDOG_SECONDS = 60

FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=DEADLINE,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

EXTREMES = [
    0.0,
    -0.0,
    1.0,
    0.5,
    1e-308,
    5e-324,
    2.2250738585072014e-308,
    1e-149,
    1e308,
    -1e308,
    1.7976931348623157e308,
    1e160,
    -1e160,
    1e6,
    math.nan,
    math.inf,
    -math.inf,
]


@contextlib.contextmanager
def watchdog(seconds: int = WATCHDOG_SECONDS) -> Iterator[None]:
    """Interrupt the example with a TimeoutError after ``seconds`` (where SIGALRM exists)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"a fuzz example ran for more than {seconds} s (a hang)")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------------------------


def floats(*, valid: tuple[float, float] | None = None) -> st.SearchStrategy[float]:
    """Floats with extremes; mostly in ``valid`` when given (so that many rows pass)."""
    wild = st.one_of(
        st.sampled_from(EXTREMES),
        st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    )
    if valid is None:
        return wild
    lo, hi = valid
    return st.one_of(
        st.floats(min_value=lo, max_value=hi), st.floats(min_value=lo, max_value=hi), wild
    )


@st.composite
def column(draw: Any, n: int, kind: str) -> pa.Array:
    """One column of ``n`` values of a drawn type, for a column of role ``kind``."""
    dtype = draw(
        st.sampled_from(
            ["float64"] * 6 + ["float32", "float16", "int64", "string", "bool", "list", "null"]
        )
    )
    if dtype == "null":
        return pa.nulls(n)
    if dtype == "list":
        items = draw(st.lists(st.lists(floats(), max_size=3), min_size=n, max_size=n))
        return pa.array(items, type=pa.list_(pa.float64()))
    if dtype == "string":
        return pa.array(
            draw(
                st.lists(
                    st.sampled_from(["0", "1", "0.5", "", "x", "1e308"]), min_size=n, max_size=n
                )
            )
        )
    if dtype == "bool":
        return pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if dtype == "int64" or kind in ("action", "event_id"):
        values = draw(
            st.lists(
                st.integers(-3, 5) if kind != "event_id" else st.integers(0, n + 2),
                min_size=n,
                max_size=n,
            )
        )
        return pa.array(values, type=pa.int64())
    valid = {"propensity": (1e-6, 1.0), "target": (0.0, 1.0), "reward": (-1.0, 1.0)}.get(kind)
    values = np.array(draw(st.lists(floats(valid=valid), min_size=n, max_size=n)), dtype=np.float64)
    with np.errstate(over="ignore"):
        cast = values.astype(dtype)
    nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n)) if draw(st.booleans()) else None
    return pa.array(cast, mask=np.array(nulls, dtype=bool) if nulls else None)


@st.composite
def log_tables(draw: Any) -> pa.Table:
    """An Arrow table that is sometimes valid logs and often not."""
    n = draw(st.integers(0, 10))
    names: list[str] = []
    arrays: list[pa.Array] = []
    roles = [("action", "action"), ("propensity", "propensity"), ("reward", "reward")]
    for name, role in roles:
        if draw(st.integers(0, 19)) == 0:
            continue  # a required column missing
        names.append(name)
        arrays.append(
            draw(column(n, role)) if draw(st.integers(0, 5)) == 0 else _typical(draw, n, role)
        )
    if draw(st.booleans()):
        names.append("event_id")
        arrays.append(draw(column(n, "event_id")))
    for k in range(draw(st.integers(0, 2))):
        names.append(draw(st.sampled_from([f"target__p{k}"] * 8 + ["target__", "target__p0"])))
        arrays.append(
            _typical(draw, n, "target") if draw(st.booleans()) else draw(column(n, "target"))
        )
    for k in range(draw(st.integers(0, 2))):
        names.append(
            draw(
                st.sampled_from(
                    [f"x{k}"] * 6
                    + ["segment", "reward", "target_dist__p0", "", "__index_level_0__"]
                )
            )
        )
        arrays.append(draw(column(n, "other")))
    return pa.Table.from_arrays(arrays, names=names) if names else pa.table({})


def _typical(draw: Any, n: int, role: str) -> pa.Array:
    """A column of the right type whose values are mostly valid, with some extremes."""
    if role == "action":
        return pa.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), type=pa.int64())
    valid = {"propensity": (1e-6, 1.0), "target": (0.0, 1.0), "reward": (-1.0, 1.0)}[role]
    return pa.array(draw(st.lists(floats(valid=valid), min_size=n, max_size=n)), type=pa.float64())


def _as_source(table: pa.Table, how: str, tmp: Path) -> Any:
    if how == "table":
        return table
    names = table.column_names
    if how == "dataframe":
        df = pd.DataFrame({i: table.column(i).to_pandas() for i in range(table.num_columns)})
        df.columns = names
        return df
    path = tmp / "logs.parquet"
    pq.write_table(table, path)
    return path


# --------------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------------


def check_read(logs: BanditLogs, n_source: int) -> None:
    """Every kept row obeys the rules; the report accounts for every source row."""
    r = logs.report
    assert r.rows_read == n_source
    assert logs.n == r.rows_used == r.rows_read - r.rows_rejected
    assert set(r.rejected) <= set(REJECTION_REASONS)
    assert all(count > 0 for count in r.rejected.values())
    p = logs.column("propensity")
    assert np.all((p > 0) & (p <= 1))
    assert np.all(np.isfinite(logs.column("reward")))
    for name in logs.target_policies:
        t = logs.column("target__" + name)
        assert np.all((t >= 0) & (t <= 1))
    if "event_id" in logs.columns:
        ids = logs.table.column("event_id")
        assert ids.null_count == 0 and len(ids.unique()) == logs.n


def check_evaluation(logs: BanditLogs, ev: Any, max_weight: float) -> None:
    """Finite values, and values within what the rewards and weights allow."""
    r = logs.column("reward")
    p = logs.column("propensity")
    table = ev.table()
    for row in table.itertuples():
        assert math.isfinite(row.value), f"{row.estimator} on {row.policy}: value {row.value}"
        assert row.std_error is None or not math.isnan(row.std_error) or row.n < 2, row
        t = (
            logs.column("target__" + row.policy)
            if "target__" + row.policy in logs.columns
            else None
        )
        if t is None:
            continue
        w = t / p
        lo, hi = min(0.0, float(r.min())), max(0.0, float(r.max()))
        if row.estimator in ("ips", "clipped_ips"):
            wmax = float(w.max()) if row.estimator == "ips" else min(float(w.max()), max_weight)
            bound = max(abs(lo), abs(hi)) * wmax
            slack = 1e-9 * bound + 1e-300
            assert lo * wmax - slack <= row.value <= hi * wmax + slack, row
        elif row.estimator == "snips" and w.sum() > 0:
            slack = 1e-9 * max(abs(float(r.min())), abs(float(r.max())))
            assert float(r.min()) - slack <= row.value <= float(r.max()) + slack, row


def outcome(call: Any) -> Any:
    """``call()`` or the OPEError it raised; any other exception fails the example."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OPEWarning)
            return call()
    except OPEError as exc:
        return exc


# --------------------------------------------------------------------------------------------
# the fuzz tests
# --------------------------------------------------------------------------------------------


@FUZZ
@given(
    table=log_tables(),
    how=st.sampled_from(["table", "dataframe", "parquet"]),
    on_invalid=st.sampled_from(["raise", "drop"]),
)
def test_readers_end_in_logs_or_an_ope_error(table: pa.Table, how: str, on_invalid: str) -> None:
    with watchdog(), tempfile.TemporaryDirectory() as tmp:
        try:
            source = _as_source(table, how, Path(tmp))
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            return  # the input itself cannot be built in this form (e.g. parquet of a null column)
        got = outcome(lambda: read_logs(source, on_invalid=on_invalid))
        if isinstance(got, BanditLogs):
            check_read(got, table.num_rows)
        if isinstance(source, Path) and isinstance(got, BanditLogs):
            scan = scan_logs(source, on_invalid=on_invalid, batch_size=3)
            streamed = outcome(lambda: sum(b.n for b in scan))
            assert streamed == got.n and scan.report == got.report


@st.composite
def valid_logs(draw: Any) -> pa.Table:
    """Logs that read (perhaps after dropping rows), with extreme but finite rewards."""
    n = draw(st.integers(1, 12))
    reward = draw(
        st.lists(
            st.one_of(
                st.floats(-1.0, 1.0),
                st.sampled_from(
                    [0.0, 1.0, 5e-324, 1e-308, 1e308, -1e308, 1e160, -1e160, 1e6, math.nan]
                ),
            ),
            min_size=n,
            max_size=n,
        )
    )
    propensity = draw(
        st.lists(
            st.one_of(st.floats(1e-6, 1.0), st.sampled_from([1e-149, 1e-300, 5e-324, 1.0, 0.0])),
            min_size=n,
            max_size=n,
        )
    )
    target = draw(
        st.lists(
            st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, 5e-324])),
            min_size=n,
            max_size=n,
        )
    )
    return pa.table(
        {
            "event_id": np.arange(n),
            "action": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)),
            "propensity": propensity,
            "reward": reward,
            "target__new": target,
        }
    )


@FUZZ
@given(
    table=valid_logs(),
    max_weight=st.sampled_from([1.0, 10.0, 1e6]),
    ci=st.sampled_from(["normal", "t"]),
)
def test_evaluate_on_what_reads_is_finite_and_plausible(
    table: pa.Table, max_weight: float, ci: str
) -> None:
    with watchdog():
        logs = outcome(lambda: read_logs(table, on_invalid="drop"))
        if isinstance(logs, OPEError):
            return
        check_read(logs, table.num_rows)
        ev = outcome(
            lambda: ope.evaluate(
                logs, None, estimators=("ips", "snips", "clipped_ips"), ci=ci, max_weight=max_weight
            )
        )
        if not isinstance(ev, OPEError):
            check_evaluation(logs, ev, max_weight)


@FUZZ
@given(table=log_tables(), ci=st.sampled_from(["normal", "t"]))
def test_evaluate_on_fuzzed_logs_never_raises_outside_the_tree(table: pa.Table, ci: str) -> None:
    with watchdog():
        logs = outcome(lambda: read_logs(table, on_invalid="drop"))
        if isinstance(logs, OPEError) or not logs.target_policies:
            return
        ev = outcome(lambda: ope.evaluate(logs, None, estimators=("ips", "snips"), ci=ci))
        if not isinstance(ev, OPEError):
            check_evaluation(logs, ev, math.inf)


@st.composite
def logs_with_context(draw: Any) -> pa.Table:
    """Valid logs with candidates and a context column of extreme but finite values."""
    n = draw(st.integers(4, 30))
    scale = draw(st.sampled_from([1.0, 1e-300, 5e-324, 1e6, 1e100]))
    x = np.array(draw(st.lists(st.floats(-1.0, 1.0), min_size=n, max_size=n))) * scale
    return pa.table(
        {
            "event_id": np.arange(n),
            "action": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)),
            "propensity": np.full(n, 1 / 3),
            "reward": draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)),
            "candidates": [[0, 1, 2]] * n,
            "logging_distribution": [[1 / 3] * 3] * n,
            "x0": x,
        }
    )


# hostile features (up to 1e100) overflow inside scikit-learn's sparse solver; the test checks
# the outcome (a value or an ope error), not the solver's floating-point warnings
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(FUZZ, max_examples=MAX_EXAMPLES // 5)
@given(table=logs_with_context(), estimator=st.sampled_from(["dm", "dr", "sndr"]))
def test_reward_model_estimators_end_in_a_value_or_an_ope_error(
    table: pa.Table, estimator: str
) -> None:
    with watchdog():
        logs = read_logs(table)
        ev = outcome(
            lambda: ope.evaluate(
                logs, {"u": ope.policies.UniformPolicy()}, estimators=(estimator,), rng=0
            )
        )
        if not isinstance(ev, OPEError):
            check_evaluation(logs, ev, math.inf)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_reward_model_failure_names_the_context_column() -> None:
    n = 40
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "event_id": np.arange(n),
            "action": rng.integers(0, 3, n),
            "propensity": np.full(n, 1 / 3),
            "reward": rng.uniform(size=n),
            "candidates": [[0, 1, 2]] * n,
            "logging_distribution": [[1 / 3] * 3] * n,
            "x0": rng.uniform(size=n) * 1e160,
        }
    )
    logs = read_logs(table)
    try:
        ev = ope.evaluate(logs, {"u": ope.policies.UniformPolicy()}, estimators=("dr",), rng=0)
    except OPEError as exc:
        assert "x0" in str(exc) and "q_target" not in str(exc), str(exc)
    else:
        assert math.isfinite(ev.table()["value"].iloc[0])
