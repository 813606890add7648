"""Golden tests of the text output: fixed inputs, exact expected text.

Widths (columns as wide as their widest cell), digits (a value to two significant digits of its
standard error, other numbers to four), each warning stated once, numbered and referenced from
its rows, the provenance block. The inputs are seeded; every golden text is also checked to be
unchanged when every number behind it moves by one part in 10^9 (``_stable``), so no printed
digit sits on a rounding boundary and the text does not depend on the machine's last bits.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

import ope
from ope._format import format_estimate
from ope.diagnostics import diagnose
from ope.results import Estimate, Provenance, ResultParts, make_estimate, render_html, render_text

#: relative move of every number under which a golden text must not change
NUDGE = 1e-9


@pytest.fixture(scope="module")
def click_logs() -> pd.DataFrame:
    """Click logs with rates near 0.5% (where four fixed decimals read 0.0046 vs 0.0048): a
    logger that almost never plays action 3, and three candidates, one with a long name."""
    rng = np.random.default_rng(23)
    n = 123_457
    p_log = np.array([0.495, 0.3, 0.2, 0.005])
    ctr = np.array([0.0040, 0.0045, 0.0050, 0.0060])
    action = rng.choice(4, size=n, p=p_log)
    reward = (rng.random(n) < ctr[action]).astype(float)
    return pd.DataFrame(
        {
            "action": action,
            "propensity": p_log[action],
            "reward": reward,
            "target__greedy_on_the_rarest_action": (action == 3).astype(float),
            "target__uniform": np.full(n, 0.25),
            "target__logging_copy": p_log[action],
        }
    )


@pytest.fixture(scope="module")
def evaluation(click_logs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ope.evaluate(click_logs, estimators=("ips", "snips"), reward_range=(0, 1))


def _nudge(x: float, factor: float) -> float:
    """``x * factor``, except whole numbers (weights of 200, an ESS of 593 rows of equal
    weight), which floating point holds exactly on every machine."""
    return x if float(x).is_integer() else x * factor


def _nudged(table: pd.DataFrame, factor: float) -> pd.DataFrame:
    out = table.copy()
    for c in out.columns:
        if out[c].dtype.kind == "f":
            out[c] = [_nudge(v, factor) for v in out[c]]
    return out


def _stable(parts: ResultParts) -> str:
    """The text of ``parts``, asserting it is the same with every table number nudged."""
    text = render_text(parts)
    for factor in (1 - NUDGE, 1 + NUDGE):
        nudged = dataclasses.replace(parts, table=_nudged(parts.table, factor))
        assert render_text(nudged) == text, "a printed digit sits on a rounding boundary"
    return text


def _stable_estimate(est: Estimate) -> str:
    text = est.summary()
    for factor in (1 - NUDGE, 1 + NUDGE):
        moved = dataclasses.replace(
            est,
            **{
                k: _nudge(getattr(est, k), factor)
                for k in ("value", "std_error", "ci_low", "ci_high", "ess")
            },
        )
        assert moved.summary() == text, "a printed digit sits on a rounding boundary"
    return text


def _evaluation_parts(ev) -> ResultParts:
    """An Evaluation through the shared renderer, built from its public API: the estimates'
    table, the logging value, the evaluation's notes and each estimate's notes on its row."""
    t = ev.table()
    low, high = ev.logging.ci(ev.confidence_level, ev.logging_ci_method)
    return ResultParts(
        title=(
            f"{len(ev.policies)} candidate policies x {len(ev.estimators)} estimators on "
            f"{ev.n:,} rows; {ev.ci_method} intervals at {ev.confidence_level:.0%}"
        ),
        fields=(
            (
                "logging policy (mean logged reward)",
                format_estimate(ev.logging.value, ev.logging.std_error, low, high),
            ),
        ),
        table=t[["policy", "estimator", "value", "std_error", "ci_low", "ci_high", "ess_ratio"]],
        notes=ev.notes,
        row_notes=[ev[(p, e)].notes for p, e in zip(t["policy"], t["estimator"])],
    )


EVALUATION = """\
3 candidate policies x 2 estimators on 123,457 rows; normal intervals at 95%
  logging policy (mean logged reward): 0.00433 [0.00397, 0.00470]

policy                       estimator    value  std_error   ci_low  ci_high  ess_ratio  notes
---------------------------  ---------  -------  ---------  -------  -------  ---------  -----
greedy_on_the_rarest_action  ips        0.00486    0.00281  0.00000  0.01036   0.004803  [1]
greedy_on_the_rarest_action  snips      0.00506    0.00291  0.00000  0.01077   0.004803  [1]
uniform                      ips        0.00454    0.00072  0.00313  0.00595    0.07758  [2]
uniform                      snips      0.00458    0.00072  0.00317  0.00600    0.07758  [3]
logging_copy                 ips        0.00433    0.00019  0.00397  0.00470      1.000
logging_copy                 snips      0.00433    0.00019  0.00397  0.00470      1.000

Notes:
  [1] effective sample size 593.0 is 0.48% of n=123457: the estimate rests on a few
      heavily weighted rows and normal intervals may undercover. Consider clipping, a
      doubly robust estimator, or a bounded interval method.
  [2] its normal and t intervals are likely too short (they cover the value less often
      than stated): the 123,457 rows it averages are skewed (sample skewness 189 of
      their influence terms), and the central limit theorem behind those intervals needs
      about 896,055 rows at this skew (28 + 25 x skewness^2). Use ci(method='betting')
      with an a priori reward_range, which holds at any n.
  [3] its normal and t intervals are likely too short (they cover the value less often
      than stated): the 123,457 rows it averages are skewed (sample skewness 189 of
      their IPS terms w r, which can be skewed while its own centred terms look
      symmetric), and the central limit theorem behind those intervals needs about
      896,055 rows at this skew (28 + 25 x skewness^2). Use ci(method='betting') with an
      a priori reward_range, which holds at any n."""


def test_evaluation_text(evaluation):
    # click rates differ in the fourth decimal: five decimals (two digits of the smallest
    # error, 0.00019); the ESS note of the greedy candidate is stated once for both rows; the
    # uniform candidate's terms rest on a few rare weighted clicks (skewness 189): one
    # short-interval note per estimator
    assert _stable(_evaluation_parts(evaluation)) == EVALUATION


def test_evaluation_html_shows_the_numbers_of_the_text(evaluation):
    page = render_html(_evaluation_parts(evaluation))
    for cell in ("0.00486", "0.00281", "0.01036", "0.004803", "[1]"):
        assert f">{cell}</td>" in page
    assert page.count("<li>") == 3


COMPARISON = """\
Estimate (ips - logging)
  estimator:       ips - logging
  policy:          greedy_on_the_rarest_action - logging
  value:           0.0005
  std_error:       0.0028
  95% CI (normal): [-0.0050, 0.0060]
  covers:          policy value
  n:               123,457
  ess:             593

Notes:
  [1] ips (greedy_on_the_rarest_action): effective sample size 593.0 is 0.48% of
      n=123457: the estimate rests on a few heavily weighted rows and normal intervals
      may undercover. Consider clipping, a doubly robust estimator, or a bounded
      interval method."""


def test_compare_text(evaluation):
    diff = evaluation.compare("greedy_on_the_rarest_action", "logging", estimator="ips")
    assert _stable_estimate(diff) == COMPARISON


DIAGNOSTICS = """\
Overlap diagnostics: 123,457 logged rows, 3 candidate policies

policy                           ess  ess_ratio  mean_weight  weight_max    ci_low   ci_high  coverage_share  verdict
---------------------------  -------  ---------  -----------  ----------  --------  --------  --------------  ----------------------------------------
greedy_on_the_rarest_action    593.0   0.004803       0.9607         200         0    0.2054          0.1915  change the logging policy's exploration
uniform                        9,578    0.07758       0.9909          50         0   0.05366          0.1697  collect more data under the same logging
logging_copy                 123,457      1.000        1.000           1  0.003642  0.005108               0  collect more data under the same logging

Notes:
  [1] greedy_on_the_rarest_action: effective sample size 593.0 is 0.48% of n=123457: the
      estimate rests on a few heavily weighted rows and normal intervals may undercover.
      Consider clipping, a doubly robust estimator, or a bounded interval method."""


def test_diagnostics_text(click_logs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = diagnose(ope.read_logs(click_logs), reward_range=(0, 1))
    columns = [
        "policy",
        "ess",
        "ess_ratio",
        "mean_weight",
        "weight_max",
        "ci_low",
        "ci_high",
        "coverage_share",
        "verdict",
    ]
    # no std_error column: each number to four significant digits, whole numbers whole
    assert _stable(ResultParts(d._title(), table=d.table()[columns], notes=d.notes)) == (
        DIAGNOSTICS
    )


ESTIMATE = """\
Estimate (snips)
  estimator:       snips
  policy:          a_policy_with_a_rather_long_name
  value:           0.00460
  std_error:       0.00012
  95% CI (normal): [0.00437, 0.00484]
  covers:          policy value
  n:               120,000
  ess:             80,512

Notes:
  [1] weights are heavy: consider clipping."""

PROVENANCE = """

Provenance:
  ope:     0.1.0
  seed:    2024
  options: ci=normal, reward_range=(0, 1)
  command: ope evaluate logs.parquet --seed 2024
  input:   logs.parquet (120,000 rows)"""


def _click_estimate() -> Estimate:
    return make_estimate(
        estimator="snips",
        value=0.0046031,
        std_error=0.000121,
        n=120_000,
        ess=80512.3,
        policy="a_policy_with_a_rather_long_name",
        # one warning in two wordings: stated once
        notes=("weights are heavy: consider clipping.", "Weights are  heavy: consider clipping"),
    )


def test_estimate_text():
    est = _click_estimate()
    assert _stable_estimate(est) == ESTIMATE  # an error of 0.00012 is not 0.0001
    assert repr(est) == (
        "Estimate('snips', policy='a_policy_with_a_rather_long_name', value=0.004603, "
        "std_error=0.000121, ci=[0.004366, 0.00484] (normal, 95%), n=120000, ess=80,512, "
        "notes=2)"
    )


def test_provenance_ends_the_text():
    est = _click_estimate().with_provenance(
        Provenance(
            options={"ci": "normal", "reward_range": (0, 1)},
            seed=2024,
            command="ope evaluate logs.parquet --seed 2024",
            input="logs.parquet",
            rows=120_000,
            ope_version="0.1.0",
        )
    )
    assert est.summary() == ESTIMATE + PROVENANCE
    assert est.to_dict()["provenance"] == {
        "ope_version": "0.1.0",
        "seed": 2024,
        "options": {"ci": "normal", "reward_range": [0, 1]},
        "command": "ope evaluate logs.parquet --seed 2024",
        "input": "logs.parquet",
        "rows": 120_000,
        "dependencies": {},
    }
