"""Sampling weights reach the reward models and the embedding test.

Rows kept with probability ``1 / s_i`` carry the sampling weight ``s_i``: the reward model of DM
and the DR family is fitted with them (integer weights fit as the rows repeated ``s_i`` times
would), the column that holds them is never one of its context columns, and the embedding test
of the marginalized estimators is the difference of the weighted IPS and MIPS.

Tolerances: a model fitted once on all rows (``RewardModel(cross_fit=False)``, the default
Ridge solved in closed form) gives the values of the repeated rows to ``EXACT`` (float64
rounding of sums over a few thousand rows). Cross-fitted models split the repeated rows into
other folds than the weighted ones, so their values agree to ``FOLDS`` only; the unweighted fit
misses them by more than ten times that.
"""

from __future__ import annotations

import io
import json
import warnings
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtr
from sklearn.linear_model import Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import ope
from ope.context import context_column_choice
from ope.exceptions import ParameterError
from ope.marginal import MarginalPropensities
from ope.reward_models import RewardModel, TwoStepRewardModel

#: weighted and repeated rows under a model fitted once on every row
EXACT = 1e-10
#: weighted and repeated rows under cross-fitted models (different folds)
FOLDS = 0.01

MODEL_ESTIMATORS = ["dm", "dr", "sndr", "switch_dr", "dros"]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore", ope.OPEWarning)


def _thinned(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    """Bandit logs whose segment ``seg`` (a string column, unseen by the reward model) decides
    the best action; segment A is kept at rate 1/5 (weight 5), segment B always (weight 1)."""
    rng = np.random.default_rng(seed)
    seg = rng.random(n) < 0.5
    a = rng.integers(0, 3, n)
    mu = np.where(seg[:, None], [1.0, 0.2, 0.0], [0.0, 0.3, 0.9])
    r = (rng.random(n) < mu[np.arange(n), a]).astype(float)
    pe = np.array([0.8, 0.1, 0.1])
    df = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": a,
            "propensity": 1 / 3,
            "reward": r,
            "x": rng.normal(size=n),
            "seg": np.where(seg, "A", "B"),
            "candidates": [[0, 1, 2]] * n,
            "logging_distribution": [[1 / 3] * 3] * n,
            "target__pi": pe[a],
            "target_dist__pi": [list(pe)] * n,
            "weight": np.where(seg, 5.0, 1.0),
        }
    )
    return df[rng.random(n) < 1 / df["weight"]].reset_index(drop=True)


def _repeated(df: pd.DataFrame, column: str = "weight") -> pd.DataFrame:
    """Each row repeated ``df[column]`` times, without the weight column."""
    out = df.loc[df.index.repeat(df[column].astype(int))].drop(columns=column)
    out = out.reset_index(drop=True)
    out["event_id"] = np.arange(len(out))
    return out


def _values(df: pd.DataFrame, **options) -> np.ndarray:
    table = ope.evaluate(df, estimators=MODEL_ESTIMATORS, tau=1.0, shrinkage=1.0, **options)
    return table.table().value.to_numpy()


def _arrays(n: int = 3000, seed: int = 1):
    """Context, action, reward and integer sampling weights with a hidden segment."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, 4, n)
    seg = rng.random(n) < 0.5
    r = np.where(seg, a == 1, a == 3) + 0.5 * x[:, 0] * (a == 2) + 0.1 * rng.normal(size=n)
    s = np.where(seg, 4.0, 1.0)
    return x, a, r.astype(float), s


# ----------------------------------------------------------------- the reward model's fit
@pytest.mark.parametrize(
    "model",
    [
        RewardModel(cross_fit=False),
        RewardModel(cross_fit=False, sparse=False),
        RewardModel(make_pipeline(StandardScaler(), Ridge()), cross_fit=False, sparse=False),
    ],
    ids=["ridge-sparse", "ridge-dense", "pipeline"],
)
def test_a_weighted_fit_is_the_fit_of_the_rows_repeated(model) -> None:
    x, a, r, s = _arrays()
    repeat = np.repeat(np.arange(s.size), s.astype(int))
    weighted = model.fit(x, a, r, sample_weight=s)
    repeated = model.fit(x[repeat], a[repeat], r[repeat])
    grid = np.repeat(np.linspace(-2, 2, 5), 2).reshape(-1, 2)
    for action in range(4):
        codes = np.full(grid.shape[0], action)
        assert np.allclose(
            weighted.predict(grid, codes), repeated.predict(grid, codes), rtol=0, atol=EXACT
        )
    unweighted = model.fit(x, a, r)
    assert not np.allclose(
        unweighted.predict(grid, codes), repeated.predict(grid, codes), atol=0.05
    )


def test_equal_weights_are_the_unweighted_fit_exactly() -> None:
    x, a, r, _ = _arrays()
    plain = RewardModel(rng=0).fit(x, a, r)
    equal = RewardModel(rng=0).fit(x, a, r, sample_weight=np.full(r.size, 3.0))
    assert np.array_equal(plain.predict_logged(), equal.predict_logged())
    assert np.array_equal(plain.fold_, equal.fold_)
    # a regressor that takes no weights is fine when they are all equal
    RewardModel(KNeighborsRegressor(), rng=0).fit(x, a, r, sample_weight=np.full(r.size, 2.0))
    two = TwoStepRewardModel(rng=0)
    clusters = np.array([0, 0, 1, 1])
    assert np.array_equal(
        two.fit(x, a, r, clusters=clusters).predict_logged(),
        two.fit(x, a, r, clusters=clusters, sample_weight=np.full(r.size, 3.0)).predict_logged(),
    )


def test_the_weights_do_not_move_the_folds() -> None:
    x, a, r, s = _arrays()
    assert np.array_equal(
        RewardModel(rng=3).fit(x, a, r).fold_,
        RewardModel(rng=3).fit(x, a, r, sample_weight=s).fold_,
    )


@pytest.mark.parametrize(
    ("estimator", "message"),
    [
        (KNeighborsRegressor(), r"KNeighborsRegressor\.fit takes no sample_weight"),
        (
            make_pipeline(StandardScaler(), KNeighborsRegressor()),
            r"Pipeline\.fit takes no sample_weight \(nor does its last step's\)",
        ),
    ],
)
def test_a_regressor_that_cannot_take_the_weights_is_refused(estimator, message) -> None:
    x, a, r, s = _arrays()
    with pytest.raises(ParameterError, match=message + r".*Pass a regressor whose fit takes"):
        RewardModel(estimator, sparse=False).fit(x, a, r, sample_weight=s)
    with pytest.raises(ParameterError, match=message):
        ope.evaluate(_thinned(), estimators=["dm"], reward_model=estimator, rng=0)


def test_the_two_step_model_fits_the_weighted_rows_as_the_repeated_ones() -> None:
    rng = np.random.default_rng(0)
    n = 6000
    x = rng.normal(size=(n, 1))
    a = rng.integers(0, 6, n)
    seg = rng.random(n) < 0.5
    item = np.where(seg[:, None], [0, 1, 0, 0, 0, 1], [1, 0, 0, 1, 0, 0]).astype(float)
    r = item[np.arange(n), a] + 0.3 * x[:, 0] + 0.1 * rng.normal(size=n)
    s = np.where(seg, 5.0, 1.0)
    keep = rng.random(n) < 1 / s
    x, a, r, s = x[keep], a[keep], r[keep], s[keep]
    repeat = np.repeat(np.arange(s.size), s.astype(int))
    clusters = np.array([0, 0, 0, 1, 1, 1])
    model = TwoStepRewardModel(rng=0)
    grid, items = np.zeros((6, 1)), np.arange(6)
    weighted = model.fit(x, a, r, clusters=clusters, sample_weight=s).predict(grid, items)
    repeated = model.fit(x[repeat], a[repeat], r[repeat], clusters=clusters).predict(grid, items)
    unweighted = model.fit(x, a, r, clusters=clusters).predict(grid, items)
    assert np.abs(weighted - repeated).max() < FOLDS
    assert np.abs(unweighted - repeated).max() > 10 * FOLDS


# ------------------------------------------------------------------ DM and the DR family
def test_dm_and_dr_of_weighted_rows_are_those_of_the_rows_repeated() -> None:
    kept = _thinned()
    model = RewardModel(cross_fit=False)
    weighted = _values(kept, reward_model=model, rng=0)
    repeated = _values(_repeated(kept), reward_model=model, rng=0)
    assert np.allclose(weighted, repeated, rtol=0, atol=EXACT)


def test_cross_fitted_dm_and_dr_of_weighted_rows_are_near_the_rows_repeated() -> None:
    kept = _thinned()
    weighted = _values(kept, rng=0)
    repeated = _values(_repeated(kept), rng=0)
    unweighted = _values(kept.drop(columns="weight"), rng=0)
    assert np.abs(weighted - repeated).max() < FOLDS
    assert np.abs(unweighted[0] - repeated[0]) > 10 * FOLDS  # DM: the kept rows' mix


def test_equal_sampling_weights_give_the_unweighted_numbers() -> None:
    kept = _thinned()
    equal = _values(kept.assign(weight=3.0), rng=0)  # every estimate is sum 3 A / sum 3
    assert np.allclose(equal, _values(kept.drop(columns="weight"), rng=0), rtol=0, atol=1e-12)


def test_segments_refit_the_weighted_model() -> None:
    kept = _thinned().assign(half=lambda d: np.where(d.x > 0, "hi", "lo"))
    model = RewardModel(cross_fit=False)
    tables = [
        ope.evaluate(d, estimators=["dm"], by="half", reward_model=model, rng=0)
        .table(by="segment")
        .sort_values("segment")
        .value.to_numpy()
        for d in (kept, _repeated(kept))
    ]
    assert np.allclose(tables[0], tables[1], rtol=0, atol=EXACT)


def test_dr_outcome_distribution_of_weighted_rows_is_that_of_the_rows_repeated() -> None:
    kept = _thinned()
    model = RewardModel(cross_fit=False)
    found = [
        ope.outcome_distribution(d, estimator="dr", reward_model=model, rng=0)["pi"]
        for d in (kept, _repeated(kept))
    ]
    at = [found[0].cdf_at(0.0), found[1].cdf_at(0.0)]
    assert abs(float(np.ravel(at[0])[0]) - float(np.ravel(at[1])[0])) < EXACT


# ------------------------------------------------------- the weight column is not a context
def test_a_named_weight_column_is_not_a_context_column() -> None:
    kept = _thinned()
    named = kept.rename(columns={"weight": "w"})
    ev = ope.evaluate(named, estimators=["dm", "dr"], weight_column="w", rng=0)
    assert ev.model_columns["context"] == ["x"]
    usual = ope.evaluate(kept, estimators=["dm", "dr"], rng=0)
    assert np.array_equal(ev.table().value.to_numpy(), usual.table().value.to_numpy())


def test_the_weight_column_cannot_be_named_as_context() -> None:
    named = _thinned().rename(columns={"weight": "w"})
    with pytest.raises(ParameterError, match=r"`context_columns` names 'w', the column of"):
        ope.evaluate(named, estimators=["dm"], weight_column="w", context_columns=["x", "w"], rng=0)


def test_the_context_choice_leaves_out_the_weight_column() -> None:
    logs = ope.read_logs(_thinned().rename(columns={"weight": "w"}))
    assert context_column_choice(logs).columns == ["x", "w"]
    choice = context_column_choice(logs, weight_column="w")
    assert choice.columns == ["x"] and "w" in choice.excluded


def test_the_command_line_leaves_out_the_weight_column(tmp_path) -> None:
    from ope.cli import main

    path = tmp_path / "logs.parquet"
    _thinned().rename(columns={"weight": "w"}).to_parquet(path)
    out = io.StringIO()
    argv = ["evaluate", str(path), "--json", "--weight-column", "w", "--estimator", "dm", "dr"]
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = main(argv)
    doc = json.loads(out.getvalue())
    assert code == 0 and doc["weight_column"] == "w"
    assert doc["model_columns"]["context"] == ["x"]


# ------------------------------------------------------------------- the embedding test
def _catalog_logs(weighted: bool = True):
    from ope.simulate import CatalogBandit

    env = CatalogBandit(n_items=200, n_candidates=20, n_requests=100, seed=0)
    df = env.sample(3000, rng=1).to_pandas()
    df["weight"] = np.where(df.x0 > 0, 3.0, 1.0)
    kept = df[np.random.default_rng(5).random(len(df)) < 1 / df.weight].reset_index(drop=True)
    if not weighted:
        kept = kept.drop(columns="weight")
    return ope.read_logs(kept).with_action_features(env.action_features()), kept


def _embedding_run(logs):
    return ope.evaluate(
        logs,
        policies=["greedy", "cluster_shift"],
        estimators=("ips", "mips"),
        embedding=ope.ActionEmbedding(clusters="cluster"),
        rng=0,
    )


def test_the_embedding_test_is_the_weighted_ips_minus_mips() -> None:
    logs, kept = _catalog_logs()
    ev = _embedding_run(logs)
    table = ev.table().set_index(["policy", "estimator"]).value
    assert len(ev.embedding_checks) == 2
    for check in ev.embedding_checks:
        own = table[(check.policy, "ips")] - table[(check.policy, "mips")]
        assert abs(check.difference - own) < 1e-12
        assert check.p_value == pytest.approx(2 * ndtr(-abs(check.difference / check.std_error)))
    diagnosed = ope.diagnose(
        logs, ["greedy", "cluster_shift"], embedding=ope.ActionEmbedding(clusters="cluster")
    )
    assert [c.difference for c in diagnosed.embedding_checks] == pytest.approx(
        [c.difference for c in ev.embedding_checks], abs=1e-12
    )


def test_the_weighted_embedding_test_is_linearized_as_the_weighted_estimates() -> None:
    logs, kept = _catalog_logs()
    mp = ope.marginal_propensities(logs, ope.ActionEmbedding(clusters="cluster"), ["greedy"])
    r = kept.reward.to_numpy()
    p = kept.propensity.to_numpy()
    t = kept.target__greedy.to_numpy()
    s = kept.weight.to_numpy()
    (check,) = ope.embedding_sufficiency(r, p, t[:, None], mp, sampling_weight=s)
    d = (t / p - mp.values[:, 0] / mp.logging) * r
    ones = np.ones_like(d)
    ips = ope.IPS().estimate(d, ones, ones, sampling_weight=s)  # sum s d / sum s, linearized
    assert check.difference == pytest.approx(ips.value, rel=1e-12)
    assert check.std_error == pytest.approx(ips.std_error, rel=1e-12)
    # integer weights: the difference of the rows repeated
    repeat = np.repeat(np.arange(s.size), s.astype(int))
    mp_rep = MarginalPropensities(
        mp.names, mp.logging[repeat], mp.values[repeat], mp.embedding, mp.n_embeddings
    )
    (rep,) = ope.embedding_sufficiency(r[repeat], p[repeat], t[repeat, None], mp_rep)
    assert check.difference == pytest.approx(rep.difference, abs=1e-12)
    # equal weights: the unweighted test, exactly
    (plain,) = ope.embedding_sufficiency(r, p, t[:, None], mp)
    (equal,) = ope.embedding_sufficiency(r, p, t[:, None], mp, sampling_weight=np.full(r.size, 3.0))
    assert plain == equal


def test_the_dr_outcome_distribution_takes_a_renamed_weight_column() -> None:
    """outcome_distribution(estimator="dr", weight_column="w") fits its model with the weights
    in `w` and never on `w` as context, as with a column named `weight` (before, `w` was a
    context column and the model unweighted)."""
    kept = _thinned()
    model = RewardModel(cross_fit=False)
    named = ope.outcome_distribution(kept, estimator="dr", reward_model=model, rng=0)["pi"]
    renamed = ope.outcome_distribution(
        kept.rename(columns={"weight": "w"}),
        estimator="dr",
        reward_model=model,
        weight_column="w",
        rng=0,
    )["pi"]
    assert (
        abs(float(np.ravel(renamed.cdf_at(0.0))[0]) - float(np.ravel(named.cdf_at(0.0))[0])) < EXACT
    )


def test_a_renamed_weight_column_alone_gives_the_reward_model_no_context() -> None:
    """Logs whose only numeric column outside the schema is the sampling weights `w`: the
    default estimators leave DR out with its note, and estimators="auto" compares no model
    estimator (before, `w` counted as a context column there, and the run then failed with
    a SchemaError saying the model had no context)."""
    kept = _thinned().drop(columns=["x"])
    renamed = kept.rename(columns={"weight": "w"})
    ev = ope.evaluate(renamed, weight_column="w")
    assert ev.table()["estimator"].tolist() == ["ips", "snips"]
    assert any("no context column for its reward model" in n for n in ev.notes)
    from ope.evaluation.auto import auto_candidates

    assert auto_candidates(ope.read_logs(renamed), weight_column="w") == ("ips", "snips")
