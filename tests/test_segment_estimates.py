"""ope.evaluate(..., by=[...]): every estimator's value and interval per segment."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ope
from ope.evaluation import SEGMENT_TABLE_COLUMNS
from ope.exceptions import ParameterError, SchemaError
from ope.policies import UniformPolicy

pytestmark = [
    pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning"),
    pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning"),
]

COLUMNS = ["value", "std_error", "ci_low", "ci_high", "n", "ess"]
TOL = 1e-10


def _compare(seg: pd.DataFrame, label: str, alone: pd.DataFrame) -> None:
    a = seg[seg.segment == label].set_index(["policy", "estimator"])[COLUMNS]
    b = alone.set_index(["policy", "estimator"])[COLUMNS].loc[a.index]
    assert len(a) == len(alone) > 0
    np.testing.assert_allclose(a.to_numpy(float), b.to_numpy(float), rtol=TOL, atol=TOL)


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    return ope.load_sample().table


def test_weighting_estimates_per_segment_equal_evaluate_on_the_segment_alone(sample):
    kwargs = dict(
        estimators=("ips", "snips", "clipped_ips"), max_weight=50.0, reward_range=(0.0, 1.0), rng=3
    )
    ev = ope.evaluate(sample, by=["segment"], **kwargs)
    seg = ev.table(by="segment")
    assert tuple(seg.columns) == SEGMENT_TABLE_COLUMNS
    labels = sorted(set(pc.unique(sample["segment"]).to_pylist()))
    assert sorted(set(seg.segment)) == labels
    assert (seg.column == "segment").all()
    assert len(seg) == len(labels) * len(ev.policies) * len(ev.estimators)
    for label in labels:  # a loop over the 5 segments
        alone = ope.evaluate(sample.filter(pc.equal(sample["segment"], label)), **kwargs)
        _compare(seg, label, alone.table())
    # the overall table is unchanged by by=
    plain = ope.evaluate(sample, **kwargs).table()
    np.testing.assert_allclose(
        ev.table()[COLUMNS].to_numpy(float), plain[COLUMNS].to_numpy(float), rtol=TOL, atol=TOL
    )
    # by=<column> is that column's rows; to_dict carries them
    assert len(ev.table(by="segment")) == len(seg)
    assert ev.to_dict()["segments"] == seg.to_dict(orient="records")


def test_doubly_robust_per_segment_refits_on_the_segments_rows():
    env = ope.simulate.ContextualBandit(n_actions=4, seed=7)
    table = env.sample(2_000, rng=3)
    pol = {"uniform": UniformPolicy(actions=list(range(4)))}
    kwargs = dict(estimators=("ips", "dr", "snips"), rng=5)
    ev = ope.evaluate(table, pol, by="segment", **kwargs)
    seg = ev.table(by="segment")
    labels = sorted(set(seg.segment))
    assert len(labels) > 1
    for label in labels:  # a loop over segments
        alone = ope.evaluate(table.filter(pc.equal(table["segment"], label)), pol, **kwargs)
        _compare(seg, label, alone.table())
    dr = seg[seg.estimator == "dr"]
    assert (dr.ci_low < dr.value).all() and (dr.value < dr.ci_high).all()


def test_two_segment_columns_and_table_by_one_of_them(sample):
    small = sample.slice(0, 20_000)
    small = small.append_column("half", pa.array(np.arange(small.num_rows) % 2 == 0))
    ev = ope.evaluate(small, estimators=("ips",), by=["segment", "half"], rng=0)
    half = ev.table(by="half")
    assert set(half.column) == {"half"} and set(half.segment) == {"False", "True"}
    assert set(ev.table(by="segment").column) == {"segment", "half"}
    assert ev.by == ("segment", "half")
    # the rows of the two halves add up to the whole
    assert half.groupby("policy")["n"].sum().eq(ev.n).all()
    with pytest.raises(ParameterError, match="segmented by"):
        ev.table(by="country")


def test_without_segments_the_segment_table_is_empty(sample):
    ev = ope.evaluate(sample.slice(0, 5_000), estimators=("ips",), rng=0)
    assert ev.table(by="segment").empty
    assert ev.to_dict()["segments"] == []


def test_a_list_column_in_by_is_a_schema_error():
    df = pd.DataFrame(
        {
            "action": [0, 1, 1, 0],
            "propensity": [0.5] * 4,
            "reward": [1.0, 0.0, 1.0, 0.0],
            "target__a": [0.0, 1.0, 1.0, 0.0],
            "tags": [["x"], ["y", "z"], [], ["x"]],
        }
    )
    with pytest.raises(SchemaError, match="tags"):
        ope.evaluate(df, estimators=("ips",), by=["tags"])
    with pytest.raises(SchemaError, match="not in"):
        ope.evaluate(df, estimators=("ips",), by="country")


def test_segment_estimates_survive_replace_and_render_in_the_report(sample, tmp_path):
    from ope.report.views import segment_estimates

    ev = ope.evaluate(sample.slice(0, 20_000), estimators=("ips", "snips"), by="segment", rng=1)
    rows = segment_estimates(ev)
    assert rows is not None and len(rows) == len(ev.table(by="segment"))
    again = dataclasses.replace(ev, notes=("x",))
    assert again.provenance == ev.provenance and len(again.table(by="segment")) == len(rows)
    page = tmp_path / "ev.html"
    ev.write_report(page)
    assert "<h3>Estimates per segment (" in page.read_text(encoding="utf-8")


def test_segment_summary_lists_every_segment_row(sample):
    ev = ope.evaluate(sample.slice(0, 20_000), estimators=("ips",), by="segment", rng=1)
    text = ev.segment_summary()
    seg = ev.table(by="segment")
    assert text.startswith("per-segment estimates by segment")
    for label in set(seg.segment):
        assert f"segment  {label}" in text or f"segment {label}" in text
    assert sum(line.startswith("segment ") for line in text.splitlines()) == len(seg)
    assert ope.evaluate(sample.slice(0, 2_000), estimators=("ips",)).segment_summary() == ""


def _uniform_table(logs: pa.Table) -> pa.Table:
    """A long-format policy table, uniform over each event's candidate set."""
    lengths = pc.list_value_length(logs["candidates"]).to_numpy()
    return pa.table(
        {
            "event_id": np.repeat(logs["event_id"].to_numpy(), lengths),
            "policy": pa.array(["uniform"] * int(lengths.sum())),
            "action": pc.list_flatten(logs["candidates"]),
            "probability": np.repeat(1.0 / lengths, lengths),
        }
    )


@pytest.fixture(scope="module")
def small(sample) -> pa.Table:
    return sample.slice(0, 12_000)


def test_model_estimates_with_a_policy_table_per_segment_equal_the_segment_alone(small):
    """A table written for every logged event joins once; each segment takes its rows (it used
    to be joined to each segment's rows and fail: events in the table not in the logs)."""
    table = _uniform_table(small)
    kwargs = dict(estimators=("dm", "dr", "ips"), reward_range=(0.0, 1.0), rng=4)
    ev = ope.evaluate(small, table, by="segment", **kwargs)
    seg = ev.table(by="segment")
    labels = sorted(set(pc.unique(small["segment"]).to_pylist()))
    assert sorted(set(seg.segment)) == labels and len(seg) == 3 * len(labels)
    for label in labels:  # a loop over the 5 segments
        rows = small.filter(pc.equal(small["segment"], label))
        own = table.filter(pc.is_in(table["event_id"], value_set=rows["event_id"]))
        _compare(seg, label, ope.evaluate(rows, own, **kwargs).table())
    plain = ope.evaluate(small, table, **kwargs).table()
    np.testing.assert_allclose(
        ev.table()[COLUMNS].to_numpy(float), plain[COLUMNS].to_numpy(float), rtol=TOL, atol=TOL
    )


def test_model_estimates_with_distributions_per_segment(small):
    """A PolicyDistribution has one row per logged event: by= slices it as it slices a table."""
    logs = ope.read_logs(small)
    dist = UniformPolicy(actions=sorted(set(small["action"].to_pylist()))).distribution(logs)
    kwargs = dict(estimators=("dr",), reward_range=(0.0, 1.0), rng=2)
    by_dist = ope.evaluate(logs, {"u": dist}, by="segment", **kwargs).table(by="segment")
    by_obj = ope.evaluate(
        logs,
        {"u": UniformPolicy(actions=sorted(set(small["action"].to_pylist())))},
        by="segment",
        **kwargs,
    ).table(by="segment")
    np.testing.assert_allclose(
        by_dist[COLUMNS].to_numpy(float), by_obj[COLUMNS].to_numpy(float), rtol=TOL, atol=TOL
    )


def test_cli_evaluate_and_report_with_a_policy_table_and_by(small, tmp_path, capsys):
    import json

    import pyarrow.parquet as pq

    from ope.cli import EXIT_OK, main

    logs, pols = tmp_path / "logs.parquet", tmp_path / "uni.parquet"
    pq.write_table(small, logs)
    pq.write_table(_uniform_table(small), pols)
    common = [
        "--policies",
        str(pols),
        "--estimator",
        "dr",
        "--reward-range",
        "0",
        "1",
        "--by",
        "segment",
        "--seed",
        "4",
    ]
    assert main(["evaluate", str(logs), *common, "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    got = {r["segment"]: r["value"] for r in doc["segments"]}
    ev = ope.evaluate(
        small,
        _uniform_table(small),
        estimators=("dr",),
        reward_range=(0.0, 1.0),
        by="segment",
        rng=4,
    )
    want = ev.table(by="segment").set_index("segment")["value"].to_dict()
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=TOL, atol=TOL)
    page = tmp_path / "r.html"
    assert main(["report", str(logs), *common, "--out", str(page)]) == EXIT_OK
    assert "<h3>Estimates per segment (" in page.read_text(encoding="utf-8")
