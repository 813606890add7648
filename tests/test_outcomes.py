"""Several outcomes of the same rows on the same weights (ope.evaluate_outcomes): one pass of the
moment kernel gives each outcome the statistics of its own pass, the evaluations equal
ope.evaluate per outcome, the settings without a shared pass fall back to one evaluation per
outcome, and bad outcomes are refused by name."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import ope
import ope.policies
from ope import _kernel
from ope.exceptions import OPEWarning, ParameterError, SchemaError, ValidationError
from ope.streaming import MomentStats

#: The shared pass repeats each outcome's own arithmetic; only thread splits could reorder sums.
RTOL = 1e-12


def _frame(n: int = 5000, seed: int = 0) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    a = g.integers(0, 3, n)
    p = np.choose(a, [0.5, 0.3, 0.2])
    return pd.DataFrame(
        {
            "action": a,
            "propensity": p,
            "reward": g.binomial(1, 0.3 + 0.1 * a).astype(float),
            "cost": g.gamma(2.0, 1.0 + a),
            "latency_ms": g.normal(100.0 + 5.0 * a, 10.0),
            "segment": g.integers(0, 2, n),
            "x0": g.normal(size=n),
            "target__greedy": (a == 2).astype(float),
            "target__mix": np.choose(a, [0.2, 0.3, 0.5]),
        }
    )


def _rows(ev: ope.Evaluation) -> pd.DataFrame:
    cols = ["policy", "estimator", "value", "std_error", "ci_low", "ci_high"]
    return ev.table()[cols].reset_index(drop=True)


def _same(a: ope.Evaluation, b: ope.Evaluation) -> None:
    pd.testing.assert_frame_equal(_rows(a), _rows(b), rtol=RTOL, atol=1e-15)
    ca, cb = a.comparisons(), b.comparisons()
    for column in ("difference", "std_error"):
        np.testing.assert_allclose(ca[column], cb[column], rtol=RTOL, atol=1e-15)
    assert a.logging.value == pytest.approx(b.logging.value, rel=RTOL)


def _per_outcome(frame: pd.DataFrame, outcome: str, **options) -> ope.Evaluation:
    if outcome != "reward":
        frame = frame.drop(columns="reward").rename(columns={outcome: "reward"})
    return ope.evaluate(frame, **options)


# --------------------------------------------------------------------------------------------
# the kernel
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["columns", "matrix"])
@pytest.mark.parametrize("max_weight", [None, 2.5])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_shared_pass_gives_each_outcome_the_statistics_of_its_own_pass(
    layout, max_weight, threads, monkeypatch
):
    monkeypatch.setattr(_kernel, "PARALLEL_MIN_ROWS", 2048)
    g = np.random.default_rng(1)
    n = 30_000
    p = g.uniform(0.02, 1.0, n)
    t = g.uniform(0.0, 1.0, (n, 3))
    target = np.ascontiguousarray(t) if layout == "matrix" else [t[:, j].copy() for j in range(3)]
    outcomes = [g.normal(5.0, 2.0, n), g.binomial(1, 0.2, n).astype(float), g.exponential(1e4, n)]
    _kernel.set_threads(threads)
    try:
        shared = _kernel.accumulate_outcomes(
            outcomes, p, target, max_weight=max_weight, block_rows=1024
        )
        alone = [
            _kernel.accumulate(r, p, target, max_weight=max_weight, block_rows=1024)
            for r in outcomes
        ]
    finally:
        _kernel.set_threads(None)
    assert len(shared) == 3
    for (m, c), (m1, c1) in zip(shared, alone):
        for name in _kernel.MOMENT_FIELDS:
            np.testing.assert_allclose(getattr(m, name), getattr(m1, name), rtol=RTOL, atol=0)
        assert (c.finite, c.r_min, c.r_max, c.p_min, c.p_max) == (
            c1.finite,
            c1.r_min,
            c1.r_max,
            c1.p_min,
            c1.p_max,
        )
        np.testing.assert_array_equal(c.t_min, c1.t_min)
        np.testing.assert_array_equal(c.t_max, c1.t_max)
    # the outcomes differ: a pass that served one outcome's statistics to all would fail here
    assert shared[0][0].shift[0] != shared[2][0].shift[0]


def test_a_non_finite_outcome_is_seen_in_its_own_checks_only():
    g = np.random.default_rng(2)
    n = 5000
    p, t = g.uniform(0.1, 1.0, n), g.uniform(0.0, 1.0, (n, 2))
    bad = g.normal(size=n)
    bad[1234] = np.nan
    (_, ok), (_, seen) = _kernel.accumulate_outcomes([g.normal(size=n), bad], p, t, max_weight=None)
    assert ok.finite and not seen.finite


def test_moment_stats_of_several_outcomes_equal_those_of_each():
    frame = _frame()
    columns = [frame[f"target__{c}"].to_numpy() for c in ("greedy", "mix")]
    p = frame["propensity"].to_numpy()
    rewards = [frame[c].to_numpy(dtype=float) for c in ("reward", "cost", "latency_ms")]
    shared = MomentStats.from_outcomes(rewards, p, columns, names=["greedy", "mix"], max_weight=4.0)
    for stats, r in zip(shared, rewards):
        alone = MomentStats.from_arrays(r, p, columns, names=["greedy", "mix"], max_weight=4.0)
        assert stats.names == alone.names and stats.n == alone.n
        for key, value in alone.moments.items():
            np.testing.assert_allclose(stats.moments[key], value, rtol=RTOL, err_msg=key)
        assert (stats.min_r, stats.max_r) == (alone.min_r, alone.max_r)


def test_moment_stats_of_outcomes_refuse_what_from_arrays_refuses():
    p, t = np.full(4, 0.5), np.full(4, 0.5)
    with pytest.raises(ParameterError, match="at least one outcome"):
        MomentStats.from_outcomes([], p, t)
    with pytest.raises(ParameterError, match="list of outcome arrays"):
        MomentStats.from_outcomes(np.ones(4), p, t)
    with pytest.raises(ValidationError, match=r"rewards\[1\]` has 3 rows"):
        MomentStats.from_outcomes([np.ones(4), np.ones(3)], p, t)
    with pytest.raises(ValidationError, match="reward"):
        MomentStats.from_outcomes([np.ones(4), np.array([1.0, np.inf, 0.0, 1.0])], p, t)


# --------------------------------------------------------------------------------------------
# evaluate_outcomes
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ci", ["normal", "t", "betting"])
def test_each_outcome_is_evaluated_as_evaluate_would(ci):
    frame = _frame()
    options = {"estimators": ("ips", "snips", "clipped_ips"), "max_weight": 4.0, "ci": ci}
    if ci == "betting":
        frame = frame.assign(cost=frame["cost"].clip(upper=20.0), latency_ms=0.5)
        options = {"estimators": ("ips", "snips"), "ci": ci, "reward_range": (0.0, 20.0)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        found = ope.evaluate_outcomes(frame, outcomes=["reward", "cost", "latency_ms"], **options)
        assert list(found) == ["reward", "cost", "latency_ms"]
        for outcome, ev in found.items():
            _same(ev, _per_outcome(frame, outcome, **options))
            assert ev.provenance.options["outcome"] == outcome


def test_one_pass_serves_every_outcome(monkeypatch):
    calls = {"outcomes": 0, "single": 0}
    shared, single = _kernel.accumulate_outcomes, _kernel.accumulate

    def count_shared(*args, **kwargs):
        calls["outcomes"] += 1
        return shared(*args, **kwargs)

    def count_single(*args, **kwargs):
        calls["single"] += 1
        return single(*args, **kwargs)

    import ope.moments

    monkeypatch.setattr(ope.moments, "accumulate_outcomes", count_shared)
    monkeypatch.setattr(ope.moments, "accumulate", count_single)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        ope.evaluate_outcomes(_frame(), outcomes=["reward", "cost"], estimators=("ips", "snips"))
    assert calls == {"outcomes": 1, "single": 0}


def test_a_guardrail_decision_makes_one_pass_for_its_outcomes(monkeypatch):
    import ope.moments

    calls = []
    shared = _kernel.accumulate_outcomes
    monkeypatch.setattr(
        ope.moments,
        "accumulate_outcomes",
        lambda rewards, *a, **k: calls.append(len(rewards)) or shared(rewards, *a, **k),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        ope.guardrail_decision(_frame(), guardrails=["cost:lower:0.5", "latency_ms:lower:20"])
    assert calls == [3]


def test_policy_objects_are_resolved_once_and_give_the_same_numbers():
    frame = _frame().drop(columns=["target__greedy", "target__mix"])
    policy = ope.policies.UniformPolicy(actions=[0, 1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        found = ope.evaluate_outcomes(
            frame, {"uniform": policy}, outcomes=["cost", "reward"], estimators=("snips",)
        )
        for outcome, ev in found.items():
            _same(
                ev,
                _per_outcome(frame, outcome, policies={"uniform": policy}, estimators=("snips",)),
            )


@pytest.mark.parametrize(
    "options",
    [
        {
            "policies": {"uniform": ope.policies.UniformPolicy(actions=[0, 1, 2])},
            "estimators": ("ips", "dr"),
            "context_columns": ["x0"],
            "rng": 0,
        },
        {"estimators": ("snips",), "by": "segment"},
        {"estimators": ("snips",), "weight_column": "w"},
    ],
    ids=["dr", "segments", "sampling-weights"],
)
def test_settings_without_a_shared_pass_evaluate_each_outcome(options, monkeypatch):
    frame = _frame(3000).assign(w=np.linspace(1.0, 3.0, 3000))
    import ope.moments

    def refuse(*args, **kwargs):
        raise AssertionError("no shared pass for these settings")

    monkeypatch.setattr(ope.moments, "accumulate_outcomes", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = ope.evaluate_outcomes(frame, outcomes=["reward", "cost"], **options)
        for outcome, ev in found.items():
            _same(ev, _per_outcome(frame, outcome, **options))


def test_warnings_name_their_outcome_once():
    frame = _frame(40)  # fewer than 30 effective rows for the greedy candidate
    with pytest.warns(OPEWarning) as record:
        ope.evaluate_outcomes(frame, outcomes=["reward", "cost"], estimators=("snips",))
    texts = [str(w.message) for w in record if issubclass(w.category, OPEWarning)]
    assert any(t.startswith("reward: ") for t in texts)
    assert any(t.startswith("cost: ") for t in texts)
    assert len(texts) == len(set(texts))


@pytest.mark.parametrize(
    ("outcomes", "error", "match"),
    [
        ([], ParameterError, "at least one outcome"),
        ("cost", None, None),
        (["cost", "cost"], ParameterError, r"\['cost'\] more than once"),
        ([3], ParameterError, "outcomes"),
        (["missing"], SchemaError, "no outcome column 'missing'"),
        (["action_name"], SchemaError, "must be numeric"),
        (["gap"], ValidationError, "non-finite value \\(first at row 7\\)"),
    ],
)
def test_bad_outcomes_are_refused_by_name(outcomes, error, match):
    frame = _frame(200).assign(action_name="a", gap=1.0)
    frame.loc[7, "gap"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        if error is None:
            assert list(ope.evaluate_outcomes(frame, outcomes=outcomes, estimators=("ips",))) == [
                "cost"
            ]
            return
        with pytest.raises(error, match=match):
            ope.evaluate_outcomes(frame, outcomes=outcomes, estimators=("ips",))


def test_a_scan_is_refused(tmp_path):
    path = tmp_path / "logs.parquet"
    _frame(100).to_parquet(path)
    with pytest.raises(ParameterError, match="a scan is not supported"):
        ope.evaluate_outcomes(ope.scan_logs(path), outcomes=["reward", "cost"])


def test_a_bad_option_is_refused_before_the_rows_are_read():
    with pytest.raises(ParameterError, match="confidence_level"):
        ope.evaluate_outcomes("no-such-file.parquet", outcomes=["cost"], confidence_level=2.0)
