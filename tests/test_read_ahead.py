"""Reading a single parquet file one batch ahead: the same batches, in order; the reader's
errors reach the caller; a caller that stops early stops the reader."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ope
from ope.io import _read_ahead


def _batches(n: int, fail_at: int | None = None, seen: list[int] | None = None):
    for i in range(n):
        if fail_at == i:
            raise OSError(f"disk error at batch {i}")
        if seen is not None:
            seen.append(i)
        yield pa.record_batch({"x": pa.array([i, i])})


def test_the_batches_come_in_order():
    got = [b.column("x")[0].as_py() for b in _read_ahead(_batches(50))]
    assert got == list(range(50))


def test_an_error_of_the_reader_is_raised_after_the_batches_before_it():
    got = []
    with pytest.raises(OSError, match="disk error at batch 3"):
        for b in _read_ahead(_batches(10, fail_at=3)):
            got.append(b.column("x")[0].as_py())
    assert got == [0, 1, 2]


def test_a_caller_that_stops_early_stops_the_reader():
    seen: list[int] = []
    before = threading.active_count()
    it = _read_ahead(_batches(1_000, seen=seen))
    next(it)
    it.close()  # the worker is joined here
    assert threading.active_count() == before
    assert len(seen) <= 3  # at most the batch handed out, one queued and one in hand


@pytest.mark.filterwarnings(
    "ignore::ope.OverlapWarning"
)  # random targets: a mean weight far from 1
def test_a_streamed_evaluation_of_a_file_equals_the_whole_read(tmp_path):
    rng = np.random.default_rng(3)
    n = 50_000
    table = pa.table(
        {
            "action": rng.integers(0, 3, n),
            "propensity": np.full(n, 1 / 3),
            "reward": rng.random(n),
            "target__a": rng.uniform(0, 1, n),
        }
    )
    path = tmp_path / "logs.parquet"
    pq.write_table(table, path, row_group_size=4_096)
    streamed = ope.evaluate(ope.scan_logs(path, batch_size=5_000), estimators=("ips",))
    whole = ope.evaluate(ope.read_logs(path), estimators=("ips",))
    a, b = streamed.table(), whole.table()
    np.testing.assert_allclose(a["value"], b["value"], rtol=1e-12)
    assert list(a["n"]) == list(b["n"]) == [n] * len(b)
