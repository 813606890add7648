"""ope.evaluate: many policies × estimators, paired comparisons, streaming equals eager."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import ope
from ope.evaluation import TABLE_COLUMNS
from ope.exceptions import MissingBoundsError, PolicyError

# the hand-worked logs are tiny on purpose
pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")


def _hand_logs() -> pd.DataFrame:
    # 6 rows, two candidates; worked by hand below
    return pd.DataFrame(
        {
            "event_id": np.arange(6),
            "action": [0, 1, 1, 0, 1, 0],
            "propensity": [0.5, 0.5, 0.25, 0.5, 0.5, 0.25],
            "reward": [1.0, 0.0, 1.0, 0.0, 1.0, 1.0],
            "target__always_1": [0.0, 1.0, 1.0, 0.0, 1.0, 0.0],
            "target__half": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
        }
    )


def test_table_columns_and_hand_values():
    ev = ope.evaluate(_hand_logs(), estimators=("ips", "snips"))
    t = ev.table()
    assert tuple(t.columns) == TABLE_COLUMNS
    assert list(zip(t.policy, t.estimator)) == [
        ("always_1", "ips"),
        ("always_1", "snips"),
        ("half", "ips"),
        ("half", "snips"),
    ]
    # always_1: w = [0, 2, 4, 0, 2, 0], w*r = [0, 0, 4, 0, 2, 0]
    ips = t.set_index(["policy", "estimator"]).loc[("always_1", "ips")]
    assert ips.value == pytest.approx(6 / 6)
    snips = t.set_index(["policy", "estimator"]).loc[("always_1", "snips")]
    assert snips.value == pytest.approx(6 / 8)
    # half: w = [1, 1, 2, 1, 1, 2], w*r = [1, 0, 2, 0, 1, 2] -> IPS 1.0, SNIPS 6/8
    half = t.set_index(["policy", "estimator"])
    assert half.loc[("half", "ips")].value == pytest.approx(1.0)
    assert half.loc[("half", "snips")].value == pytest.approx(0.75)
    # the logging policy's value is the mean logged reward
    assert ev.logging.value == pytest.approx(4 / 6)
    assert (t.ci_low <= t.value).all() and (t.value <= t.ci_high).all()
    assert (t.n == 6).all()
    # Kish ESS of always_1's weights: 8^2 / 24
    assert ips.ess == pytest.approx(64 / 24)


def test_values_match_direct_estimator_calls():
    env = ope.simulate.ContextualBandit(n_actions=5, seed=3)
    table = env.sample(4000, rng=1)
    ev = ope.evaluate(table, estimators=("ips", "clipped_ips", "snips"), max_weight=10.0)
    r = table.column("reward").to_numpy()
    p = table.column("propensity").to_numpy()
    for name in env.candidate_policies:
        pe = table.column(f"target__{name}").to_numpy()
        direct = ope.IPS().estimate(reward=r, logging_propensity=p, target_propensity=pe)
        assert ev[(name, "ips")].value == pytest.approx(direct.value, rel=1e-12)
        assert ev[(name, "ips")].std_error == pytest.approx(direct.std_error, rel=1e-10)
        clipped = ope.ClippedIPS(max_weight=10.0).estimate(
            reward=r, logging_propensity=p, target_propensity=pe
        )
        assert ev[(name, "clipped_ips")].value == pytest.approx(clipped.value, rel=1e-12)


def test_paired_comparison_uses_same_rows():
    env = ope.simulate.ContextualBandit(n_actions=4, seed=5)
    table = env.sample(5000, rng=2)
    ev = ope.evaluate(table, estimators=("ips",))
    name = env.candidate_policies[0]
    d = ev.compare(name, "logging", estimator="ips")
    assert d.value == pytest.approx(ev[(name, "ips")].value - ev.logging.value, rel=1e-12)
    # paired standard error from the difference of per-row terms
    r = table.column("reward").to_numpy()
    w = table.column(f"target__{name}").to_numpy() / table.column("propensity").to_numpy()
    diff = w * r - r
    assert d.std_error == pytest.approx(diff.std(ddof=1) / np.sqrt(len(r)), rel=1e-9)
    comp = ev.comparisons()
    assert set(comp.columns) >= {"policy", "difference", "ci_low", "ci_high", "better_than_logging"}
    assert len(comp) == len(env.candidate_policies)


def test_streaming_equals_eager(tmp_path):
    env = ope.simulate.ContextualBandit(n_actions=6, seed=11)
    table = env.sample(30_000, rng=4)
    import pyarrow.parquet as pq

    path = tmp_path / "logs.parquet"
    pq.write_table(table, path, row_group_size=7_000)
    kwargs = dict(
        estimators=("ips", "clipped_ips", "snips"),
        max_weight=20.0,
        reward_range=(0.0, 1.0),
    )
    for ci in ("normal", "t", "hoeffding", "bernstein"):
        if ci in ("hoeffding", "bernstein"):
            kwargs_ci = dict(kwargs, estimators=("clipped_ips",))
        else:
            kwargs_ci = kwargs
        eager = ope.evaluate(path, ci=ci, **kwargs_ci).table()
        lazy = ope.evaluate(ope.scan_logs(path, batch_size=5_000), ci=ci, **kwargs_ci)
        assert lazy.streaming
        cols = ["value", "std_error", "ci_low", "ci_high", "ess"]
        np.testing.assert_allclose(
            lazy.table()[cols].to_numpy(), eager[cols].to_numpy(), rtol=1e-10
        )


def test_streaming_refuses_row_estimators(tmp_path):
    env = ope.simulate.ContextualBandit(n_actions=3, seed=1)
    import pyarrow.parquet as pq

    path = tmp_path / "logs.parquet"
    pq.write_table(env.sample(500, rng=0), path)
    with pytest.raises(ope.EstimationError, match="cannot run over a lazy scan"):
        ope.evaluate(ope.scan_logs(path), estimators=("dr",))


def test_dr_with_reward_model_is_close_to_truth():
    env = ope.simulate.ContextualBandit(n_actions=4, seed=7)
    table = env.sample(20_000, rng=3)
    from ope.policies import UniformPolicy

    actions = list(range(4))
    ev = ope.evaluate(
        table,
        {"uniform": UniformPolicy(actions=actions)},
        estimators=("dm", "ips", "dr"),
        rng=0,
    )
    truth = env.true_value(np.full((len(env.context_probabilities), 4), 0.25))
    dr = ev[("uniform", "dr")]
    assert abs(dr.value - truth) < 4 * dr.std_error + 1e-3
    ips = ev[("uniform", "ips")]
    assert abs(ips.value - truth) < 4 * ips.std_error


def test_bounded_interval_without_range_refuses():
    with pytest.raises(MissingBoundsError, match="reward_range"):
        ope.evaluate(_hand_logs(), estimators=("ips",), ci="betting")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"estimators": ("ipss",)}, ValueError, "unknown estimator 'ipss'"),
        ({"estimators": ("clipped_ips",)}, ValueError, "needs its setting `max_weight`"),
        (
            {"estimators": ("ips",), "max_weight": 5.0},
            ValueError,
            "`max_weight` is a setting of clipped_ips",
        ),
        ({"estimators": ("ips", "ips")}, ValueError, "listed twice"),
        ({"estimators": ()}, ValueError, "is empty"),
        ({"estimators": ("ips",), "n_resamples": 10}, ValueError, "only to ci='bootstrap'"),
    ],
)
def test_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        ope.evaluate(_hand_logs(), **kwargs)


def test_no_candidates_is_an_error():
    df = _hand_logs().drop(columns=["target__always_1", "target__half"])
    with pytest.raises(PolicyError, match="no candidate policies"):
        ope.evaluate(df, estimators=("ips",))


def test_to_dict_is_json_ready():
    import json

    ev = ope.evaluate(_hand_logs(), estimators=("ips", "snips"), reward_range=(0.0, 1.0))
    doc = json.loads(json.dumps(ev.to_dict()))
    assert doc["validation"]["rows_used"] == 6
    assert len(doc["estimates"]) == 4
    assert {"policy", "estimator", "value", "ci_low", "ci_high", "n", "ess"} <= set(
        doc["estimates"][0]
    )
    assert len(doc["comparisons_with_logging"]) == 4
    text = ev.summary(truth={"always_1": 1.0})
    assert "always_1" in text and "truth" in text
    assert "<table" in ev._repr_html_()


def test_dropped_rows_are_counted_on_the_evaluation():
    df = _hand_logs()
    df.loc[2, "propensity"] = 0.0
    with pytest.warns(ope.DroppedRowsWarning):
        logs = ope.read_logs(df, on_invalid="drop")
    ev = ope.evaluate(logs, estimators=("ips",))
    assert ev.report.rows_rejected == 1
    assert ev.logging.n == 5
    assert any("rejected" in n for n in ev.notes)


def _factored_logs(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, float]:
    """Two randomized stages: retrieval picks a group, ranking an item in it.

    The candidate changes only the ranking factor; its exact value is
    sum_g q1(g) sum_a q2*(a|g) mu(g, a).
    """
    q1 = np.array([0.7, 0.3])  # retrieval: P(group)
    q2 = np.array([[0.8, 0.2], [0.5, 0.5]])  # ranking: P(item | group), logged
    q2_new = np.array([[0.1, 0.9], [0.6, 0.4]])  # ranking under the candidate
    mu = np.array([[0.2, 0.6], [0.4, 0.3]])
    g = (rng.random(n) < q1[1]).astype(int)
    a = (rng.random(n) < q2[g, 1]).astype(int)
    r = (rng.random(n) < mu[g, a]).astype(float)
    df = pd.DataFrame(
        {
            "action": 2 * g + a,
            "propensity": q1[g] * q2[g, a],
            "propensity__retrieval": q1[g],
            "propensity__ranking": q2[g, a],
            "reward": r,
            "target__new_ranker__ranking": q2_new[g, a],
        }
    )
    truth = float((q1[:, None] * q2_new * mu).sum())
    return df, truth


def test_markov_factor_replacement_in_evaluate():
    rng = np.random.default_rng(0)
    df, truth = _factored_logs(400, rng)
    ev = ope.evaluate(df, estimators=("ips", "snips"))
    assert ev.policies == ["new_ranker"]
    # the weight is the ranking ratio only: the retrieval factor cancels
    w = df["target__new_ranker__ranking"] / df["propensity__ranking"]
    assert ev[("new_ranker", "ips")].value == pytest.approx(
        float((w * df.reward).mean()), rel=1e-12
    )
    # unbiased over replications
    values = [
        ope.evaluate(_factored_logs(400, rng)[0], estimators=("ips",))[("new_ranker", "ips")].value
        for _ in range(200)
    ]
    se = np.std(values, ddof=1) / np.sqrt(len(values))
    assert abs(np.mean(values) - truth) < 3 * se
    with pytest.raises(ope.EstimationError, match="given by factor"):
        ope.evaluate(df, estimators=("dr",))


@pytest.mark.parametrize("ci", ["bottou", "empirical_likelihood", "betting", "bernstein"])
def test_every_interval_method_renders(ci):
    env = ope.simulate.ContextualBandit(n_actions=4, seed=1)
    table = env.sample(3000, rng=0)
    est = ("clipped_ips",) if ci in ("bottou", "bernstein") else ("ips", "snips")
    kwargs = {"max_weight": 20.0} if ci in ("bottou", "bernstein") else {"weight_bound": 50.0}
    ev = ope.evaluate(table, estimators=est, ci=ci, reward_range=(0.0, 1.0), **kwargs)
    doc = ev.to_dict()
    expected = {"bottou": "bernstein", "empirical_likelihood": "normal"}.get(ci, ci)
    assert doc["logging_policy"]["ci_method"] == expected
    assert doc["logging_policy"]["ci_low"] <= ev.logging.value <= doc["logging_policy"]["ci_high"]
    assert "logging policy" in ev.summary()


def test_one_pass_moment_estimates_equal_estimate_many_and_keep_their_rows():
    # with two or more of ips/clipped_ips/snips, evaluate computes them from one pass of merged
    # moments; the numbers and every row-based method must match estimate_many's estimates
    env = ope.simulate.ContextualBandit(n_actions=5, seed=9)
    table = env.sample(5000, rng=2)
    ev = ope.evaluate(
        table, estimators=("ips", "clipped_ips", "snips"), max_weight=8.0, reward_range=(0.0, 1.0)
    )
    r = table.column("reward").to_numpy()
    p = table.column("propensity").to_numpy()
    pe = np.column_stack([table.column(f"target__{n}").to_numpy() for n in ev.policies])
    for key, est in (
        ("ips", ope.IPS()),
        ("clipped_ips", ope.ClippedIPS(max_weight=8.0)),
        ("snips", ope.SNIPS()),
    ):
        direct = ope.estimate_many(
            est,
            reward=r,
            logging_propensity=p,
            target_propensity=pe,
            reward_range=(0.0, 1.0),
            names=ev.policies,
        )
        for d in direct:
            e = ev[(d.policy, key)]
            assert e.value == pytest.approx(d.value, rel=1e-11, abs=1e-14)
            assert e.std_error == pytest.approx(d.std_error, rel=1e-9)
            assert e.ess == pytest.approx(d.ess, rel=1e-11)
            methods = {"bootstrap": {"rng": 0, "n_resamples": 200}}
            if key != "clipped_ips":
                methods["betting"] = {}
            if key == "clipped_ips":
                methods["bottou"] = {}
            for method, opts in methods.items():
                np.testing.assert_allclose(
                    tuple(e.ci(0.9, method, **opts))[:2],
                    tuple(d.ci(0.9, method, **opts))[:2],
                    rtol=1e-9,
                )
    name = ev.policies[0]
    d = ev.compare(name, "logging", estimator="snips")
    assert np.isfinite(d.std_error) and d.n == 5000


def test_intervals_are_computed_once_and_reused():
    # a bootstrap without a seed must not be redrawn by every table(), summary() or to_dict()
    env = ope.simulate.ContextualBandit(n_actions=4, seed=4)
    ev = ope.evaluate(
        env.sample(2000, rng=1), estimators=("snips",), ci="bootstrap", n_resamples=200
    )
    first = ev.table()[["ci_low", "ci_high"]].to_numpy()
    np.testing.assert_array_equal(ev.table()[["ci_low", "ci_high"]].to_numpy(), first)
    doc = pd.DataFrame(ev.to_dict()["estimates"])
    np.testing.assert_array_equal(doc[["ci_low", "ci_high"]].to_numpy(), first)


def _weighted_logs(n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    p = rng.uniform(0.2, 0.9, n)
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": rng.integers(0, 3, n),
            "propensity": p,
            "reward": rng.binomial(1, 0.4, n).astype(float),
            "x0": rng.normal(size=n),
            "target__a": rng.uniform(0.0, 1.0, n),
            "target__b": rng.uniform(0.0, 1.0, n),
        }
    )


@pytest.mark.parametrize(
    "others",
    [("dr",), ("snips",), ("clipped_ips", "snips"), ("dm", "clipped_ips")],
)
def test_ips_rows_do_not_depend_on_the_other_estimators(others):
    from ope.policies import UniformPolicy

    df = _weighted_logs()
    df["s"] = df["x0"]
    logs = ope.read_logs(df)
    policies = {"uniform": UniformPolicy(actions=[0, 1, 2]), "pair": UniformPolicy(actions=[0, 1])}
    extra = {"max_weight": 5.0} if "clipped_ips" in others else {}
    with _no_check():
        alone = ope.evaluate(logs, policies, estimators=("ips",), rng=0).table()
        mixed = ope.evaluate(logs, policies, estimators=("ips", *others), rng=0, **extra).table()
    mixed = mixed[mixed.estimator == "ips"].reset_index(drop=True)
    for col in ("value", "std_error", "ci_low", "ci_high", "ess"):
        assert alone[col].tolist() == mixed[col].tolist()  # exact, not approximate


def _no_check():
    import contextlib
    import warnings

    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ci": "bogus"}, "`ci` must be one of"),
        ({"confidence_level": 1.5}, r"`confidence_level` must be in \(0, 1\)"),
        ({"confidence_level": "high"}, "`confidence_level` must be a number"),
        ({"reward_range": (1.0, 0.0)}, "low < high"),
        ({"reward_range": "01"}, "must be a pair"),
        ({"weight_bound": -1.0}, "`weight_bound` must be a positive finite number"),
        ({"rng": "seed"}, "rng must be an int seed"),
        ({"n_resamples": 10}, "applies only to ci='bootstrap'"),
        ({"ci": "bootstrap", "n_resamples": 0}, "`n_resamples` must be a positive integer"),
        ({"estimators": ()}, "`estimators` is empty"),
        ({"estimators": ("ips", "ips")}, "listed twice"),
        ({"estimators": (object(),)}, "estimators must be names"),
    ],
)
def test_bad_arguments_are_parameter_errors_before_any_row_is_read(kwargs, match):
    from ope.exceptions import ParameterError

    with pytest.raises(ParameterError, match=match):
        ope.evaluate("/nonexistent/logs.parquet", **kwargs)


def test_evaluation_follows_the_result_contract():
    from ope.results import Result

    df = _weighted_logs(200).rename(columns={"target__a": "target__<b>a&b</b>"})
    with _no_check():
        ev = ope.evaluate(df, estimators=("ips", "snips"))
    assert isinstance(ev, Result)
    assert isinstance(ev.notes, tuple) and ev.n == 200
    html = ev._repr_html_()
    assert "&lt;b&gt;a&amp;b&lt;/b&gt;" in html and "<b>a&b</b>" not in html
    assert ev.to_dict()["estimates"][0]["policy"] == "<b>a&b</b>"


def test_scan_and_eager_give_the_same_moment_estimates():
    df = _weighted_logs(3000)
    with _no_check():
        eager = ope.evaluate(df, estimators=("ips", "snips")).table()
        streamed = ope.evaluate(
            ope.scan_logs(df, batch_size=700), estimators=("ips", "snips")
        ).table()
    np.testing.assert_allclose(streamed["value"], eager["value"], rtol=1e-12)
    np.testing.assert_allclose(streamed["std_error"], eager["std_error"], rtol=1e-10)


def test_resolve_estimators_takes_settings_from_the_estimator_fields():
    from ope.evaluation import resolve_estimators
    from ope.exceptions import ParameterError

    assert [k for k, _ in resolve_estimators(("switch_dr", "ips"), tau=2.0)] == ["switch_dr", "ips"]
    with pytest.raises(
        ParameterError,
        match=r"`tau` is a setting of switch_dr, which `estimators` \(ips\) does not include",
    ):
        resolve_estimators(("ips",), tau=2.0)


def test_model_estimators_without_context_features_are_refused():
    # a DM/DR request on logs with no numeric feature column is a schema problem (it raised a
    # NameError before SchemaError was imported in ope.evaluation)
    rng = np.random.default_rng(0)
    n = 50
    df = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": rng.integers(0, 2, n),
            "propensity": np.full(n, 0.5),
            "reward": rng.binomial(1, 0.5, n).astype(float),
        }
    )
    with pytest.raises(ope.SchemaError, match=r"need context features for the reward model"):
        ope.evaluate(
            ope.read_logs(df), {"u": ope.UniformPolicy(actions=[0, 1])}, estimators=("dr",)
        )


def test_subclasses_of_ope_estimators_are_accepted_under_their_registry_name():
    class MyIPS(ope.IPS):
        pass

    rng = np.random.default_rng(1)
    n = 200
    df = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": rng.integers(0, 2, n),
            "propensity": np.full(n, 0.5),
            "reward": rng.binomial(1, 0.5, n).astype(float),
            "target__a": np.full(n, 0.5),
        }
    )
    logs = ope.read_logs(df)
    mine = ope.evaluate(logs, estimators=(MyIPS(),)).table()
    theirs = ope.evaluate(logs, estimators=("ips",)).table()
    assert list(mine.estimator) == ["ips"]
    assert mine.value.iloc[0] == theirs.value.iloc[0]


def test_rewards_are_checked_against_the_range_once_per_evaluate(monkeypatch):
    # ips + snips + dr: the rewards are scanned against reward_range once, not per estimator
    import ope._validation as validation
    import ope.estimators as estimators_module
    import ope.evaluation._driver as evaluation_module

    calls = []
    real = validation.check_rewards_in_range

    def counting(reward, reward_range, name="reward"):
        if reward_range is not None:
            calls.append(len(reward))
        return real(reward, reward_range, name)

    monkeypatch.setattr(evaluation_module, "check_rewards_in_range", counting)
    monkeypatch.setattr(estimators_module, "check_rewards_in_range", counting)
    rng = np.random.default_rng(3)
    n = 2000
    df = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": rng.integers(0, 2, n),
            "propensity": np.full(n, 0.5),
            "reward": rng.binomial(1, 0.5, n).astype(float),
            "x": rng.normal(size=n),
        }
    )
    logs = ope.read_logs(df)
    pols = {"u": ope.UniformPolicy(actions=[0, 1])}
    ope.evaluate(logs, pols, estimators=("ips", "snips", "dr"), reward_range=(0, 1), rng=0)
    assert calls == [n]
    with pytest.raises(ope.ValidationError, match=r"outside reward_range"):
        ope.evaluate(logs, pols, estimators=("dr",), reward_range=(0.5, 1), rng=0)


@pytest.mark.parametrize("method", ["normal", "t"])
def test_comparisons_from_the_passes_cross_moments_equal_the_row_pairing(method):
    # IPS, clipped IPS and SNIPS against the logging value: the paired standard errors come
    # from the kernel's cross-moments, with no per-row terms; they equal compare() on the rows
    env = ope.simulate.ContextualBandit(n_actions=4, seed=5)
    table = env.sample(4000, rng=3)
    with _no_warning_check():
        ev = ope.evaluate(
            table,
            estimators=("ips", "clipped_ips", "snips"),
            max_weight=2.0,
            reward_range=(0.0, 1.0),
        )
    assert ev.statistics is not None and ev.statistics.n == 4000
    comp = ev.comparisons(ci=method).set_index(["policy", "estimator"])
    for name in ev.policies:
        for key in ("ips", "clipped_ips", "snips"):
            d = ope.results.compare(ev[(name, key)], ev.logging, ci=method)
            ci = d.ci(ev.confidence_level, method)
            row = comp.loc[(name, key)]
            assert row.difference == pytest.approx(d.value, rel=1e-12, abs=1e-15)
            assert row.std_error == pytest.approx(d.std_error, rel=1e-10)
            assert row.ci_low == pytest.approx(ci.low, rel=1e-10, abs=1e-14)
            assert row.ci_high == pytest.approx(ci.high, rel=1e-10, abs=1e-14)


def _no_warning_check():
    import contextlib
    import warnings

    @contextlib.contextmanager
    def quiet():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield

    return quiet()


def test_evaluate_reads_the_target_columns_without_an_n_by_p_copy(monkeypatch):
    # validated logs: the candidates' columns go to the kernel as they are, so the (n, P)
    # target matrix of ope.policies is never built
    import ope.policies.join as join

    def refuse(*args, **kwargs):
        raise AssertionError("the (n, P) target matrix was built")

    monkeypatch.setattr(join, "_target_matrix", refuse)
    logs = ope.read_logs(_hand_logs())
    ev = ope.evaluate(logs, estimators=("ips", "snips"))
    assert ev[("always_1", "ips")].value == pytest.approx((2 * 0 + 4 * 1 + 2 * 1) / 6)
    assert ev[("half", "snips")].value == pytest.approx(
        np.sum(0.5 / _hand_logs().propensity * _hand_logs().reward)
        / np.sum(0.5 / _hand_logs().propensity)
    )


def test_diagnose_reuses_the_evaluations_statistics():
    env = ope.simulate.ContextualBandit(n_actions=4, seed=7)
    logs = ope.read_logs(env.sample(3000, rng=1))
    with _no_warning_check():
        ev = ope.evaluate(logs, estimators=("ips", "clipped_ips"), max_weight=3.0)
        fresh = ope.diagnose(logs, max_weight=3.0).table()
        reused = ope.diagnose(logs, max_weight=3.0, statistics=ev.statistics).table()
    pd.testing.assert_frame_equal(reused, fresh, rtol=1e-12)
    with _no_warning_check(), pytest.raises(ope.ParameterError, match=r"`statistics` describe"):
        ope.diagnose(logs, max_weight=2.0, statistics=ev.statistics)


def _bandit_with_model() -> tuple[object, dict]:
    from ope.policies import UniformPolicy

    env = ope.simulate.ContextualBandit(n_actions=4, seed=7)
    return env.sample(2_000, rng=3), {"uniform": UniformPolicy(actions=list(range(4)))}


def test_bootstrap_intervals_come_from_one_shared_call_and_equal_each_estimates_own(monkeypatch):
    import ope.intervals.bootstrap as boot

    table, pol = _bandit_with_model()
    calls = []
    real = boot.shared_bootstrap
    monkeypatch.setattr(boot, "shared_bootstrap", lambda *a, **k: calls.append(1) or real(*a, **k))
    ev = ope.evaluate(
        table,
        pol,
        estimators=("ips", "snips", "clipped_ips", "dr", "dm"),
        max_weight=5.0,
        ci="bootstrap",
        n_resamples=300,
        rng=11,
    )
    assert calls == [1]
    for (p, e), est in ev.estimates.items():
        low, high = ev.table().set_index(["policy", "estimator"]).loc[(p, e), ["ci_low", "ci_high"]]
        own = est.ci(method="bootstrap", rng=11, n_resamples=300)
        if e == "dm":  # DM has no interval
            assert np.isnan(low) and np.isnan(high)
            continue
        np.testing.assert_allclose([low, high], [own.low, own.high], rtol=1e-12, atol=1e-12)
    own = ev.logging.ci(method="bootstrap", rng=11, n_resamples=300)
    d = ev.to_dict()["logging_policy"]
    np.testing.assert_allclose([d["ci_low"], d["ci_high"]], [own.low, own.high], rtol=1e-12)


def test_a_drawn_seed_is_recorded_and_reproduces_the_evaluation():
    import dataclasses

    table, pol = _bandit_with_model()
    kwargs = dict(estimators=("ips", "dr"), ci="bootstrap", n_resamples=200)
    ev = ope.evaluate(table, pol, rng=None, **kwargs)
    seed = ev.provenance.seed
    assert isinstance(seed, int)
    again = ope.evaluate(table, pol, rng=seed, **kwargs)
    cols = ["value", "ci_low", "ci_high"]
    np.testing.assert_allclose(
        again.table()[cols].to_numpy(float),
        ev.table()[cols].to_numpy(float),
        rtol=1e-12,
        atol=1e-12,
    )
    assert ev.provenance.options["ci"] == "bootstrap"
    assert ev.to_dict()["provenance"]["seed"] == seed
    assert f"seed:    {seed}" in ev.summary()
    assert dataclasses.replace(ev, notes=()).provenance == ev.provenance
    # a Generator is used as is and recorded as None
    assert ope.evaluate(table, pol, rng=np.random.default_rng(0), **kwargs).provenance.seed is None


def test_summary_numbers_each_estimate_note_once_and_plots(tmp_path):
    ev = ope.evaluate(_hand_logs(), estimators=("ips", "snips"))
    notes, refs = ev.numbered_notes()
    assert len(refs) == len(ev.table())
    text = ev.summary()
    for i, note in enumerate(notes, 1):
        assert f"[{i}]" in text
    assert len(set(notes)) == len(notes)
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ax = ev.plot()
    assert len(ax.get_yticklabels()) or len(ax.get_xticklabels())


# the planted policy 'a' has a mean weight 5 standard errors above 1 (an overlap warning); this
# test is about which interval each estimator gets
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_ci_fallback_gives_the_estimators_the_method_does_not_apply_to_its_interval():
    df = _weighted_logs()
    kwargs = dict(
        estimators=("ips", "snips", "clipped_ips"),
        max_weight=5.0,
        ci="bottou",
        reward_range=(0.0, 1.0),
    )
    with pytest.raises(ope.EstimationError):
        ope.evaluate(df, **kwargs)
    ev = ope.evaluate(df, ci_fallback="normal", **kwargs)
    t = ev.table().set_index(["policy", "estimator"])
    assert set(t.xs("clipped_ips", level="estimator").ci_method) == {"bottou"}
    assert set(t.xs("ips", level="estimator").ci_method) == {"normal"}
    normal = ope.evaluate(df, ci="normal", **{k: v for k, v in kwargs.items() if k != "ci"})
    n = normal.table().set_index(["policy", "estimator"])
    for key in [("a", "ips"), ("b", "snips")]:
        np.testing.assert_allclose(
            t.loc[key, ["ci_low", "ci_high"]].to_numpy(float),
            n.loc[key, ["ci_low", "ci_high"]].to_numpy(float),
            rtol=1e-12,
        )
    assert ev.fallback_estimators == ["ips", "snips"]
    assert "ci='bottou' does not apply to ips, snips: their intervals are normal" in ev.notes
    with pytest.raises(ope.ParameterError, match="ci_fallback"):
        ope.evaluate(df, ci_fallback="bootstrap", **kwargs)


def test_each_policys_weight_note_stays_its_own_in_the_summary():
    # two candidates whose weights each fail the mean-weight check (and the ESS rule) with
    # different numbers: the summary numbered one note for both, so one candidate's rows cited
    # the other's numbers
    g = np.random.default_rng(0)
    n = 4000
    a = g.integers(0, 2, n)
    w_a = np.where(g.random(n) < 0.02, 40.0, 0.2)  # mean 0.996, heavy: low ESS
    frame = pd.DataFrame(
        {
            "action": a,
            "propensity": 0.5,
            "reward": g.binomial(1, 0.4, n).astype(float),
            "target__a": np.full(n, 0.45),  # weight 0.9 everywhere
            "target__b": np.full(n, 0.3),  # weight 0.6 everywhere
            "target__c": np.clip(w_a * 0.5 / 40.0, 0.0, 1.0),
            "target__d": np.clip(np.where(g.random(n) < 0.01, 40.0, 0.3) * 0.5 / 40.0, 0, 1),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(frame, estimators=("ips", "snips"))
    text = ev.summary()
    notes = {}  # reference -> text
    for line in text.splitlines():
        m = re.match(r"\s+\[(\d+)\] (.*)", line)
        if m:
            notes[m.group(1)] = m.group(2)
    for policy in ("a", "b", "c", "d"):
        own = {str(x).split(":")[0][:40] for x in ev[policy, "ips"].notes}
        row = next(x for x in text.splitlines() if x.split()[:2] == [policy, "ips"])
        refs = re.findall(r"\d+", row.split("[")[-1]) if "[" in row else []
        assert refs, row
        for ref in refs:  # every note a row cites is one of that estimate's own notes
            assert notes[ref][:40] in own, (policy, notes[ref], own)


def test_evaluate_warnings_point_at_the_callers_line():
    # re-emitted once each after the run: they pointed at ope/evaluation/auto.py
    g = np.random.default_rng(0)
    n = 2000
    frame = pd.DataFrame(
        {
            "action": g.integers(0, 2, n),
            "propensity": 0.5,
            "reward": g.binomial(1, 0.4, n).astype(float),
            "target__b": np.full(n, 0.3),
        }
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ope.evaluate(frame, estimators=("ips",))
    assert caught and {w.filename for w in caught} == {__file__}


def test_a_bound_the_logging_values_interval_needs_names_the_method_asked_for():
    # bottou applies to no estimator asked for (ips, snips fall back): only the logging value
    # needs the range, through bernstein, bottou's counterpart for a mean. The error names
    # bottou, the method given, not bernstein, which the user never asked for
    with pytest.raises(MissingBoundsError) as info:
        ope.evaluate(_hand_logs(), estimators=("ips", "snips"), ci="bottou", ci_fallback="normal")
    message = str(info.value)
    assert message.startswith("ci='bottou' needs the a priori range of the rewards")
    assert "the counterpart of 'bottou' for a mean" in message
    assert "interval method 'bernstein' needs" not in message
    assert "reward_range=(low, high)" in message
    # and before any row is read: the plan refuses it, as it does a bound an estimator needs
    from ope.evaluation import EvaluationPlan

    with pytest.raises(MissingBoundsError, match="the counterpart of 'bottou' for a mean"):
        EvaluationPlan.build(estimators=("ips", "snips"), ci="bottou", ci_fallback="normal")
