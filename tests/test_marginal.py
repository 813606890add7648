"""Marginal propensities over action embeddings (ope.marginal) and the marginalized estimators
(MIPS, SNMIPS, MarginalizedDR) in ope.evaluate."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import ope
from ope.exceptions import ParameterError, PolicyError, SchemaError, ValidationError
from ope.marginal import ActionEmbedding, embedding_sufficiency, marginal_propensities


def _dense_logs(n=400, k=6, seed=0, clusters=(0, 0, 1, 1, 2, 2)):
    """Every row's candidates are all k actions (shuffled per row); random logger and target."""
    rng = np.random.default_rng(seed)
    pi0 = rng.dirichlet(np.ones(k), n)
    pi1 = rng.dirichlet(np.ones(k) * 0.5, n)
    a = (pi0.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    order = np.argsort(rng.random((n, k)), axis=1)  # candidate lists in a per-row order
    cand = order
    table = pa.table(
        {
            "action": a,
            "propensity": pi0[np.arange(n), a],
            "reward": rng.binomial(1, 0.3 + 0.1 * np.asarray(clusters)[a]).astype(float),
            "x0": rng.normal(size=n),
            "candidates": list(cand),
            "logging_distribution": list(np.take_along_axis(pi0, cand, 1)),
            "target__new": pi1[np.arange(n), a],
            "target_dist__new": list(np.take_along_axis(pi1, cand, 1)),
        }
    )
    items = pa.table({"action": np.arange(k), "cluster": np.asarray(clusters)})
    return ope.read_logs(table), items, pi0, pi1, a


def _marginal_by_hand(pi, a, clusters):
    c = np.asarray(clusters)
    same = c[None, :] == c[a][:, None]
    return (pi * same).sum(1)


def test_cluster_marginals_equal_the_dense_sums():
    logs, items, pi0, pi1, a = _dense_logs()
    clusters = items.column("cluster").to_numpy()
    m = marginal_propensities(logs, ActionEmbedding(clusters="cluster", items=items))
    np.testing.assert_allclose(m.logging, _marginal_by_hand(pi0, a, clusters), rtol=1e-14)
    np.testing.assert_allclose(m.values[:, 0], _marginal_by_hand(pi1, a, clusters), rtol=1e-14)
    assert m.names == ["new"] and m.n_embeddings == 3
    # the item table may also come with the logs
    m2 = marginal_propensities(
        logs.with_action_features(items), ActionEmbedding(clusters="cluster")
    )
    np.testing.assert_array_equal(m2.logging, m.logging)


def test_mips_in_evaluate_is_ips_on_the_marginal_propensities():
    logs, items, pi0, pi1, a = _dense_logs()
    clusters = items.column("cluster").to_numpy()
    p_e, t_e = _marginal_by_hand(pi0, a, clusters), _marginal_by_hand(pi1, a, clusters)
    r = logs.column("reward")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(
            logs,
            estimators=("ips", "mips", "snmips"),
            embedding=ActionEmbedding(clusters="cluster", items=items),
        )
        want_ips = ope.IPS().estimate(r, logs.column("propensity"), logs.column("target__new"))
        want_mips = ope.IPS().estimate(r, p_e, t_e)
        want_sn = ope.SNIPS().estimate(r, p_e, t_e)
    assert ev[("new", "ips")].value == pytest.approx(want_ips.value, rel=1e-12)
    assert ev[("new", "mips")].value == pytest.approx(want_mips.value, rel=1e-12)
    assert ev[("new", "mips")].std_error == pytest.approx(want_mips.std_error, rel=1e-12)
    assert ev[("new", "snmips")].value == pytest.approx(want_sn.value, rel=1e-12)
    assert ev[("new", "mips")].estimator == "mips"
    # the ESS is that of the marginal weights, above the items' (merged clusters)
    assert ev[("new", "mips")].ess > ev[("new", "ips")].ess
    (check,) = ev.embedding_checks
    d = (logs.column("target__new") / logs.column("propensity") - t_e / p_e) * r
    assert check.difference == pytest.approx(d.mean(), rel=1e-12)
    assert check.std_error == pytest.approx(d.std(ddof=1) / np.sqrt(d.size), rel=1e-12)
    assert any("no direct effect" in note for note in ev.notes)
    doc = ev.to_dict()
    assert doc["embedding_checks"][0]["policy"] == "new"
    assert {row["estimator"] for row in doc["estimates"]} == {"ips", "mips", "snmips"}


def test_one_item_per_embedding_gives_the_per_item_estimates():
    logs, items, *_ = _dense_logs(clusters=range(6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(
            logs,
            estimators=("ips", "mips", "dr", "mdr"),
            embedding=ActionEmbedding(clusters="cluster", items=items),
            rng=3,
        )
    assert ev[("new", "mips")].value == pytest.approx(ev[("new", "ips")].value, rel=1e-12)
    assert ev[("new", "mdr")].value == pytest.approx(ev[("new", "dr")].value, rel=1e-12)
    assert ev.embedding_checks[0].difference == pytest.approx(0.0, abs=1e-12)


def test_joint_embedding_of_item_columns_is_the_tuple():
    logs, _, pi0, pi1, a = _dense_logs()
    items = pa.table(
        {
            "action": np.arange(6),
            "genre": ["a", "a", "b", "b", "a", "b"],
            "tier": [1, 1, 1, 2, 2, 2],
        }
    )
    joint = np.array([0, 0, 1, 2, 3, 2])  # (a,1) (a,1) (b,1) (b,2) (a,2) (b,2)
    m = marginal_propensities(logs, ActionEmbedding(columns=("genre", "tier"), items=items))
    np.testing.assert_allclose(m.logging, _marginal_by_hand(pi0, a, joint), rtol=1e-14)
    np.testing.assert_allclose(m.values[:, 0], _marginal_by_hand(pi1, a, joint), rtol=1e-14)
    assert m.n_embeddings == 4


def test_per_row_clusters_aligned_with_candidates():
    logs, items, pi0, pi1, a = _dense_logs()
    clusters = items.column("cluster").to_numpy()
    cand = np.stack(logs.table.column("candidates").to_numpy(zero_copy_only=False))
    # the same global clusters written per row, aligned with each row's candidate order
    per_row = pa.array(list(clusters[cand]))
    table = logs.table.append_column("cand_cluster", per_row)
    m = marginal_propensities(ope.read_logs(table), ActionEmbedding(clusters="cand_cluster"))
    np.testing.assert_allclose(m.logging, _marginal_by_hand(pi0, a, clusters), rtol=1e-14)
    # clusters that change by row: row i puts action 0 alone in its own cluster
    varied = clusters[cand].copy()
    varied[cand == 0] = 99
    t2 = logs.table.append_column("cand_cluster", pa.array(list(varied)))
    m2 = marginal_propensities(ope.read_logs(t2), ActionEmbedding(clusters="cand_cluster"))
    own = np.where(
        a == 0, pi0[:, 0], _marginal_by_hand(pi0, a, clusters) - (clusters[a] == 0) * pi0[:, 0]
    )
    np.testing.assert_allclose(m2.logging, own, rtol=1e-12)


def test_stochastic_embeddings_weight_by_a_known_p_e_given_a():
    rng = np.random.default_rng(5)
    logs, _, pi0, pi1, a = _dense_logs(seed=5)
    k, v = 6, 3
    p_e_a = rng.dirichlet(np.ones(v), k)  # (k, v)
    p_e_a[0] = [1.0, 0.0, 0.0]  # a zero entry is left out of the table
    e = np.array([rng.choice(v, p=p_e_a[ai]) for ai in a])
    act, val = np.nonzero(p_e_a > 0)
    table = pd.DataFrame({"action": act, "value": val, "probability": p_e_a[act, val]})
    logs2 = ope.read_logs(logs.table.append_column("e0", pa.array(e)))
    m = marginal_propensities(logs2, ActionEmbedding(distribution={"e0": table}))
    np.testing.assert_allclose(m.logging, (pi0 * p_e_a[:, e].T).sum(1), rtol=1e-13)
    np.testing.assert_allclose(m.values[:, 0], (pi1 * p_e_a[:, e].T).sum(1), rtol=1e-13)
    # two dimensions: the joint form sum_a pi(a) prod_d p(e_d|a)
    q = rng.dirichlet(np.ones(2), k)
    e1 = np.array([rng.choice(2, p=q[ai]) for ai in a])
    act1, val1 = np.nonzero(q > 0)
    t1 = pa.table({"action": act1, "value": val1, "probability": q[act1, val1]})
    logs3 = ope.read_logs(logs2.table.append_column("e1", pa.array(e1)))
    m3 = marginal_propensities(logs3, ActionEmbedding(distribution={"e0": table, "e1": t1}))
    want = (pi0 * p_e_a[:, e].T * q[:, e1].T).sum(1)
    np.testing.assert_allclose(m3.logging, want, rtol=1e-13)


def test_embedding_arguments_are_checked():
    with pytest.raises(ParameterError, match="exactly one"):
        ActionEmbedding()
    with pytest.raises(ParameterError, match="exactly one"):
        ActionEmbedding(clusters="c", columns=("a",))
    with pytest.raises(ParameterError, match="clusters"):
        ActionEmbedding(clusters=3)
    with pytest.raises(ParameterError, match="twice"):
        ActionEmbedding(columns=("a", "a"))
    logs, items, *_ = _dense_logs()
    with pytest.raises(ParameterError, match="need embedding"):
        ope.evaluate(logs, estimators=("mips",))
    with pytest.raises(ParameterError, match="used only by"):
        ope.evaluate(logs, estimators=("ips",), embedding=ActionEmbedding(clusters="cluster"))
    with pytest.raises(ParameterError, match="ActionEmbedding"):
        ope.evaluate(logs, estimators=("mips",), embedding="cluster")


def test_bad_item_tables_and_logs_are_named():
    logs, items, *_ = _dense_logs()
    with pytest.raises(PolicyError, match="item table"):
        marginal_propensities(logs, ActionEmbedding(clusters="cluster"))
    partial = items.slice(0, 5)  # action 5 has no cluster
    with pytest.raises(PolicyError, match="no row in the item table"):
        marginal_propensities(logs, ActionEmbedding(clusters="cluster", items=partial))
    dup = pa.concat_tables([items, items.slice(0, 1)])
    with pytest.raises(SchemaError, match="more than once"):
        marginal_propensities(logs, ActionEmbedding(clusters="cluster", items=dup))
    with pytest.raises(SchemaError, match="lacks the embedding columns"):
        marginal_propensities(logs, ActionEmbedding(clusters="genre", items=items))
    nulls = pa.table({"action": np.arange(6), "cluster": pa.array([0, 0, None, 1, 2, 2])})
    with pytest.raises(SchemaError, match="null"):
        marginal_propensities(logs, ActionEmbedding(clusters="cluster", items=nulls))
    bare = ope.read_logs(logs.table.drop_columns(["logging_distribution"]))
    with pytest.raises(PolicyError, match="logging_distribution"):
        marginal_propensities(bare, ActionEmbedding(clusters="cluster", items=items))
    with pytest.raises(ParameterError, match="ActionEmbedding"):
        marginal_propensities(logs, "cluster")


def test_impossible_logged_embedding_is_refused():
    logs, _, pi0, pi1, a = _dense_logs(seed=2)
    k = 6
    p_e_a = np.eye(k)[:, :3]  # action j shows value j (j < 3); actions 3..5 have no value
    p_e_a[3:, 0] = 1.0
    e = np.where(a < 3, a, 0)
    e[np.flatnonzero(a == 1)[:1]] = 2  # an observed value its action never shows
    act, val = np.nonzero(p_e_a > 0)
    table = pa.table({"action": act, "value": val, "probability": p_e_a[act, val]})
    logs2 = ope.read_logs(logs.table.append_column("e0", pa.array(e)))
    m = marginal_propensities(logs2, ActionEmbedding(distribution={"e0": table}))
    assert np.all(m.logging > 0)  # value 2 is possible under action 2, which the logger offers
    e_bad = e.copy()
    e_bad[7] = 5  # a value no action shows
    logs3 = ope.read_logs(logs.table.append_column("e0", pa.array(e_bad)))
    with pytest.raises(PolicyError, match="probability 0 under the logger in 1 row"):
        marginal_propensities(logs3, ActionEmbedding(distribution={"e0": table}))
    bad = pa.table({"action": [0], "value": [0], "probability": [0.5]})
    with pytest.raises(SchemaError, match="does not sum to 1"):
        marginal_propensities(logs2, ActionEmbedding(distribution={"e0": bad}))


def test_sufficiency_arguments_are_validated():
    logs, items, *_ = _dense_logs()
    m = marginal_propensities(logs, ActionEmbedding(clusters="cluster", items=items))
    r, p, t = logs.column("reward"), logs.column("propensity"), logs.column("target__new")
    (res,) = embedding_sufficiency(r, p, t, m)
    assert 0.0 <= res.p_value <= 1.0 and res.ess_embedding >= res.ess_items
    with pytest.raises(ValidationError):
        embedding_sufficiency(r[:-1], p, t, m)
    with pytest.raises(ValidationError):
        embedding_sufficiency(r, p * 0.0, t, m)
    with pytest.raises(ParameterError, match="MarginalPropensities"):
        embedding_sufficiency(r, p, t, None)


def test_merged_item_statistics_refuse_marginalized_estimators(tmp_path):
    logs, items, *_ = _dense_logs()
    stats = ope.MomentStats.from_arrays(
        logs.column("reward"), logs.column("propensity"), logs.column("target__new")
    )
    from ope.exceptions import EstimationError

    with pytest.raises(EstimationError, match="embedding"):
        stats.estimates(ope.MIPS())
    path = tmp_path / "logs.parquet"
    import pyarrow.parquet as pq

    pq.write_table(logs.table, path)
    # the ones with a reward model need every row; MIPS without an embedding is refused
    for estimators in (("mdr",), ("offcem",)):
        with pytest.raises(EstimationError, match=estimators[0]):
            ope.evaluate(
                ope.scan_logs(path),
                estimators=estimators,
                embedding=ActionEmbedding(clusters="cluster", items=items),
            )


# skewed planted rows: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings("ignore:.*likely too short:ope.exceptions.SmallSampleWarning")
@pytest.mark.parametrize("weighted", [False, True])
def test_scans_and_dask_give_the_eager_mips_and_snmips(tmp_path, weighted):
    """Each batch's embedding propensities come from its own rows, so merged statistics give
    the eager MIPS and SNMIPS (values and standard errors to 1e-12), for aligned columns and
    for policy objects, in a scan and in Dask partitions."""
    import dask
    import pyarrow.parquet as pq

    logs, items, *_ = _dense_logs(n=1000, seed=4)
    table = logs.table
    if weighted:
        table = table.append_column(
            "weight", pa.array(np.random.default_rng(1).uniform(1.0, 3.0, logs.n))
        )
    emb = ActionEmbedding(clusters="cluster", items=items)
    estimators = ("ips", "snips", "mips", "snmips")
    eager = ope.evaluate(ope.read_logs(table), estimators=estimators, embedding=emb)
    path = tmp_path / "logs.parquet"
    pq.write_table(table, path, row_group_size=170)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        pq.write_table(table.slice(i * 334, 334), folder / f"p{i}.parquet", row_group_size=100)
    lazy = ope.evaluate(ope.scan_logs(path, batch_size=128), estimators=estimators, embedding=emb)
    with dask.config.set(scheduler="synchronous"):
        dist = ope.evaluate_distributed(
            folder, estimators=("mips", "snmips"), embedding=emb, batch_size=150
        )
    for other in (lazy, dist):
        assert other.streaming
        for key in dist.estimates:
            assert other[key].estimator == key[1]
            assert other[key].value == pytest.approx(eager[key].value, rel=1e-12)
            assert other[key].std_error == pytest.approx(eager[key].std_error, rel=1e-10)
        assert any("needs the rows" in n for n in other.notes)
    assert lazy[("new", "ips")].value == pytest.approx(eager[("new", "ips")].value, rel=1e-12)
    # the candidates as policy objects: distributions computed per batch
    table_objects = table.drop_columns(["target__new", "target_dist__new"])
    pq.write_table(table_objects, tmp_path / "objects.parquet", row_group_size=170)
    pi1 = {"uniform": ope.UniformPolicy()}
    eager_o = ope.evaluate(ope.read_logs(table_objects), pi1, estimators=("mips",), embedding=emb)
    lazy_o = ope.evaluate(
        ope.scan_logs(tmp_path / "objects.parquet", batch_size=128),
        pi1,
        estimators=("mips",),
        embedding=emb,
    )
    key = ("uniform", "mips")
    assert lazy_o[key].value == pytest.approx(eager_o[key].value, rel=1e-12)
    assert lazy_o[key].std_error == pytest.approx(eager_o[key].std_error, rel=1e-10)


def test_segments_take_the_marginal_estimates_of_their_rows():
    logs, items, *_ = _dense_logs(n=600)
    seg = np.where(np.arange(logs.n) % 2 == 0, "even", "odd")
    logs2 = ope.read_logs(logs.table.append_column("half", pa.array(seg)))
    emb = ActionEmbedding(clusters="cluster", items=items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(logs2, estimators=("mips",), embedding=emb, by="half")
        part = ope.read_logs(logs2.table.filter(pa.array(seg == "odd")))
        alone = ope.evaluate(part, estimators=("mips",), embedding=emb)
    got = ev.segment_estimates[("half", "odd", "new", "mips")]
    assert got.value == pytest.approx(alone[("new", "mips")].value, rel=1e-12)


def test_marginalized_dr_fits_its_reward_model_on_the_embeddings():
    from ope.evaluation._driver import model_predictions
    from ope.marginal import embedding_level
    from ope.policies import target_propensities

    logs, items, pi0, pi1, a = _dense_logs(n=800, seed=7)
    emb = ActionEmbedding(clusters="cluster", items=items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(logs, estimators=("mdr",), embedding=emb, rng=11)
        tp = target_propensities(logs, with_distributions=True)
        level_logs, level_dists = embedding_level(logs, emb, tp.distributions)
        # the embedding-level logs: each row's action is its item's cluster
        np.testing.assert_array_equal(
            level_logs.column("action"), items.column("cluster").to_numpy()[a]
        )
        q_l, q_t, _, _ = model_predictions(
            level_logs,
            level_dists,
            tp.names,
            reward_model=None,
            context_columns=None,
            action_features=None,
            rng=11,
        )
        m = marginal_propensities(logs, emb, distributions=tp.distributions)
        want = ope.MarginalizedDR().estimate(
            logs.column("reward"), m.logging, m.values[:, 0], q_logged=q_l, q_target=q_t[:, 0]
        )
    assert ev[("new", "mdr")].value == pytest.approx(want.value, rel=1e-12)
    # per-row clusters and a stochastic p(e|a) keep the items' model: no embedding per item
    cand = np.stack(logs.table.column("candidates").to_numpy(zero_copy_only=False))
    per_row = logs.table.append_column(
        "cc", pa.array(list(items.column("cluster").to_numpy()[cand]))
    )
    assert embedding_level(ope.read_logs(per_row), ActionEmbedding(clusters="cc"), {}) is None


@pytest.mark.parametrize("chunk", [7, 1 << 18])
def test_aligned_columns_and_distributions_give_the_same_marginals(monkeypatch, chunk):
    import ope.marginal as om
    from ope.marginal import reads_aligned_columns
    from ope.policies import target_propensities

    monkeypatch.setattr(om, "ALIGNED_CHUNK_ROWS", chunk)  # partial chunks of rows
    logs, items, *_ = _dense_logs(n=300, seed=9)
    emb = ActionEmbedding(clusters="cluster", items=items)
    assert reads_aligned_columns(logs, emb, None)
    fast = marginal_propensities(logs, emb)
    tp = target_propensities(logs, with_distributions=True)
    general = marginal_propensities(logs, emb, distributions=tp.distributions)
    np.testing.assert_allclose(fast.logging, general.logging, rtol=1e-14)
    np.testing.assert_allclose(fast.values, general.values, rtol=1e-14)
    # logs not from a reader, or policy objects, take the general path
    plain = ope.BanditLogs(logs.table, logs.report)
    assert not reads_aligned_columns(plain, emb, None)
    assert not reads_aligned_columns(logs, emb, {"u": ope.UniformPolicy()})
    np.testing.assert_allclose(marginal_propensities(plain, emb).logging, fast.logging, rtol=1e-14)
    # a target distribution that does not sum to 1 is named
    bad = logs.table.set_column(
        logs.table.column_names.index("target_dist__new"),
        "target_dist__new",
        pa.array([[0.5] * 6] * logs.n),
    )
    with pytest.raises(PolicyError, match="sum to 1"):
        marginal_propensities(ope.read_logs(bad), emb)


@pytest.mark.parametrize("n_threads", [1, 3])
def test_aligned_columns_split_over_threads_and_chunks(monkeypatch, n_threads):
    """The compiled pass over the aligned columns, its rows split over threads (each writing
    its own rows' sums) and its table in several chunks (each read in place), gives the
    general path's marginals."""
    from ope import _kernel
    import ope.marginal as om
    from ope.policies import target_propensities

    if not _kernel.numba_available():
        pytest.skip("numba is not installed (the optional extra 'fast')")
    monkeypatch.setattr(om, "_ENTRY_BLOCK", 8)  # a split from a few rows on
    monkeypatch.setattr(om, "_ROW_BLOCK", 8)
    monkeypatch.setattr("ope._kernel.PARALLEL_MIN_ROWS", 16)
    splits: list[int] = []
    run = _kernel.run_threads

    def spy(fn, ranges):
        splits.append(len(ranges))
        return run(fn, ranges)

    monkeypatch.setattr("ope._kernel.run_threads", spy)
    monkeypatch.setattr(om, "ALIGNED_CHUNK_ROWS", 250)
    _kernel.set_threads(n_threads)
    try:
        logs, items, *_ = _dense_logs(n=1000, seed=21)
        # several chunks of uneven sizes, as a parquet file's row groups
        table = pa.concat_tables(
            [logs.table.slice(0, 130), logs.table.slice(130, 600), logs.table.slice(730)]
        )
        chunked = ope.read_logs(table)
        assert chunked.table.column("candidates").num_chunks > 1
        emb = ActionEmbedding(clusters="cluster", items=items)
        fast = marginal_propensities(chunked, emb)
        tp = target_propensities(logs, with_distributions=True)
        general = marginal_propensities(logs, emb, distributions=tp.distributions)
        np.testing.assert_allclose(fast.logging, general.logging, rtol=1e-14)
        np.testing.assert_allclose(fast.values, general.values, rtol=1e-14)
        assert splits and max(splits) == n_threads  # the rows were split as asked
        with pytest.raises(PolicyError, match="no row in the item table"):
            marginal_propensities(
                chunked, ActionEmbedding(clusters="cluster", items=items.slice(0, 5))
            )
    finally:
        _kernel.set_threads(None)


def test_diagnose_tests_the_embedding():
    logs, items, *_ = _dense_logs(n=500, seed=4)
    emb = ActionEmbedding(clusters="cluster", items=items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = ope.diagnose(logs, embedding=emb)
        ev = ope.evaluate(logs, estimators=("mips",), embedding=emb)
    (check,) = d.embedding_checks
    assert check == ev.embedding_checks[0]
    assert check.note() in d.notes
    assert d.to_dict()["embedding_checks"][0]["policy"] == "new"
    assert not ope.diagnose(logs).embedding_checks
    with pytest.raises(ParameterError, match="ActionEmbedding"):
        ope.diagnose(logs, embedding="cluster")


def test_compiled_and_numpy_passes_agree_and_name_unknown_items():
    from ope import _kernel

    logs, items, *_ = _dense_logs(n=700, seed=12)
    emb = ActionEmbedding(clusters="cluster", items=items)
    out = {}
    for backend in ("numba", "numpy") if _kernel.numba_available() else ("numpy",):
        _kernel.set_backend(backend)
        try:
            out[backend] = marginal_propensities(logs, emb)
            with pytest.raises(PolicyError, match="no row in the item table"):
                marginal_propensities(
                    logs, ActionEmbedding(clusters="cluster", items=items.slice(0, 5))
                )
        finally:
            _kernel.set_backend(None)
    if len(out) == 2:
        np.testing.assert_allclose(out["numba"].logging, out["numpy"].logging, rtol=1e-14)
        np.testing.assert_allclose(out["numba"].values, out["numpy"].values, rtol=1e-14)


def test_observed_embeddings_are_not_context_of_the_reward_model():
    from ope.simulate import CatalogBandit

    env = CatalogBandit(
        n_items=200, n_candidates=10, n_requests=50, stochastic_embeddings=True, seed=1
    )
    items = env.action_features().select(["action", "cluster"])
    logs = ope.read_logs(env.sample(2000, rng=2)).with_action_features(items)
    emb = ActionEmbedding(distribution=env.embedding_distribution())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(logs, estimators=("dr", "mdr"), embedding=emb, rng=0)
        named = ope.evaluate(
            logs,
            estimators=("mdr",),
            embedding=emb,
            context_columns=["x0", "e0"],
            rng=0,
        )
    assert not {"e0", "e1"} & set(ev.model_columns["context"])
    assert any("observed embedding columns e0, e1" in n for n in ev.notes)
    assert named.model_columns["context"] == ["x0", "e0"]  # named columns are kept


@pytest.mark.parametrize(
    ("dist", "stored"),
    [
        ([0.22, 0.19, 0.19, 0.31, 0.09], pa.float64()),  # sums to 1 + 2.2e-16
        ([0.1] * 10, pa.float32()),  # a float32 logger: sums to 1 + 1.5e-8 in float64
    ],
)
@pytest.mark.parametrize("per_row", [False, True])
def test_a_row_total_above_1_by_roundoff_is_a_marginal_propensity_of_1(dist, stored, per_row):
    # every candidate shares one embedding: the logger's marginal propensity is the row's total
    n, k = 40, len(dist)
    reward = np.linspace(0.0, 1.0, n)
    target = [0.5, 0.5] + [0.0] * (k - 2)
    t = pa.table(
        {
            "action": np.zeros(n, dtype=np.int64),
            "propensity": np.full(n, dist[0]),
            "reward": reward,
            "candidates": [list(range(k))] * n,
            "logging_distribution": pa.array([dist] * n, type=pa.list_(stored)),
            "target__new": np.full(n, 0.5),
            "target_dist__new": [target] * n,
            "g": [[7] * k] * n,
        }
    )
    logs = ope.read_logs(t)  # accepted: the total is 1 within the reader's tolerance
    items = pa.table({"action": np.arange(k), "g": np.zeros(k, dtype=np.int64)})
    embedding = (
        ActionEmbedding(clusters="g") if per_row else ActionEmbedding(clusters="g", items=items)
    )
    m = marginal_propensities(logs, embedding)
    np.testing.assert_array_equal(m.logging, 1.0)
    np.testing.assert_array_equal(m.values[:, 0], 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small sample
        ev = ope.evaluate(logs, estimators=("mips",), embedding=embedding)
    assert ev.table()["value"].tolist() == pytest.approx([reward.mean()], rel=1e-12)
