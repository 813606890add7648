"""ope.evaluate_slates, SlateEvaluation, plackett_luce_from_table, candidate columns in slate
logs, ``ope slates`` and the report's section on slates."""

from __future__ import annotations

import io
import json
import math
import warnings
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ope
from ope.exceptions import EstimationError, ParameterError, ValidationError
from ope.simulate import SlateEnvironment
from ope.slate_evaluation import SLATE_ESTIMATOR_NAMES, evaluate_slates
from ope.slates import (
    SLATE_INTERVAL_ADVICE,
    CascadeDR,
    CascadeIPS,
    IndependentIPS,
    PlackettLuce,
    SlateIPS,
    SlateProbabilities,
    logging_estimate,
    plackett_luce_from_table,
    slate_logs,
    slate_probabilities,
)

pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")


@pytest.fixture(scope="module")
def env():
    return SlateEnvironment(click_model="cascade", seed=1)


@pytest.fixture(scope="module")
def table(env):
    return env.sample(2000, rng=0)


def _scores_table(policy: PlackettLuce) -> pa.Table:
    scores = policy._logits  # the test builds the table the CLI reads from a known policy
    c, m = scores.shape
    return pa.table(
        {
            "context": np.repeat(np.arange(c), m),
            "item": np.tile(np.arange(m), c),
            "score": scores.ravel(),
        }
    )


def test_cli_choices_are_the_estimator_names():
    from ope.cli import SLATE_ESTIMATOR_CHOICES

    assert SLATE_ESTIMATOR_CHOICES == SLATE_ESTIMATOR_NAMES


def test_each_estimate_is_the_estimator_s_own_and_the_logger_is_the_mean_slate_reward(env, table):
    cands = {p: env.policy(p) for p in env.candidate_policies}
    ev = evaluate_slates(table, cands)
    assert ev.estimators == ["sips", "rips", "cdr", "iips"]
    assert ev.policies == list(env.candidate_policies) and not ev.unavailable
    logs = slate_logs(table)
    for name, pol in cands.items():
        for est, key in (
            (SlateIPS(), "sips"),
            (CascadeIPS(), "rips"),
            (CascadeDR(), "cdr"),
            (IndependentIPS(), "iips"),
        ):
            assert ev[name, key].value == pytest.approx(est.estimate(logs, pol).value, rel=1e-12)
    assert ev.logging.value == pytest.approx(logs.reward.sum(axis=1).mean(), rel=1e-12)
    # a paired difference is the difference of the two estimates, its error that of the slates
    d = ev.compare("greedy", estimator="rips")
    assert d.value == pytest.approx(ev["greedy", "rips"].value - ev.logging.value, rel=1e-12)
    terms = CascadeIPS().estimate(logs, cands["greedy"])  # per-slate terms of the difference
    w = slate_probabilities(cands["greedy"], logs).prefix / logs.prefix_propensity
    diff = (w * logs.reward).sum(axis=1) - logs.reward.sum(axis=1)
    assert d.std_error == pytest.approx(diff.std(ddof=1) / math.sqrt(logs.n), rel=1e-10)
    assert terms.value == pytest.approx(ev["greedy", "rips"].value)
    table_ = ev.comparisons()
    assert len(table_) == 12 and set(table_["estimator"]) == set(ev.estimators)
    with pytest.raises(KeyError, match="no estimate"):
        ev["greedy", "pi"]


def test_candidate_columns_in_the_logs_give_the_policy_s_estimates(env, table):
    logs = slate_logs(table)
    pol = env.policy("greedy")
    probs = slate_probabilities(pol, logs)
    # long layout: the logs' rows are in slate order, slot by slot
    order = np.argsort(np.asarray(table["slate_id"]), kind="stable")
    assert np.array_equal(np.asarray(table["slate_id"])[order], np.repeat(logs.slate_id, 3))
    long = table.to_pandas()
    long.loc[order, "target__g"] = probs.with_marginals().marginal.ravel()
    long.loc[order, "target_prefix__g"] = probs.prefix.ravel()
    long.loc[order, "target_slate__g"] = np.repeat(probs.slate, 3)
    read = slate_logs(long)
    assert list(read.candidates) == ["g"]
    np.testing.assert_allclose(read.candidates["g"].prefix, probs.prefix, rtol=1e-15)
    ev = evaluate_slates(long, {"pol": pol}, estimators=["sips", "rips", "iips"])
    for e in ("sips", "rips", "iips"):
        assert ev["g", e].value == pytest.approx(ev["pol", e].value, rel=1e-12)
    # list layout: one row per slate, per-slot lists and one slate probability
    lists = pd.DataFrame(
        {
            "slate_id": logs.slate_id,
            "item": list(logs.item),
            "reward": list(logs.reward),
            "prefix_propensity": list(logs.prefix_propensity),
            "target_prefix__g": list(probs.prefix),
        }
    )
    ev2 = evaluate_slates(lists)
    assert ev2.estimators == ["sips", "rips"]  # the full prefix is the slate
    assert ev2["g", "rips"].value == pytest.approx(ev["pol", "rips"].value, rel=1e-12)
    assert ev2["g", "sips"].value == pytest.approx(ev["pol", "sips"].value, rel=1e-12)


def test_candidate_columns_are_checked():
    base = {
        "slate_id": [0, 0, 1, 1],
        "position": [0, 1, 0, 1],
        "item": [0, 1, 1, 0],
        "reward": [1.0, 0.0, 0.0, 1.0],
        "prefix_propensity": [0.5, 0.25, 0.5, 0.25],
    }
    with pytest.raises(ValidationError, match="target_prefix__c"):
        slate_logs({**base, "target_prefix__c": [0.5, 1.5, 0.5, 0.2]})
    with pytest.raises(ValidationError, match="target_slate__c"):  # changes within a slate
        slate_logs({**base, "target_slate__c": [0.5, 0.4, 0.5, 0.5]})
    with pytest.raises(ope.SchemaError, match="names no candidate"):
        slate_logs({**base, "target__": [0.5, 0.5, 0.5, 0.5]})
    with pytest.raises(ParameterError, match="also a candidate"):
        evaluate_slates(
            {**base, "target_prefix__c": [0.5, 0.2, 0.5, 0.2]},
            {"c": SlateProbabilities(prefix=[[0.5, 0.2], [0.5, 0.2]])},
        )
    with pytest.raises(ParameterError, match="no candidate"):
        evaluate_slates(base)


def test_an_estimator_a_candidate_cannot_serve_is_listed_and_the_others_run(env, table):
    logs = slate_logs(table)
    probs = slate_probabilities(env.policy("greedy"), logs)
    marginal_only = SlateProbabilities(marginal=probs.with_marginals().marginal)
    ev = evaluate_slates(
        logs, {"marg": marginal_only, "pl": env.policy("greedy")}, estimators=["sips", "iips"]
    )
    assert set(ev.estimates) == {("marg", "iips"), ("pl", "sips"), ("pl", "iips")}
    assert "slate probabilities" in ev.unavailable[("marg", "sips")]
    assert "not estimated: marg, sips" in ev.summary()
    doc = ev.to_dict()
    assert doc["unavailable"][0]["policy"] == "marg" and doc["kind"] == "slates"
    assert set(doc["assumptions"]) == {"sips", "iips"}
    json.dumps(doc, allow_nan=True)
    # by default, Cascade-DR's table model runs only for a SlatePolicy candidate; the full
    # prefix serves slate IPS
    prefix_only = SlateProbabilities(prefix=probs.prefix)
    ev = evaluate_slates(logs, {"prefix": prefix_only})
    assert ev.estimators == ["sips", "rips"]
    assert ev["prefix", "sips"].value == pytest.approx(
        SlateIPS().estimate(logs, env.policy("greedy")).value, rel=1e-12
    )
    with pytest.raises(EstimationError, match="marg, rips"):
        evaluate_slates(logs, {"marg": marginal_only}, estimators=["rips"])


def test_pseudoinverse_and_self_normalized_forms(env, table):
    cands = {"greedy": env.policy("greedy")}
    ev = evaluate_slates(
        table, cands, logging=env.policy("logging"), estimators=["pi", "snpi", "snrips"]
    )
    logs = slate_logs(table)
    from ope.slates import PseudoInverse

    want = PseudoInverse().estimate(logs, cands["greedy"], logging=env.policy("logging")).value
    assert ev["greedy", "pi"].value == pytest.approx(want, rel=1e-12)
    want = CascadeIPS(self_normalized=True).estimate(logs, cands["greedy"]).value
    assert ev["greedy", "snrips"].value == pytest.approx(want, rel=1e-12)
    without = evaluate_slates(table, cands, estimators=["pi", "rips"])
    assert "product_logging" in without.unavailable[("greedy", "pi")]


def test_large_catalog_scores_table_and_monte_carlo_marginals():
    rng = np.random.default_rng(0)
    m, size, n = 14, 5, 600
    logger = PlackettLuce(rng.normal(size=(2, m)), size)
    ctx = rng.integers(0, 2, n)
    item = logger.sample(ctx, rng=rng)
    logs = slate_logs(
        {
            "slate_id": np.arange(n),
            "item": list(item),
            "reward": list((rng.random((n, size)) < 0.2).astype(float)),
            "prefix_propensity": list(logger.prefix_probabilities(ctx, item)),
            "context": ctx,
        }
    )
    scores = rng.normal(size=(2, m))
    cand = plackett_luce_from_table(
        {
            "context": np.repeat([0, 1], m),
            "item": np.tile(np.arange(m), 2),
            "score": scores.ravel(),
        },
        size,
    )
    assert cand.n_slates == 240240 and cand.n_contexts == 2
    np.testing.assert_array_equal(cand._logits, PlackettLuce(scores, size)._logits)
    ev = evaluate_slates(logs, {"pl": cand}, estimators=["rips", "cdr"], ci="bootstrap")
    assert ev["pl", "rips"].ci_method == "bootstrap" and not ev.fallback_estimators
    assert ev.overlap["marginal_ess"].isna().all()  # marginals deferred: never drawn for rips
    # independent IPS needs the marginals of 240,240 slates: Monte Carlo, whose error is not in
    # the rows, so the bootstrap gives way to the normal interval, and a note says so
    small = PlackettLuce(scores, size, n_samples=2000, rng=0)
    logger_mc = PlackettLuce(logger._logits, size, n_samples=2000, rng=1)
    ev = evaluate_slates(
        logs, {"pl": small}, logging=logger_mc, estimators=["iips"], ci="bootstrap"
    )
    assert ev.fallback_estimators == ("iips",) and ev["pl", "iips"].ci_method == "normal"
    assert any("bootstrap does not apply to iips" in note for note in ev.notes)
    assert ev.overlap["marginal_ess"].notna().all()


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({"item": [0, 1], "score": [0.0, 1.0], "context": [0, 1]}, "give every item"),
        ({"item": [0, 0, 0, 1], "score": [0.0] * 4, "context": [0, 0, 1, 1]}, "twice"),
        ({"item": [-1, 0], "score": [0.0, 1.0]}, "count from 0"),
        ({"item": [0, 1], "score": [0.0, np.inf]}, "score"),
    ],
)
def test_scores_table_errors(table, match):
    with pytest.raises((ValidationError, ParameterError), match=match):
        plackett_luce_from_table(table, 1)


def test_logging_estimate_is_row_backed(env, table):
    logs = slate_logs(table)
    lg = logging_estimate(logs)
    assert lg.estimator == "logging" and lg.ess == pytest.approx(logs.n)
    assert lg.ci(0.9, "bootstrap", rng=0).low < lg.value


def _run(*argv):
    from ope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), redirect_stdout(out), redirect_stderr(err):
        warnings.simplefilter("ignore")
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def test_cli_scores_report_and_escaped_names(env, table, tmp_path):
    logs = slate_logs(table)
    order = np.argsort(np.asarray(table["slate_id"]), kind="stable")
    frame = table.to_pandas()
    hostile = "<b>x</b>"
    frame.loc[order, f"target_prefix__{hostile}"] = slate_probabilities(
        env.policy("similar"), logs
    ).prefix.ravel()
    path = tmp_path / "slates.parquet"
    frame.to_parquet(path)
    scores = tmp_path / "greedy.csv"
    _scores_table(env.policy("greedy")).to_pandas().to_csv(scores, index=False)
    report = tmp_path / "r.html"
    code, out, err = _run(
        "slates", path, "--scores", f"greedy={scores}", "--report", report, "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ok"] and doc["kind"] == "slates" and doc["report"] == str(report)
    values = {(r["policy"], r["estimator"]): r["value"] for r in doc["estimates"]}
    direct = CascadeDR().estimate(logs, env.policy("greedy")).value
    assert values[("greedy", "cdr")] == pytest.approx(direct, rel=1e-12)
    assert (hostile, "rips") in values and (hostile, "iips") not in values
    page = report.read_text(encoding="utf-8")
    assert 'id="slates"' in page and "Not estimated, and why" in page
    assert hostile not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "logged slate" in page
    # the report is not overwritten without --force, and the scores file is an input
    code, _, err = _run("slates", path, "--scores", f"greedy={scores}", "--report", report)
    assert code != 0 and "--force" in err
    code, _, err = _run("slates", path, "--scores", f"greedy={scores}", "--report", scores)
    assert code != 0 and "--scores" in err
    code, _, err = _run("slates", path, "--scores", f"g={scores}", "--scores", f"g={scores}")
    assert code != 0 and "named twice" in err


def test_report_refuses_mixed_inputs(env, table):
    from ope.report import render_report

    ev = evaluate_slates(table, {"greedy": env.policy("greedy")}, estimators=["rips"])
    other = evaluate_slates(table, {"greedy": env.policy("greedy")}, estimators=["rips"])
    with pytest.raises(ParameterError, match="disagree"):
        render_report(slates=ev, evaluation=other)
    with pytest.raises(ParameterError, match="ope.evaluate_slates"):
        render_report(slates=object())
    page = render_report(slates=ev)
    assert "Slates: what each estimator assumes" in page and "rips" in page


def test_cascade_dr_and_cascade_ips_cover_the_truth(env):
    """Over 400 replications of 1,000 slates under cascade clicks, the normal intervals of
    cascade IPS and Cascade-DR from evaluate_slates cover the exact value (0.90-0.98), and
    Cascade-DR's spread is smaller."""
    truth = env.true_value("greedy")
    hits = {"rips": 0, "cdr": 0}
    values: dict[str, list[float]] = {"rips": [], "cdr": []}
    for rep in range(400):
        ev = evaluate_slates(
            env.sample(1000, rng=rep), {"g": env.policy("greedy")}, estimators=["rips", "cdr"]
        )
        for e in hits:
            est = ev["g", e]
            hits[e] += est.ci_low <= truth <= est.ci_high
            values[e].append(est.value)
    for e in hits:
        assert 0.91 <= hits[e] / 400 <= 0.98, (e, hits[e])
    assert np.std(values["cdr"]) < np.std(values["rips"])


def test_review_edges_of_slate_logs_and_evaluations(env, table):
    logs = slate_logs(table)
    with pytest.raises(ValidationError, match="at least 2"):
        evaluate_slates(table.slice(0, 3), {"g": env.policy("greedy")})
    ev = evaluate_slates(table, {"g": env.policy("greedy")}, confidence_level=np.float32(0.9))
    assert ev.confidence_level == pytest.approx(0.9)
    # a candidate's columns get the logger's consistency checks, with the input's row
    frame = table.to_pandas()
    order = np.argsort(frame["slate_id"].to_numpy(), kind="stable")
    rising = np.tile([0.01, 0.9, 0.5], logs.n)
    with pytest.raises(ValidationError, match="target_prefix__bad` must not increase"):
        slate_logs(frame.assign(target_prefix__bad=rising[np.argsort(order)]))
    bad = frame["prefix_propensity"].to_numpy().copy()
    bad[7] = 1.5
    with pytest.raises(ValidationError, match=r"first at row 7: 1\.5"):
        slate_logs(frame.assign(target_prefix__c=bad))
    with pytest.raises(ValidationError, match="contradicts `target_slate__k`"):
        slate_logs(frame.assign(target_prefix__k=frame["prefix_propensity"], target_slate__k=0.9))


def test_cli_scores_tables_without_context_and_errors_naming_the_file(env, table, tmp_path):
    path = tmp_path / "slates.parquet"
    pq.write_table(table, path)
    scores = _scores_table(env.policy("greedy")).to_pandas()
    flat = tmp_path / "flat.csv"  # one score per item: the same ranking in every context
    scores[scores["context"] == 0].drop(columns="context").to_csv(flat, index=False)
    code, out, err = _run("slates", path, "--scores", f"flat={flat}", "--json")
    assert code == 0, err
    nocontext = tmp_path / "nocontext.parquet"
    pq.write_table(table.drop_columns(["context"]), nocontext)
    code, out, err = _run("slates", nocontext, "--scores", f"flat={flat}", "--json")
    assert code == 0, err
    per_context = tmp_path / "per_context.csv"
    scores.to_csv(per_context, index=False)
    code, out, err = _run("slates", nocontext, "--scores", f"g={per_context}", "--json")
    doc = json.loads(out)
    assert code == 65 and "no 'context' column" in doc["error"]["message"]
    assert "--obd-context" not in out
    few = tmp_path / "few.csv"
    scores[scores["item"] < 2].to_csv(few, index=False)
    code, out, err = _run("slates", path, "--scores", f"few={few}", "--json")
    doc = json.loads(out)
    assert code == 65 and doc["error"]["message"].startswith(f"--scores few={few}")
    frac = tmp_path / "frac.csv"
    scores.assign(item=scores["item"] + 0.5).to_csv(frac, index=False)
    code, out, err = _run("slates", path, "--scores", f"x={frac}", "--json")
    assert code == 65 and f"--scores x={frac}" in json.loads(out)["error"]["message"]
    code, out, err = _run("slates", path, "--json")
    assert code == 65 and "--scores NAME=FILE" in json.loads(out)["error"]["message"]
    code, out, err = _run("slates", path, "--scores", f"g={flat}", "--policy", "nope", "--json")
    assert code == 2 and json.loads(out)["error"]["flag"] == "--policy"
    code, out, err = _run("slates", path, "--position-base", "1", "--scores", f"g={flat}")
    assert code == 65 and "--position-base 0" in err


def test_report_notes_once_and_candidates_left_out_of_pairs(env, table):
    from ope.report import render_report

    logs = slate_logs(table)
    probs = slate_probabilities(env.policy("similar"), logs)
    ev = evaluate_slates(
        logs,
        {
            "g": env.policy("greedy"),
            "m": SlateProbabilities(marginal=probs.with_marginals().marginal),
            "s": SlateProbabilities(slate=probs.slate),
        },
        estimators=["sips", "iips"],
    )
    page = render_report(slates=ev)
    notes = page[page.index('id="notes"') :]
    assert notes.count("reward-interaction") == 0  # rips was not asked for
    assert notes.count("independent (item-position) IPS, Li et al. 2018") <= 2  # g and m
    assert "Not in these pairs (no sips estimate): m" in page
    # the bandit-only sections say what they are for, not how to add bandit diagnostics
    assert "this report is of slates" in page and "ope.diagnose(logs, by=" not in page


def test_only_the_chosen_candidates_columns_are_read(env, table, tmp_path):
    """A candidate not asked for is neither read nor checked: its broken column does not stop
    the evaluation of the others (API and command line)."""
    frame = table.to_pandas()
    frame["target_prefix__ok"] = frame["prefix_propensity"]
    frame["target_prefix__broken"] = 1.5
    with pytest.raises(ValidationError, match="target_prefix__broken"):
        evaluate_slates(frame)
    ev = evaluate_slates(frame, policies=["ok"])
    assert ev.policies == ["ok"] and ev["ok", "rips"].value == pytest.approx(ev.logging.value)
    path = tmp_path / "slates.parquet"
    frame.to_parquet(path)
    code, out, err = _run("slates", path, "--policy", "ok", "--json")
    assert code == 0, err
    code, out, err = _run("slates", path, "--policy", "nope", "--json")
    doc = json.loads(out)
    assert code == 2 and "'ok', 'broken'" in doc["error"]["message"]


# ------------------------------------------------------------------------------------------
# the notes advise only the intervals the slate estimates offer
# ------------------------------------------------------------------------------------------
#: What the bandit estimators' notes advise and the slate estimates do not offer.
_NOT_OFFERED = (
    "betting",
    "bernstein",
    "empirical_likelihood",
    "empirical likelihood",
    "ci(method=",
    "bounded interval",
    "clipping",
    "IPS or SNIPS",
)

#: The rules whose notes give advice on intervals.
_ADVISING = ("small_sample", "few_effective_rows", "low_ess", "skewed_terms")


def _advice_cases(env):
    """Slate evaluations whose notes give interval advice: 20 slates (few slates, few
    effective slates), 1,000 slates with a candidate whose slate weights are 1e-6 but on 5
    slates (a low effective sample, few effective slates), and the same slates with weights
    10 on 1 % of them and 1 elsewhere (skewed terms alone)."""
    small = evaluate_slates(env.sample(20, rng=0), {"greedy": env.policy("greedy")})
    logs = slate_logs(env.sample(1000, rng=0))
    w = np.full(logs.n, 1e-6)
    w[:5] = 1.0
    narrow = SlateProbabilities(slate=w * logs.logging_probabilities().slate)
    w = np.ones(logs.n)
    w[:10] = 10.0
    skewed = SlateProbabilities(slate=np.minimum(w * logs.logging_probabilities().slate, 1.0))
    return [
        small,
        evaluate_slates(logs, {"narrow": narrow}),
        evaluate_slates(logs, {"skewed": skewed}),
    ]


def _offered_only(note: str) -> bool:
    return not any(x in note for x in _NOT_OFFERED)


def test_slate_notes_advise_only_the_intervals_slate_estimates_offer(env):
    """Every advising note of a slate estimate (and of the logger's) says that no slate
    interval holds at any n, and names none of the bandit estimators' bounded intervals, which
    the slate estimates refuse."""
    advice = SLATE_INTERVAL_ADVICE[1:]  # a sentence of its own in some notes
    seen = set()
    cases = _advice_cases(env)
    for ev in cases:
        for est in [*ev.estimates.values(), ev.logging]:
            rules = {getattr(note, "rule", None) for note in est.notes}
            # the skewed-terms note is not given after one that says the same (few slates, a
            # low or few effective slates): the advice once per estimate
            assert not ("skewed_terms" in rules and rules & set(_ADVISING[:3])), rules
            for note in est.notes:
                rule = getattr(note, "rule", None)
                if rule in _ADVISING:
                    seen.add(rule)
                    assert advice in note, note
                assert _offered_only(note), note
        assert all(_offered_only(note) for note in ev.notes)
        assert any(advice in note for note in ev.notes)
        assert all(_offered_only(line) for line in ev.summary().splitlines())
    assert seen == set(_ADVISING)
    est = cases[0]["greedy", "sips"]
    for method in ("betting", "bernstein", "empirical_likelihood"):
        with pytest.raises(EstimationError, match="available methods: normal, t, bootstrap"):
            est.ci(method=method)
    from ope.report import render_report

    page = render_report(slates=cases[1])
    notes = page[page.index('id="notes"') :]
    assert advice in notes and "betting" not in notes and "ci(method=" not in notes


def test_slate_bootstrap_error_advises_the_intervals_slate_estimates_offer():
    """A slate estimate whose bootstrap resamples are mostly undefined (the candidate puts
    weight on one logged slate) advises normal or t intervals, not the bandit estimators'
    bounded ones, which it refuses."""
    logs = slate_logs(SlateEnvironment(seed=0).sample(60, rng=0))
    first = np.zeros(logs.n)
    first[0] = 1.0  # the candidate shares the first slate with the logger, and no other
    shared = SlateProbabilities(slate=first * logs.logging_probabilities().slate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = evaluate_slates(logs, {"c": shared}, estimators=("snsips",))["c", "snsips"]
    with pytest.raises(EstimationError, match="undefined estimate") as info:
        est.ci(method="bootstrap", rng=0)
    message = str(info.value)
    assert "ci(method='normal' or 't')" in message
    assert "betting" not in message and "bernstein" not in message


def test_cli_slate_notes_advise_only_the_intervals_slate_estimates_offer(env, tmp_path):
    path = tmp_path / "slates.parquet"
    pq.write_table(env.sample(20, rng=0), path)
    scores = tmp_path / "greedy.csv"
    _scores_table(env.policy("greedy")).to_pandas().to_csv(scores, index=False)
    code, out, err = _run("slates", path, "--scores", f"greedy={scores}", "--json")
    assert code == 0, err
    doc = json.loads(out)
    advice = SLATE_INTERVAL_ADVICE[1:]
    assert any(advice in note for note in doc["notes"])
    assert any(advice in w["message"] for w in doc["warnings"])
    assert _offered_only(out) and "--ci betting" not in out
    code, out, err = _run("slates", path, "--scores", f"greedy={scores}")
    assert (
        code == 0
        and advice in " ".join(out.split())
        and _offered_only(" ".join((out + err).split()))
    )
    # --ci takes only what the slate estimates offer
    code, _, err = _run("slates", path, "--scores", f"greedy={scores}", "--ci", "betting")
    assert code == 2 and "--ci" in err


def test_bandit_estimators_keep_their_bounded_interval_advice():
    """The bandit estimators (which offer them) still name betting and Bernstein."""
    import ope.estimators as oe

    rng = np.random.default_rng(0)
    reward = rng.random(200)
    logging_p = np.full(200, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = oe.IPS().estimate(reward[:20], logging_p[:20], np.full(20, 0.5))
        few = oe.IPS().estimate(reward, logging_p, np.where(np.arange(200) < 10, 1.0, 0.0))
        a = rng.integers(0, 10, 400)  # rare rewards under moderate weights: skewed terms
        skewed = oe.IPS().estimate(
            (rng.random(400) < 0.02).astype(float),
            np.full(400, 0.1),
            np.where(a == 0, 0.4, 0.6 / 9),
        )

    def advice(est, rule):
        (note,) = (x for x in est.notes if getattr(x, "rule", None) == rule)
        return note

    assert "prefer bernstein or betting intervals" in advice(small, "small_sample")
    assert "Use ci(method='betting')" in advice(few, "few_effective_rows")
    assert "Use ci(method='betting')" in advice(skewed, "skewed_terms")
    assert SLATE_INTERVAL_ADVICE[1:] not in " ".join([*small.notes, *few.notes, *skewed.notes])


def _same_as_logger(n: int = 300) -> pd.DataFrame:
    """Cascade slate logs with a candidate `same` that is the logger (its columns copied)."""
    t = SlateEnvironment(click_model="cascade", seed=1).sample(n, rng=0).to_pandas()
    return t.assign(
        target__same=t.propensity,
        target_prefix__same=t.prefix_propensity,
        target_slate__same=t.slate_propensity,
    )


def _logged_times(s: pd.DataFrame, k: float) -> pd.DataFrame:
    """The slate logs with the logger's three probabilities times ``k``."""
    return s.assign(
        propensity=s.propensity * k,
        prefix_propensity=s.prefix_propensity * k,
        slate_propensity=s.slate_propensity * k,
    )


def test_slate_weights_that_cannot_average_to_one_warn_and_overflowing_ones_are_named():
    """The bandit estimators' mean-weight check, at the worst slot: propensities logged 1e100
    times too small gave 7e99 for rewards in [0, 3] with no warning, a candidate with 3x the
    logger's probabilities 2.21; weights past 1e150 are named by slate and slot (the error
    blamed the rewards, with numpy's raw overflow warning)."""
    s = _same_as_logger()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ope.exceptions.OverlapWarning)  # the logger itself: none
        evaluate_slates(s)
    small = _logged_times(s, 1e-100)
    with pytest.warns(
        ope.exceptions.OverlapWarning, match=r"slot \d: mean importance weight is 1e\+100"
    ):
        ev = evaluate_slates(small)
    assert all(any("mean importance weight" in n for n in e.notes) for e in ev.estimates.values())
    thrice = s.assign(
        target__same=np.minimum(3 * s.propensity, 1.0),
        target_prefix__same=np.minimum(3 * s.prefix_propensity, 1.0),
        target_slate__same=np.minimum(3 * s.slate_propensity, 1.0),
    )
    with pytest.warns(ope.exceptions.OverlapWarning, match="mean importance weight is 3"):
        evaluate_slates(thrice)
    tiny = _logged_times(s, 1e-200)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(
            ValidationError, match=r"slate 0 \(0-based\), slot 0 has weight 1e\+200"
        ):
            evaluate_slates(tiny)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")
def test_slate_estimates_scale_with_tiny_rewards_and_unknown_policies_are_named():
    """Rewards times 1e-170 (or 1e-300) give the estimates and standard errors times that
    (the squares underflowed: standard error 0, an interval of width 0); a policy asked for
    that the logs do not have is named with those they have ("no candidate" before)."""
    s = _same_as_logger()
    ref = evaluate_slates(s).table()
    for scale in (1e-170, 1e-300):
        got = evaluate_slates(s.assign(reward=s.reward * scale)).table()
        np.testing.assert_allclose(got["value"] / scale, ref["value"], rtol=1e-12)
        np.testing.assert_allclose(got["std_error"] / scale, ref["std_error"], rtol=1e-12)
    with pytest.raises(
        ope.exceptions.SchemaError, match="no candidate 'nope' in these logs; they have 'same'"
    ):
        evaluate_slates(s, policies=["nope"])
