"""Marginal weights with p(e|a) estimated from the logs' observed embeddings
(ActionEmbedding(estimated=...)): cross-fitted, smoothed item frequencies."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ope
from ope.cli import EXIT_OK, EXIT_USAGE, main
from ope.exceptions import EstimationError, ParameterError, SchemaError
from ope.marginal import ActionEmbedding, marginal_propensities
from ope.simulate import CatalogBandit


def _logs(n=240, k=5, seed=0):
    """Every row offers all k items; an observed embedding e drawn from p(e|a)."""
    rng = np.random.default_rng(seed)
    pi0 = rng.dirichlet(np.ones(k), n)
    pi1 = rng.dirichlet(np.ones(k), n)
    a = (pi0.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    p_e = rng.dirichlet(np.ones(3), k)  # p(e | a) over 3 values
    e = (p_e[a].cumsum(1) > rng.random(n)[:, None]).argmax(1)
    cand = np.tile(np.arange(k), (n, 1))
    table = pa.table(
        {
            "action": a,
            "propensity": pi0[np.arange(n), a],
            "reward": rng.binomial(1, 0.2 + 0.2 * e).astype(float),
            "e": np.array(["u", "v", "w"])[e],
            "candidates": list(cand),
            "logging_distribution": list(pi0),
            "target__new": pi1[np.arange(n), a],
            "target_dist__new": list(pi1),
        }
    )
    return ope.read_logs(table), pi0, pi1, a, e


def _by_hand(pi, a, e, fold, s, k, n_values=3):
    """Σ_a' π(a'|x_i) p̂_{-k(i)}(e_i | a') with the counts of the other folds, row by row."""
    n = a.size
    out = np.empty(n)
    for i in range(n):  # a loop over rows: the reference
        other = fold != fold[i]
        n_out = other.sum()
        f = ((e[other] == e[i]).sum() + 1.0) / (n_out + n_values)
        total = 0.0
        for item in range(k):
            c_a = (other & (a == item)).sum()
            c_av = (other & (a == item) & (e == e[i])).sum()
            total += pi[i, item] * (c_av + s * f) / (c_a + s)
        out[i] = total
    return out


@pytest.mark.parametrize("smoothing", [1.0, 0.0, 7.5])
def test_estimated_marginals_equal_the_cross_fitted_frequencies_by_hand(smoothing):
    logs, pi0, pi1, a, e = _logs()
    emb = ActionEmbedding(estimated="e", smoothing=smoothing, n_folds=4, rng=3)
    m = marginal_propensities(logs, emb)
    from ope._validation import fold_assignment, resolve_seed

    fold = fold_assignment(a.size, 4, resolve_seed(3)[1])
    np.testing.assert_allclose(m.logging, _by_hand(pi0, a, e, fold, smoothing, 5), rtol=1e-12)
    np.testing.assert_allclose(m.values[:, 0], _by_hand(pi1, a, e, fold, smoothing, 5), rtol=1e-12)
    assert emb.kind == "estimated" and emb.observed and emb.names == ("e",)
    assert "estimated" in emb.describe()


def test_a_row_never_sees_its_own_embedding():
    """Changing one row's observed value changes the weights of other folds' rows only."""
    logs, *_ = _logs(seed=1)
    emb = ActionEmbedding(estimated="e", n_folds=3, rng=0)
    before = marginal_propensities(logs, emb).logging
    table = logs.table
    values = table.column("e").to_pylist()
    values[0] = {"u": "v", "v": "w", "w": "u"}[values[0]]
    changed = ope.read_logs(table.set_column(table.column_names.index("e"), "e", pa.array(values)))
    after = marginal_propensities(changed, emb).logging
    from ope._validation import fold_assignment, resolve_seed

    fold = fold_assignment(logs.n, 3, resolve_seed(0)[1])
    same_fold = fold == fold[0]
    same_fold[0] = False
    # rows of row 0's fold do not use its value; row 0 itself changes through its own value
    np.testing.assert_array_equal(after[same_fold], before[same_fold])
    assert not np.allclose(
        after[~same_fold & (np.arange(logs.n) > 0)], before[~same_fold & (np.arange(logs.n) > 0)]
    )


def test_estimated_weights_approach_the_known_ones():
    """On a catalog with a known stochastic p(e|a), MIPS with the estimated p(e|a) is close to
    MIPS with the known one at a large n (the estimation error shrinks with the rows per
    item)."""
    env = CatalogBandit(
        n_items=60,
        n_candidates=12,
        n_requests=40,
        n_categories=3,
        n_candidate_clusters=4,
        seed=0,
        stochastic_embeddings=True,
    )
    items = env.action_features().select(["action", "cluster"])
    logs = ope.read_logs(env.sample(60_000, rng=2)).with_action_features(items)
    columns = list(env.embedding_distribution())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        known = ope.evaluate(
            logs,
            estimators=("mips",),
            embedding=ActionEmbedding(distribution=env.embedding_distribution()),
        )
        est = ope.evaluate(
            logs, estimators=("mips",), embedding=ActionEmbedding(estimated=columns, rng=1)
        )
    for p in env.candidate_policies:
        k, e = known[(p, "mips")], est[(p, "mips")]
        assert abs(e.value - k.value) < 2 * k.std_error
    assert any("estimated" in n and "leave out" in n for n in est.notes)


def test_estimated_embedding_arguments_and_scans_are_checked(tmp_path):
    with pytest.raises(ParameterError, match="exactly one"):
        ActionEmbedding(estimated="e", clusters="c")
    with pytest.raises(ParameterError, match="smoothing"):
        ActionEmbedding(estimated="e", smoothing=-1.0)
    with pytest.raises(ParameterError, match="n_folds"):
        ActionEmbedding(estimated="e", n_folds=1)
    logs, *_ = _logs()
    with pytest.raises(SchemaError, match="no column 'f'"):
        marginal_propensities(logs, ActionEmbedding(estimated="f"))
    path = tmp_path / "logs.parquet"
    pq.write_table(logs.table, path)
    # cross-fitted over every row: not from merged statistics of batches
    with pytest.raises(EstimationError, match="mips"):
        ope.evaluate(
            ope.scan_logs(path), estimators=("mips",), embedding=ActionEmbedding(estimated="e")
        )


# skewed planted rows: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings("ignore:.*likely too short:ope.exceptions.SmallSampleWarning")
def test_estimated_embedding_from_the_command_line(tmp_path, capsys):
    logs, *_ = _logs(n=400)
    path = tmp_path / "logs.parquet"
    pq.write_table(logs.table, path)
    argv = ["evaluate", str(path), "--estimator", "ips", "mips", "--estimated-embedding", "e"]
    assert main([*argv, "--seed", "3", "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["policy"], r["estimator"]): r["value"] for r in doc["estimates"]}
    api = ope.evaluate(
        logs, estimators=("ips", "mips"), embedding=ActionEmbedding(estimated="e", rng=3)
    )
    assert rows[("new", "mips")] == pytest.approx(api[("new", "mips")].value, rel=1e-12)
    assert main([*argv, "--cluster-column", "c", "--json"]) == EXIT_USAGE
    doc = json.loads(capsys.readouterr().out)
    assert "--estimated-embedding" in doc["error"]["message"]
