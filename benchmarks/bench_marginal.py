"""Benchmark: marginalized estimators (MIPS, SNMIPS) against obp and against IPS at catalog scale.

Two sections:

``parity``
    Identical inputs for ope and the Open Bandit Pipeline's
    ``MarginalizedInverseProbabilityWeighting`` / ``SelfNormalizedMarginalizedInverseProbabilityWeighting``
    (obp 0.5.7, known ``p_e_a``, ``embedding_selection_method=None``): n rows, K actions, every
    row's candidate set all K actions, random logging and target distributions, categorical
    embeddings with a deterministic or a stochastic known p(e|a). ope computes MIPS/SNMIPS through
    ``ope.evaluate(..., embedding=...)`` on logs built from those arrays, and through
    ``ope.marginal_propensities`` + ``MIPS().estimate``; a direct numpy computation of the joint
    form :math:`\\sum_a \\pi(a|x) \\prod_d p(e_d|a)` is the third reference. obp's MIPW multiplies
    the dimensions inside the sum (the joint form, comparable in any dimension); its SNMIPW
    multiplies per-dimension mixtures :math:`\\prod_d \\sum_a \\pi(a|x) p(e_d|a)`, which equals the
    joint form only for one dimension: the 2-dimensional case reports that difference and does
    not count it as a disagreement.

``perf``
    1M rows of :class:`ope.simulate.CatalogBandit` (10,000 items, 50 candidates, 3 candidate
    policies, deterministic clusters): ``ope.evaluate`` with ``("ips",)``, ``("mips",)`` and
    ``("ips", "mips")`` (clusters from the item table), and the memory floor of the candidate-set
    columns (``np.sum`` over the flat values of ``candidates``, ``logging_distribution`` and every
    ``target_dist__``) and a plain-numpy MIPS over those flat columns without any check (its
    value compared with ope's), in interleaved rounds (wall and CPU, medians, per-round ratio
    ranges); the peak RSS of each ``evaluate`` in a fresh interpreter against the bytes of the
    candidate-set columns; and a cProfile of the MIPS evaluation (ope's functions by own and
    cumulative time, and the compiled numpy/scipy/pyarrow calls with their ope callers).

obp runs from its own interpreter (``--obp-python``, default ``$OPE_BENCH_OBP_PYTHON`` or
``/tmp/obp-venv/bin/python``); without it the obp column is skipped and said to be.

Usage::

    python benchmarks/bench_marginal.py                 # parity n = 10,000; perf n = 1M
    python benchmarks/bench_marginal.py --quick         # small sizes (smoke run)
    python benchmarks/bench_marginal.py --only parity   # one section
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_evaluate as be  # noqa: E402
from _common import (  # noqa: E402
    MIN_ROUNDS,
    data_path,
    interleaved,
    peak_rss,
    ratio,
    summarize,
    write_result,
)

NAME: Final = "bench_marginal"
#: The issue's target: MIPS with a known p(e|a) within 2x of IPS on the same rows.
TARGET_MIPS_VS_IPS: Final = 2.0
#: Relative agreement expected where ope's and obp's definitions match (double rounding only).
PARITY_RTOL: Final = 1e-12
#: Parity cases: (name, embedding dimensions, stochastic p(e|a)).
PARITY_CASES: Final = (
    ("deterministic_1d", 1, False),
    ("stochastic_1d", 1, True),
    ("stochastic_2d", 2, True),
)


# --------------------------------------------------------------------------------------------
# parity: inputs, the numpy reference, ope and obp
# --------------------------------------------------------------------------------------------
def parity_inputs(
    n: int, n_actions: int, n_categories: int, n_dims: int, *, stochastic: bool, seed: int
) -> dict[str, np.ndarray]:
    """Dense inputs shared by ope, obp and the numpy reference.

    Returns ``reward`` (n,), ``action`` (n,), ``pi_b`` and ``pi_e`` (n, K): the logging and the
    target distributions over all K actions (every row's candidate set); ``p_e_a``
    (K, n_categories, n_dims): p(e_d | a), one-hot for deterministic embeddings, a Dirichlet draw
    otherwise; ``action_embed`` (n, n_dims): the embedding observed on each row, drawn from
    p(e_d | a_i) (the logged action's category when deterministic).
    """
    rng = np.random.default_rng(seed)
    pi_b = be._softmax(rng.normal(size=(n, n_actions)))
    pi_e = be._softmax(2.0 * rng.normal(size=(n, n_actions)))
    action = (rng.random(n)[:, None] > np.cumsum(pi_b, axis=1)).sum(axis=1)
    action = np.minimum(action, n_actions - 1).astype(np.int64)
    if stochastic:
        p_e_a = rng.dirichlet(np.ones(n_categories), size=(n_actions, n_dims)).transpose(0, 2, 1)
    else:
        own = rng.integers(0, n_categories, size=(n_actions, n_dims))
        p_e_a = np.zeros((n_actions, n_categories, n_dims))
        for d in range(n_dims):
            p_e_a[np.arange(n_actions), own[:, d], d] = 1.0
    p_e_a = np.ascontiguousarray(p_e_a)
    embed = np.empty((n, n_dims), dtype=np.int64)
    for d in range(n_dims):
        cum = np.cumsum(p_e_a[action, :, d], axis=1)
        embed[:, d] = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1), n_categories - 1)
    reward = rng.binomial(1, rng.uniform(0.1, 0.9, n_actions)[action]).astype(np.float64)
    return {
        "reward": reward,
        "action": action,
        "pi_b": pi_b,
        "pi_e": pi_e,
        "p_e_a": p_e_a,
        "action_embed": embed,
    }


def reference_marginals(inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """pi_0(e_i|x_i) and pi(e_i|x_i) in the joint form sum_a pi(a|x_i) prod_d p(e_id|a), numpy."""
    p_e_a, embed = inputs["p_e_a"], inputs["action_embed"]
    like = np.ones_like(inputs["pi_b"])  # (n, K): prod_d p(e_id | a)
    for d in range(embed.shape[1]):
        like *= p_e_a[:, embed[:, d], d].T
    return (inputs["pi_b"] * like).sum(axis=1), (inputs["pi_e"] * like).sum(axis=1)


def reference_values(inputs: dict[str, np.ndarray]) -> dict[str, float]:
    """MIPS and SNMIPS from :func:`reference_marginals`."""
    p0, p1 = reference_marginals(inputs)
    w = p1 / p0
    r = inputs["reward"]
    return {"mips": float(np.mean(w * r)), "snmips": float(np.sum(w * r) / np.sum(w))}


def parity_logs(inputs: dict[str, np.ndarray]) -> tuple[Any, dict[str, Any]]:
    """The logs of the parity inputs and the ope embeddings that describe them.

    Every row offers all K actions (``candidates``), with the dense logging and target
    distributions as ``logging_distribution`` / ``target_dist__new`` and the observed embedding
    as columns ``e0 ..``. The embeddings: ``distribution`` (the known p(e_d|a) as sparse tables,
    entries of positive probability), and for a one-dimensional deterministic p(e|a) also
    ``clusters`` (the category of each action in an item table).
    """
    import pyarrow as pa

    import ope

    n, k = inputs["pi_b"].shape
    rows = np.arange(n)
    action = inputs["action"]
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * k)

    def lists(values: np.ndarray) -> pa.Array:
        return pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1)))

    cols: dict[str, Any] = {
        "action": pa.array(action),
        "propensity": pa.array(inputs["pi_b"][rows, action]),
        "reward": pa.array(inputs["reward"]),
        "candidates": lists(np.tile(np.arange(k, dtype=np.int64), n)),
        "logging_distribution": lists(inputs["pi_b"]),
        "target__new": pa.array(inputs["pi_e"][rows, action]),
        "target_dist__new": lists(inputs["pi_e"]),
    }
    p_e_a, embed = inputs["p_e_a"], inputs["action_embed"]
    tables = {}
    for d in range(embed.shape[1]):
        cols[f"e{d}"] = pa.array(embed[:, d])
        a, v = np.nonzero(p_e_a[:, :, d] > 0)
        tables[f"e{d}"] = pa.table(
            {
                "action": pa.array(a.astype(np.int64)),
                "value": pa.array(v.astype(np.int64)),
                "probability": pa.array(p_e_a[a, v, d]),
            }
        )
    logs = ope.read_logs(pa.table(cols))
    embeddings: dict[str, Any] = {"distribution": ope.ActionEmbedding(distribution=tables)}
    deterministic = bool(np.all((p_e_a == 0) | (p_e_a == 1)))
    if deterministic and embed.shape[1] == 1:
        items = pa.table(
            {
                "action": pa.array(np.arange(k, dtype=np.int64)),
                "cat": pa.array(p_e_a[:, :, 0].argmax(1)),
            }
        )
        embeddings["clusters"] = ope.ActionEmbedding(clusters="cat", items=items)
    return logs, embeddings


def ope_parity(inputs: dict[str, np.ndarray]) -> dict[str, Any]:
    """ope's MIPS/SNMIPS values (evaluate and the array path) and its marginal propensities."""
    import ope

    logs, embeddings = parity_logs(inputs)
    out: dict[str, Any] = {}
    for kind, emb in embeddings.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ope.evaluate(logs, estimators=("mips", "snmips"), embedding=emb)
            m = ope.marginal_propensities(logs, emb)
            r = inputs["reward"]
            arrays = {
                "mips": ope.MIPS().estimate(r, m.logging, m.values[:, 0]).value,
                "snmips": ope.SNMIPS().estimate(r, m.logging, m.values[:, 0]).value,
            }
        out[kind] = {
            "evaluate": {e: float(res["new", e].value) for e in ("mips", "snmips")},
            "arrays": {e: float(v) for e, v in arrays.items()},
            "logging_marginal": m.logging,
            "target_marginal": m.values[:, 0],
        }
    return out


_OBP_PARITY_CHILD: Final = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import obp
from obp.ope import (MarginalizedInverseProbabilityWeighting as MIPW,
                     SelfNormalizedMarginalizedInverseProbabilityWeighting as SNMIPW)
out = {"obp": obp.__version__, "python": sys.version.split()[0], "cases": {}}
for path in sys.argv[1:]:
    d = np.load(path)
    k = d["pi_b"].shape[1]
    kw = {"reward": d["reward"], "action": d["action"], "action_embed": d["action_embed"],
          "pi_b": d["pi_b"][:, :, None], "action_dist": d["pi_e"][:, :, None],
          "p_e_a": d["p_e_a"]}
    out["cases"][path] = {
        "mips": float(MIPW(n_actions=k, embedding_selection_method=None)
                      .estimate_policy_value(**kw)),
        "snmips": float(SNMIPW(n_actions=k, embedding_selection_method=None)
                        .estimate_policy_value(**kw)),
    }
print(json.dumps(out))
"""


def obp_parity(python: str, cases: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """obp's MIPW/SNMIPW on each case's arrays, from one run of obp's interpreter."""
    if not Path(python).exists():
        return {"skipped": f"no obp interpreter at {python} (--obp-python)"}
    paths = {}
    for name, inputs in cases.items():
        paths[name] = data_path(f"marginal_parity_{name}.npz")
        np.savez(paths[name], **inputs)
    try:
        proc = subprocess.run(
            [python, "-c", _OBP_PARITY_CHILD, *map(str, paths.values())],
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        for path in paths.values():
            path.unlink(missing_ok=True)
    if proc.returncode != 0:
        return {"failed": proc.stderr[-3000:]}
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    by_path = doc.pop("cases")
    doc["cases"] = {name: by_path[str(path)] for name, path in paths.items()}
    return doc


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def bench_parity(
    python: str, *, n: int, n_actions: int = 50, n_categories: int = 8, seed: int = 0
) -> dict[str, Any]:
    """Every parity case: ope (evaluate, arrays), obp and numpy values and their differences."""
    cases = {
        name: parity_inputs(n, n_actions, n_categories, dims, stochastic=stoch, seed=seed + i)
        for i, (name, dims, stoch) in enumerate(PARITY_CASES)
    }
    obp = obp_parity(python, cases)
    out: dict[str, Any] = {
        "rows": n,
        "actions": n_actions,
        "categories": n_categories,
        "rtol": PARITY_RTOL,
        "obp": {k: v for k, v in obp.items() if k != "cases"},
        "cases": {},
    }
    all_agree = True
    for name, dims, stoch in PARITY_CASES:
        inputs = cases[name]
        ref = reference_values(inputs)
        p0_ref, p1_ref = reference_marginals(inputs)
        ope_out = ope_parity(inputs)
        case: dict[str, Any] = {"dims": dims, "stochastic": stoch, "numpy": ref, "ope": {}}
        obp_vals = obp.get("cases", {}).get(name)
        if obp_vals is not None:
            case["obp"] = obp_vals
        diffs: dict[str, dict[str, float]] = {}
        for kind, got in ope_out.items():
            case["ope"][kind] = {"evaluate": got["evaluate"], "arrays": got["arrays"]}
            diffs[f"{kind}.marginals_vs_numpy"] = {
                "max_abs": float(
                    max(
                        np.max(np.abs(got["logging_marginal"] - p0_ref)),
                        np.max(np.abs(got["target_marginal"] - p1_ref)),
                    )
                ),
                "max_rel": float(
                    max(
                        np.max(np.abs(got["logging_marginal"] - p0_ref) / p0_ref),
                        np.max(
                            np.abs(got["target_marginal"] - p1_ref) / np.maximum(p1_ref, 1e-300)
                        ),
                    )
                ),
            }
            for path in ("evaluate", "arrays"):
                for est in ("mips", "snmips"):
                    value = got[path][est]
                    diffs[f"{kind}.{path}.{est}_vs_numpy"] = {
                        "abs": abs(value - ref[est]),
                        "rel": _rel(value, ref[est]),
                    }
                    if obp_vals is not None:
                        diffs[f"{kind}.{path}.{est}_vs_obp"] = {
                            "abs": abs(value - obp_vals[est]),
                            "rel": _rel(value, obp_vals[est]),
                        }
        # obp's SNMIPW multiplies per-dimension mixtures: the joint form only for one dimension
        comparable = {key: not (dims > 1 and key.endswith("snmips_vs_obp")) for key in diffs}
        case["differences"] = diffs
        case["not_comparable"] = sorted(k for k, ok in comparable.items() if not ok)
        case["agree"] = all(
            (d.get("rel", d.get("max_rel", 0.0)) <= PARITY_RTOL)
            for k, d in diffs.items()
            if comparable[k]
        )
        if obp_vals is not None and dims > 1:
            prod_mix = _product_of_mixtures_snmips(inputs)
            case["obp_snmips_product_of_mixtures_numpy"] = prod_mix
            case["obp_snmips_vs_product_of_mixtures_rel"] = _rel(obp_vals["snmips"], prod_mix)
        all_agree = all_agree and case["agree"]
        out["cases"][name] = case
    out["agree"] = all_agree
    return out


def _product_of_mixtures_snmips(inputs: dict[str, np.ndarray]) -> float:
    """SNMIPS with obp's SNMIPW weights prod_d sum_a pi(a|x) p(e_d|a) (numpy), to explain it."""
    p_e_a, embed = inputs["p_e_a"], inputs["action_embed"]
    rows = np.arange(embed.shape[0])
    p0 = np.ones(embed.shape[0])
    p1 = np.ones(embed.shape[0])
    for d in range(embed.shape[1]):
        p0 *= (inputs["pi_b"] @ p_e_a[:, :, d])[rows, embed[:, d]]
        p1 *= (inputs["pi_e"] @ p_e_a[:, :, d])[rows, embed[:, d]]
    w = p1 / p0
    return float(np.sum(w * inputs["reward"]) / np.sum(w))


# --------------------------------------------------------------------------------------------
# perf: IPS vs MIPS at catalog scale
# --------------------------------------------------------------------------------------------
def catalog_file(n: int, *, n_items: int, n_candidates: int, seed: int = 0) -> Path:
    """A CatalogBandit sample written once to ``benchmarks/_data`` (parquet) and its item table."""
    import pyarrow.parquet as pq

    from ope.simulate import CatalogBandit

    path = data_path(f"marginal_catalog_{n}_{n_items}_{n_candidates}_{seed}.parquet")
    items = path.with_suffix(".items.parquet")
    if not (path.exists() and items.exists()):
        env = CatalogBandit(n_items=n_items, n_candidates=n_candidates, seed=seed)
        pq.write_table(env.sample(n, rng=seed), path)
        pq.write_table(env.action_features(), items)
    return path


def load_catalog(path: Path) -> Any:
    """The logs of :func:`catalog_file` with their item table."""
    import pyarrow.parquet as pq

    import ope

    logs = ope.read_logs(pq.read_table(path))
    return logs.with_action_features(pq.read_table(path.with_suffix(".items.parquet")))


def list_columns(logs: Any) -> list[str]:
    """The candidate-set columns: ``candidates``, ``logging_distribution``, ``target_dist__*``."""
    names = logs.table.column_names
    return ["candidates", "logging_distribution"] + [
        c for c in names if c.startswith("target_dist__")
    ]


def list_floor(logs: Any) -> float:
    """The memory floor of MIPS's input: one ``np.sum`` over each candidate-set column's values."""
    import pyarrow.compute as pc

    total = 0.0
    for name in list_columns(logs):
        for chunk in logs.table.column(name).chunks:
            total += float(np.sum(pc.list_flatten(chunk).to_numpy()))
    return total


def numpy_mips(logs: Any) -> dict[str, float]:
    """MIPS from the flat candidate-set columns with plain numpy, no validation: a reference.

    The clusters of the item table are looked up for every candidate and for the logged action;
    each row's marginal is the sum of its distribution over the candidates of the logged
    cluster (``np.add.reduceat`` over the row offsets). What a fused pass over the lists costs
    without the CSR matrices, the sorting and the checks; item ids must be ``0 .. N-1``.
    """
    import pyarrow.compute as pc

    t = logs.table
    items = logs.action_features
    lut = np.empty(items.num_rows, dtype=np.int64)
    lut[items.column("action").to_numpy()] = items.column("cluster").to_numpy()
    lengths = pc.list_value_length(t.column("candidates")).to_numpy()
    starts = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    cand = pc.list_flatten(t.column("candidates")).to_numpy()
    same = lut[cand] == np.repeat(lut[t.column("action").to_numpy()], lengths)

    def marginal(column: str) -> np.ndarray:
        values = pc.list_flatten(t.column(column)).to_numpy()
        return np.add.reduceat(np.where(same, values, 0.0), starts)

    p0 = marginal("logging_distribution")
    reward = t.column("reward").to_numpy()
    names = [c[len("target_dist__") :] for c in t.column_names if c.startswith("target_dist__")]
    return {name: float(np.mean(marginal("target_dist__" + name) / p0 * reward)) for name in names}


CASES: Final = ("ips", "mips", "ips+mips")
#: timed once each: DR (the default items' reward model), OffCEM (its two-step model)
MODEL_CASES: Final = ("dr", "offcem")


def run_case(logs: Any, case: str) -> Any:
    """One ``ope.evaluate`` of a perf case."""
    import ope

    estimators = tuple(case.split("+"))
    marginal = {"mips", "snmips", "mdr", "offcem"}
    embedding = ope.ActionEmbedding(clusters="cluster") if marginal & set(estimators) else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ope.evaluate(logs, estimators=estimators, embedding=embedding)


def profile_mips(logs: Any, *, top: int = 15) -> dict[str, Any]:
    """cProfile of one MIPS evaluation: ope's own functions by total and by cumulative time."""
    prof = cProfile.Profile()
    prof.enable()
    run_case(logs, "mips")
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    root = str(Path(__file__).resolve().parents[1] / "ope")
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        if filename.startswith(root):
            rows.append(
                {
                    "where": f"ope/{Path(filename).relative_to(root)}:{func} (line {line})",
                    "calls": ncalls,
                    "self_ms": 1e3 * tottime,
                    "cumulative_ms": 1e3 * cumtime,
                }
            )
    total = max((r["cumulative_ms"] for r in rows), default=0.0)
    # compiled callees (numpy, scipy, pyarrow) by their own time, with their ope callers
    compiled = []
    for (filename, _, func), (_, ncalls, tottime, _, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename.startswith(root) or tottime < 1e-3:
            continue
        from_ope = sorted({f"{Path(f).name}:{fn}" for (f, _, fn) in callers if f.startswith(root)})
        compiled.append(
            {
                "what": f"{Path(filename).name}:{func}",
                "calls": ncalls,
                "self_ms": 1e3 * tottime,
                "called_from": from_ope,
            }
        )
    return {
        "total_ms": total,
        "other_by_self": sorted(compiled, key=lambda r: -r["self_ms"])[:top],
        "by_self": sorted(rows, key=lambda r: -r["self_ms"])[:top],
        "by_cumulative": sorted(rows, key=lambda r: -r["cumulative_ms"])[:top],
    }


def bench_perf(
    n: int, *, n_items: int, n_candidates: int, rounds: int, memory: bool, models: bool = True
) -> dict[str, Any]:
    """Interleaved timings of IPS, MIPS and both, their peak RSS and MIPS's profile."""
    t0 = time.perf_counter()
    path = catalog_file(n, n_items=n_items, n_candidates=n_candidates)
    logs = load_catalog(path)
    out: dict[str, Any] = {
        "rows": n,
        "items": n_items,
        "candidates": n_candidates,
        "policies": [
            c[len("target__") :] for c in logs.table.column_names if c.startswith("target__")
        ],
        "data_seconds": time.perf_counter() - t0,
        "candidate_set_columns": list_columns(logs),
        "candidate_set_mb": sum(logs.table.column(c).nbytes for c in list_columns(logs)) / 2**20,
        "dense_n_by_items_mb": n * n_items * 8 / 2**20,
    }
    values = {c: run_case(logs, c) for c in CASES}  # warm-up (JIT, caches) and the values
    out["values"] = {
        c: {f"{p}.{e}": float(values[c][p, e].value) for p in out["policies"] for e in c.split("+")}
        for c in CASES
    }
    reference = numpy_mips(logs)
    out["numpy_mips_max_rel_diff"] = max(
        abs(out["values"]["mips"][f"{p}.mips"] - v) / abs(v) for p, v in reference.items()
    )
    cases = {c: (lambda c=c: run_case(logs, c)) for c in CASES}
    cases["floor"] = lambda: list_floor(logs)
    cases["numpy_mips"] = lambda: numpy_mips(logs)
    times = interleaved(cases, rounds=rounds, warmup=0)
    out["timings"] = {c: summarize(times.wall[c]) for c in cases}
    out["cpu_timings"] = {c: summarize(times.cpu[c]) for c in cases}
    out["ratios"] = {
        "mips_vs_ips": ratio(times.wall["mips"], times.wall["ips"]),
        "ips+mips_vs_ips": ratio(times.wall["ips+mips"], times.wall["ips"]),
        "ips+mips_vs_mips": ratio(times.wall["ips+mips"], times.wall["mips"]),
        "mips_vs_floor": ratio(times.wall["mips"], times.wall["floor"]),
        "mips_vs_numpy_mips": ratio(times.wall["mips"], times.wall["numpy_mips"]),
        "numpy_mips_vs_floor": ratio(times.wall["numpy_mips"], times.wall["floor"]),
        "numpy_mips_vs_ips": ratio(times.wall["numpy_mips"], times.wall["ips"]),
        "floor_vs_ips": ratio(times.wall["floor"], times.wall["ips"]),
    }
    out["cpu_ratios"] = {
        "mips_vs_ips": ratio(times.cpu["mips"], times.cpu["ips"]),
        "ips+mips_vs_ips": ratio(times.cpu["ips+mips"], times.cpu["ips"]),
        "mips_vs_floor": ratio(times.cpu["mips"], times.cpu["floor"]),
        "mips_vs_numpy_mips": ratio(times.cpu["mips"], times.cpu["numpy_mips"]),
    }
    # the reward-model estimators: one timed call each after the warm-up (seconds, not ms)
    out["model_seconds"] = {}
    for c in MODEL_CASES if models else ():
        run_case(logs, c)
        t0 = time.perf_counter()
        run_case(logs, c)
        out["model_seconds"][c] = time.perf_counter() - t0
    out["target_mips_vs_ips"] = TARGET_MIPS_VS_IPS
    out["target_met"] = out["ratios"]["mips_vs_ips"]["ratio"] <= TARGET_MIPS_VS_IPS
    out["profile"] = profile_mips(logs)
    if memory:
        setup = (
            "import warnings\nwarnings.filterwarnings('ignore')\n"
            "from pathlib import Path\nimport bench_marginal as b\n"
            f"logs = b.load_catalog(Path({str(path)!r}))\n"
        )
        # each child runs its case once in the set-up (compilation, lazy imports, caches):
        # the peak measured is then the evaluation's own
        out["memory"] = {}
        for c in CASES:
            warm = setup + f"b.run_case(logs, {c!r})\n"
            res = peak_rss(warm, f"b.run_case(logs, {c!r})", timeout=1800)
            res["extra_peak_vs_candidate_sets"] = res["extra_peak_mb"] / out["candidate_set_mb"]
            out["memory"][c] = res
    return out


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", choices=("parity", "perf"), default=None)
    parser.add_argument("--parity-rows", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=1_000_000, help="perf rows")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-RSS children")
    parser.add_argument(
        "--no-models", action="store_true", help="skip the timed DR and OffCEM calls (minutes)"
    )
    parser.add_argument("--obp-python", default=be.DEFAULT_OBP_PYTHON)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result: dict[str, Any] = {"quick": args.quick}
    if args.only in (None, "parity"):
        result["parity"] = bench_parity(
            args.obp_python, n=2_000 if args.quick else args.parity_rows
        )
    if args.only in (None, "perf"):
        result["perf"] = bench_perf(
            20_000 if args.quick else args.rows,
            n_items=2_000 if args.quick else args.items,
            n_candidates=20 if args.quick else args.candidates,
            rounds=args.rounds,
            memory=not args.no_memory,
            models=not args.no_models,
        )
    result["total_seconds"] = time.perf_counter() - started
    path = write_result(NAME + ("_quick" if args.quick else ""), result, out=args.out)
    print(report(result))
    print(f"wrote {path}")
    return result


def report(res: dict[str, Any]) -> str:
    """The headline figures as text."""
    lines: list[str] = []
    par = res.get("parity")
    if par:
        obp = par["obp"]
        who = f"obp {obp['obp']}" if "obp" in obp else f"obp {obp}"
        lines.append(
            f"parity (n = {par['rows']:,}, K = {par['actions']}, {par['categories']} categories, "
            f"{who}): {'agree' if par['agree'] else 'DISAGREE'} to {par['rtol']:g} relative"
        )
        for name, case in par["cases"].items():
            worst = max(
                (d.get("rel", d.get("max_rel", 0.0)), k)
                for k, d in case["differences"].items()
                if k not in case["not_comparable"]
            )
            lines.append(f"  {name}: worst comparable rel diff {worst[0]:.1e} ({worst[1]})")
            for k in case["not_comparable"]:
                d = case["differences"][k]
                lines.append(f"    not comparable (definitions differ): {k} rel {d['rel']:.1e}")
    perf = res.get("perf")
    if perf:
        lines.append(
            f"perf (n = {perf['rows']:,}, {perf['items']:,} items, {perf['candidates']} candidates, "
            f"{len(perf['policies'])} policies; candidate-set columns {perf['candidate_set_mb']:.0f} MB)"
        )
        for c, s in perf["timings"].items():
            lines.append(
                f"  {c:<9} wall {s['median_s'] * 1e3:9.1f} ms  cpu "
                f"{perf['cpu_timings'][c]['median_s'] * 1e3:9.1f} ms"
            )
        for c, sec in perf.get("model_seconds", {}).items():
            lines.append(f"  {c:<9} one call {sec:8.2f} s (reward model fitted, cross-fitted)")
        for key, r in perf["ratios"].items():
            lines.append(
                f"  {key:<17} {r['ratio']:8.2f}x wall (per round {r['paired_min']:.2f}-"
                f"{r['paired_max']:.2f})"
            )
        for key, r in perf["cpu_ratios"].items():
            lines.append(f"  {key:<17} {r['ratio']:8.2f}x cpu")
        lines.append(
            f"  target MIPS <= {perf['target_mips_vs_ips']:g}x IPS: "
            f"{'met' if perf['target_met'] else 'NOT met'}"
        )
        lines.append(
            f"  numpy MIPS vs ope MIPS: max rel diff {perf['numpy_mips_max_rel_diff']:.1e}"
        )
        for c, m in perf.get("memory", {}).items():
            lines.append(
                f"  peak RSS {c:<9} +{m['extra_peak_mb']:.0f} MB "
                f"({m['extra_peak_vs_candidate_sets']:.2f}x the candidate-set columns)"
            )
        lines.append(
            f"  MIPS profile (ope functions, self time; total {perf['profile']['total_ms']:.0f} ms):"
        )
        for row in perf["profile"]["by_self"][:8]:
            lines.append(f"    {row['self_ms']:8.1f} ms  {row['where']}")
        lines.append(
            "  compiled callees (numpy, scipy, pyarrow) by own time, with their ope callers:"
        )
        for row in perf["profile"]["other_by_self"][:6]:
            lines.append(
                f"    {row['self_ms']:8.1f} ms  {row['what']} <- {', '.join(row['called_from'])}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
