"""Every named threshold once, with the reason for its value, and the rules that read them.

The estimators, ``ope.evaluate``, the streamed and distributed paths, the diagnostics and the
learner all judge the same weights by the same rules, so the same data give the same notes from
every entry point: a rule is a function here (``mean_weight_check``, ``low_ess``, ...) and its
message text is written once (``ess_note``, ``mean_weight_note``, ``small_sample_note``).

Public thresholds are re-exported by the modules users know them from (``ope.estimators``,
``ope.diagnostics``); this module is their one definition.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:  # numpy-free at import: the CLI's parser reads the report's caps here
    from ope._format import Note

__all__ = [
    "MAX_REPORT_SEGMENTS",
    "MAX_FIGURE_CANDIDATES",
    "ESS_RATIO_WARN",
    "MEAN_WEIGHT_Z",
    "MEAN_WEIGHT_TOLERANCE",
    "MEAN_WEIGHT_ATOL",
    "SMALL_SAMPLE_ROWS",
    "MIN_ROWS",
    "PROBABILITY_TOLERANCE",
    "ESTIMATED_PROPENSITY_FLOOR",
    "DISAGREEMENT_RATIO",
    "DISAGREEMENT_Z",
    "SUPPORT_FLOOR",
    "UNSUPPORTED_MASS_WARN",
    "PROPENSITY_TOLERANCE",
    "GAP_MIN_MASS",
    "GAP_MIN_ESS",
    "GAP_MASS_DEFICIT",
    "GAP_UNSUPPORTED_SHARE",
    "COVERAGE_VERDICT_SHARE",
    "kish_ess",
    "low_ess",
    "mean_weight_check",
    "small_sample",
    "ess_note",
    "mean_weight_note",
    "small_sample_note",
]

# --------------------------------------------------------------------------------------------
# overlap and sample size (every weighting estimate)
# --------------------------------------------------------------------------------------------
#: Kish ESS below 1% of n: fewer than one row in a hundred effectively informs the estimate, so
#: its standard error is at least ten times that of an on-policy A/B test of the same size and
#: its normal interval is unreliable (in the KLM benchmark, Wald intervals covered 0.39 of the
#: time at ESS/n ~ 1%).
ESS_RATIO_WARN: Final = 0.01

#: Under correct propensities and full support E[w] = 1 exactly. A sample mean more than 4
#: standard errors away happens by chance with probability < 1e-4 (normal approximation; the
#: margin absorbs the slow convergence of the normal approximation for heavy-tailed weights),
#: so it signals a support gap (mean < 1) or wrong propensities, not noise ...
MEAN_WEIGHT_Z: Final = 4.0

#: ... and the deviation must also be practically large: 1% of the candidate's mass. A weighting
#: estimate is then biased by about that share of the reward's level; smaller deviations (e.g.
#: propensities rounded when stored, z large only because n is huge) are real but below what
#: the intervals of most logs resolve.
MEAN_WEIGHT_TOLERANCE: Final = 0.01

#: When every weight is equal (zero spread) their mean is compared with its expectation directly;
#: 1e-12 only absorbs the rounding of t / p (a few ulps).
MEAN_WEIGHT_ATOL: Final = 1e-12

#: Below 30 rows the central-limit approximation behind the normal and t intervals is
#: unreliable even for bounded rewards; bounded methods (bernstein, betting) stay valid.
SMALL_SAMPLE_ROWS: Final = 30

#: Rows needed for a standard error at all (a sample standard deviation needs n - 1 >= 1).
MIN_ROWS: Final = 2

#: Largest accepted ``|sum_a pi(a|x) - 1|`` for one row of a policy (a policy table, a simulator's
#: or a trajectory's policy), and largest accepted disagreement between a ``target__`` value and
#: its ``target_dist__`` entry. Probabilities stored as float32 carry a relative error of at most
#: 6e-8 each, so the absolute error of a row sum is below 6e-8 whatever the support size; 1e-6
#: leaves room for that and float64 round-off while still catching a dropped action or a
#: mis-scaled row (errors of 1e-3 and more in practice).
PROBABILITY_TOLERANCE: Final = 1e-6

# --------------------------------------------------------------------------------------------
# estimated propensities (ope.propensity)
# --------------------------------------------------------------------------------------------
#: Default floor of estimated propensities: a classifier's probability of 0.0003 for an action
#: the logger did take is mostly estimation error, and its weight (3,000x) would let one row
#: outweigh thousands; flooring at 1e-3 caps weights at 1,000 and every floored row is counted.
#: It is a guard, not a fix: with the default model it bound no row in 300 replications of
#: either design of benchmarks/bench_propensity.py (n = 2,000 and 10,000), while isotonic
#: calibration inside cross-fitting put 3.7 rows per replication on it (weights up to 833). A
#: higher floor would bias IPS wherever the logger's true propensities are below it.
ESTIMATED_PROPENSITY_FLOOR: Final = 1e-3

#: A logged and an estimated propensity "disagree" beyond a factor 1.5: a well-specified
#: classifier with a few hundred rows per action is typically within +-25 % of the truth, while a
#: logging bug (a wrong probability for an action, a stale policy version) is a factor 2 or more.
DISAGREEMENT_RATIO: Final = 1.5

#: An action or segment is flagged only when its mean log ratio also differs from 0 by more than
#: 4 standard errors, so that checking dozens of actions raises no false alarm by chance.
DISAGREEMENT_Z: Final = 4.0

# --------------------------------------------------------------------------------------------
# support and segments (diagnostics)
# --------------------------------------------------------------------------------------------
#: A logging probability at or below 1e-4 is treated as no support: one such row would carry a
#: weight of 10^4 times the candidate's probability and could dominate ten thousand other rows.
SUPPORT_FLOOR: Final = 1e-4

#: Warn when more than 1 % of the candidate's mass falls on (almost) unsupported actions: that
#: mass is invisible to every weighting estimator and biases it by up to 1 % of the reward range.
UNSUPPORTED_MASS_WARN: Final = 0.01

#: ``propensity`` and ``logging_distribution`` at the logged action may differ by rounding only.
PROPENSITY_TOLERANCE: Final = 1e-6

#: A segment matters only if it holds at least 2 % of the candidate's mass (or of the rows): a
#: gap there moves the value by at most 2 % of the reward range.
GAP_MIN_MASS: Final = 0.02

#: Fewer than 30 effective rows: the segment's contribution and its variance estimate rest on a
#: handful of rows (the usual rule of thumb for the normal approximation of a mean).
GAP_MIN_ESS: Final = 30.0

#: The weights of a segment recover less than 80 % of the candidate's mass there (expected 100 %
#: for a context segment under full support): the logger rarely or never takes those actions.
GAP_MASS_DEFICIT: Final = 0.2

#: More than 5 % of the candidate's mass in a segment falls on actions the logger gives at most
#: SUPPORT_FLOOR (needs ``logging_distribution``).
GAP_UNSUPPORTED_SHARE: Final = 0.05

#: Verdict rule: when the coverage (inner) part is at least half of the interval's width, more
#: logs of the same kind cannot halve the width, so the logging policy must explore more.
COVERAGE_VERDICT_SHARE: Final = 0.5


# --------------------------------------------------------------------------------------------
# the rules
# --------------------------------------------------------------------------------------------
def kish_ess(sum_w: float, sum_w2: float) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` (0 when every weight is 0)."""
    return float(sum_w * sum_w / sum_w2) if sum_w2 > 0 else 0.0


#: A segment chart, heatmap or table shows at most this many segments of one column: those
#: with the most rows; the others are summarized in one line ("k more segments, x% of rows:
#: ..."). Segments with a gap are still all listed under their candidate.
MAX_REPORT_SEGMENTS: Final = 25

#: At most this many candidates are drawn in full (by default; ``max_candidates`` of
#: :func:`ope.report.render_report` and ``--max-candidates`` of ``ope report`` change it):
#: the most telling ones (:func:`ope.report.views.ranked_candidates`) get rows in the summary figures (forest
#: plot, paired differences, outer/inner split, per-segment estimates), a panel in the weight
#: histograms and coverage heatmaps, and their facts; the others are summarized in a table.
#: Every candidate is in the tables of estimates and differences.
MAX_FIGURE_CANDIDATES: Final = 12


def low_ess(ess: float, n: int) -> bool:
    """True when the effective sample is below :data:`ESS_RATIO_WARN` of the rows."""
    return ess < ESS_RATIO_WARN * n


def small_sample(n: int) -> bool:
    """True below :data:`SMALL_SAMPLE_ROWS` rows."""
    return n < SMALL_SAMPLE_ROWS


#: A weights' standard deviation at most this many units of roundoff of their mean is read as
#: 0 by :func:`mean_weight_check` (equal weights whose variance the blocks' sums left at
#: 1e-32 gave "3.56e+15 standard errors" instead of "every weight is equal").
_EQUAL_WEIGHTS_ULPS: Final = 64.0
_EPS: Final = sys.float_info.epsilon


def mean_weight_check(
    n: int, mean_w: float, var_w: float, *, expected: float = 1.0
) -> tuple[Literal["ok", "low", "high"], float]:
    """Is the mean importance weight consistent with its expectation (1 under full support)?

    Returns the verdict (``"ok"``, ``"low"``: a support gap or propensities too large,
    ``"high"``: propensities too small or candidate probabilities that do not sum to one) and
    the z-score of the deviation. Flagged when the deviation is both statistically clear
    (``|z| > MEAN_WEIGHT_Z``) and practically large (``> MEAN_WEIGHT_TOLERANCE``).
    """
    dev = mean_w - expected
    sd = math.sqrt(max(var_w, 0.0))
    # a spread within rounding of the mean (equal weights summed in blocks) is no spread
    if n > 0 and sd > _EQUAL_WEIGHTS_ULPS * _EPS * abs(mean_w):
        z = dev / (sd / math.sqrt(n))
    else:  # every weight equal: compare directly
        z = 0.0 if abs(dev) <= MEAN_WEIGHT_ATOL else math.copysign(math.inf, dev)
    flagged = abs(z) > MEAN_WEIGHT_Z and abs(dev) > MEAN_WEIGHT_TOLERANCE
    return ("ok" if not flagged else ("high" if dev > 0 else "low")), float(z)


def ess_note(ess: float, n: int, *, subject: Hashable = None, advice: str | None = None) -> Note:
    """The note for :func:`low_ess` (a :class:`~ope._format.Note` of rule ``"low_ess"``:
    ``subject``, e.g. ``(policy, "raw weights")``, tells which weights it is about, so that two
    wordings of it are stated once). ``advice``: what to do instead of the default (clipping,
    a doubly robust estimator, a bounded interval), for estimates that offer none of those (a
    phrase in lower case, as :data:`WEIGHTED_SMALL_SAMPLE_ADVICE`)."""
    from ope._format import Note

    said = (
        "Consider clipping, a doubly robust estimator, or a bounded interval method."
        if advice is None
        else as_sentence(advice)
    )
    return Note(
        f"effective sample size {ess:.1f} is {ess / n:.2%} of n={n}: the estimate rests on a few "
        f"heavily weighted rows and normal intervals may undercover. {said}",
        rule="low_ess",
        subject=subject,
    )


def as_sentence(phrase: str) -> str:
    """``phrase`` (advice in lower case) as a sentence of its own (its first letter upper case).

    >>> as_sentence("log more rows.")
    'Log more rows.'
    """
    return phrase[:1].upper() + phrase[1:]


def mean_weight_note(
    mean_w: float, z: float, *, expected: float = 1.0, subject: Hashable = None
) -> Note:
    """The note for a flagged :func:`mean_weight_check` (a Note of rule
    ``"mean_weight_check"`` about ``subject``)."""
    how_far = (
        f"{abs(z):.3g} standard errors from its expected value {expected:.4g}"
        if math.isfinite(z)
        else f"while every weight is equal, so it cannot average to its expected value "
        f"{expected:.4g}"
    )
    why = (
        "the candidate puts mass where the logger never acts (support gap) or the logged "
        "propensities are wrong"
        if mean_w < expected
        else "the logged propensities are too small, or the candidate's probabilities do not sum "
        "to 1 over the actions"
    )
    from ope._format import Note

    return Note(
        f"mean importance weight is {mean_w:.4g}, {how_far}: {why}, and weighting estimates are "
        "biased. Check overlap with ope.diagnostics.",
        rule="mean_weight_check",
        subject=subject,
    )


#: What the small-sample notes advise on rows with sampling weights, where no finite-sample
#: interval applies (the bounded intervals refuse weighted rows).
WEIGHTED_SMALL_SAMPLE_ADVICE: Final = (
    "no finite-sample interval takes sampling weights: read the interval as approximate, or "
    "log more rows."
)


def small_sample_note(
    n: int, *, subject: Hashable = None, weighted: bool = False, advice: str | None = None
) -> Note:
    """The note for :func:`small_sample` (a Note of rule ``"small_sample"``); ``weighted``:
    the rows carry sampling weights, so the finite-sample intervals are not offered;
    ``advice`` (a phrase in lower case): what to do, for estimates that offer no finite-sample
    interval at all (the slate estimators), in place of the default advice.

    >>> note = small_sample_note(20)
    >>> note.startswith("only n=20 rows"), note.rule
    (True, 'small_sample')
    >>> small_sample_note(20, weighted=True).endswith("log more rows.")
    True
    """
    if advice is None:
        advice = (
            WEIGHTED_SMALL_SAMPLE_ADVICE
            if weighted
            else ("prefer bernstein or betting intervals with an a priori reward_range.")
        )
    from ope._format import Note

    return Note(
        f"only n={n} rows (< {SMALL_SAMPLE_ROWS}): normal and t intervals rely on the central "
        f"limit theorem and may undercover; {advice}",
        rule="small_sample",
        subject=subject,
    )


# --------------------------------------------------------------------------------------------
# segments with too small an effective sample for their mass (diagnostics)
# --------------------------------------------------------------------------------------------
#: A segment whose share of the estimate's variance is at least 4 times its share of the
#: candidate's mass: per unit of mass its rows inform the estimate four times less than the
#: average row (the logger gives the candidate's actions there tiny propensities), so exploring
#: there shrinks the interval most. 4 keeps ordinary heterogeneity (reward variance differing by
#: a factor of 2 or 3 between segments) unflagged ...
SEGMENT_VARIANCE_EXCESS: Final = 4.0

#: ... and only when it carries at least a quarter of that variance: below that, even an
#: unlimited sample there would narrow the interval by less than 1 - sqrt(0.75) = 13%.
SEGMENT_VARIANCE_MIN_SHARE: Final = 0.25

__all__ += ["SEGMENT_VARIANCE_EXCESS", "SEGMENT_VARIANCE_MIN_SHARE"]


# --------------------------------------------------------------------------------------------
# intervals that collapse on a few effective rows (estimators)
# --------------------------------------------------------------------------------------------
#: Kish effective rows below which the normal, t and bootstrap intervals are not trusted, at any
#: n: the same rule of thumb as SMALL_SAMPLE_ROWS, counted in effective rows, since a weighted
#: mean resting on fewer than 30 effective rows is no better approximated by the CLT than a plain
#: mean of 30 rows. On such rows the sample spread can even vanish (n=50 with three rare-action
#: rows, all rewards 1: SNIPS' standard error 6e-17 and intervals [1, 1] around a truth 0.9745).
MIN_EFFECTIVE_ROWS: Final = 30


def few_effective_rows(ess: float) -> bool:
    """True when the Kish ESS is below :data:`MIN_EFFECTIVE_ROWS`."""
    return ess < MIN_EFFECTIVE_ROWS


def few_effective_rows_note(
    ess: float,
    std_error: float,
    *,
    subject: Hashable = None,
    weighted: bool = False,
    advice: str | None = None,
) -> Note:
    """The note for :func:`few_effective_rows` (a Note of rule ``"few_effective_rows"``);
    ``weighted``: the rows carry sampling weights, so the finite-sample intervals are not
    offered; ``advice`` (a phrase in lower case): what to do, for estimates that offer no
    finite-sample interval at all (the slate estimators), in place of the default advice."""
    if advice is not None:
        advice = as_sentence(advice)
    elif weighted:
        advice = as_sentence(WEIGHTED_SMALL_SAMPLE_ADVICE)
    else:
        advice = (
            "Use ci(method='betting') with an a priori reward_range, which holds at any n "
            "(empirical likelihood is asymptotic: at small effective samples it undercovers "
            "too)."
        )
    from ope._format import Note

    return Note(
        f"the estimate rests on {ess:.3g} effective {'row' if f'{ess:.3g}' == '1' else 'rows'} "
        f"(< {MIN_EFFECTIVE_ROWS}) and its "
        f"standard error {std_error:.3g} may be near-degenerate (0 when those rows share one "
        f"reward): the normal, t and bootstrap intervals can collapse and undercover. {advice}",
        rule="few_effective_rows",
        subject=subject,
    )


__all__ += [
    "MIN_EFFECTIVE_ROWS",
    "WEIGHTED_SMALL_SAMPLE_ADVICE",
    "as_sentence",
    "few_effective_rows",
    "few_effective_rows_note",
]


# --------------------------------------------------------------------------------------------
# the weights' upper tail (diagnostics; Vehtari et al., JMLR 2024)
# --------------------------------------------------------------------------------------------
#: The largest Pareto k-hat for which an importance-sampling estimate is called reliable at any
#: sample size (Vehtari et al. 2024, section 3: above 0.7 the error of the estimate converges so
#: slowly in n that no practical sample saves it; below 2,154 rows the threshold is lower,
#: ``1 - 1 / log10(n)``).
K_RELIABLE: Final = 0.7

#: From this k-hat on the weights' variance is infinite (their second moment diverges): a
#: standard error computed from the rows estimates nothing, and normal or t intervals built on
#: it are not to be trusted, however large the ESS looks.
K_INFINITE_VARIANCE: Final = 0.5


def heavy_tail(k_hat: float, threshold: float) -> Literal["unreliable", "infinite_variance", ""]:
    """Which tail rule a Pareto k-hat breaks: ``"unreliable"`` (above ``threshold``, the
    reliability limit for the sample size), ``"infinite_variance"`` (at least
    :data:`K_INFINITE_VARIANCE`), or ``""`` (neither; also for a NaN k-hat: no positive
    weight, and for an infinite one: fewer than 5 positive weights, so the ESS is at most 4 and
    the effective-sample rules already speak)."""
    if math.isinf(k_hat):
        return ""
    if k_hat > threshold:
        return "unreliable"
    if k_hat >= K_INFINITE_VARIANCE:
        return "infinite_variance"
    return ""


def heavy_tail_note(k_hat: float, threshold: float, *, subject: Hashable = None) -> Note:
    """The note for a broken :func:`heavy_tail` rule (a Note of rule ``"pareto_k"``).

    >>> heavy_tail_note(0.8, 0.7).startswith("Pareto k-hat of the importance weights is 0.8")
    True
    """
    from ope._format import Note

    shown = f"{k_hat:.2f}"
    if heavy_tail(k_hat, threshold) == "unreliable":
        text = (
            f"Pareto k-hat of the importance weights is {shown}, above {threshold:.2f} (the "
            "reliability limit for this many rows): the weights' tail is so heavy that the "
            "weighting estimates are unreliable and their intervals can miss by far more than "
            "their width; more logs of the same kind help only slowly. Clip (and read the "
            "bias bound), use a doubly robust estimator, or log with more exploration."
        )
    else:
        text = (
            f"Pareto k-hat of the importance weights is {shown} (>= "
            f"{K_INFINITE_VARIANCE}): the weights' variance is likely infinite, so the "
            "standard error and the normal and t intervals are not to be trusted even where the "
            "ESS looks fine. Prefer a bounded interval (betting or empirical likelihood with an "
            "a priori reward_range), or clip."
        )
    return Note(text, rule="pareto_k", subject=subject)


__all__ += ["K_RELIABLE", "K_INFINITE_VARIANCE", "heavy_tail", "heavy_tail_note"]


# --------------------------------------------------------------------------------------------
# sensitivity to wrong propensities (ope.diagnostics.msm)
# --------------------------------------------------------------------------------------------
#: A decision whose tipping point Γ* is below this flips when the propensities' odds are off by
#: less than 50% on some rows. That is within the error of an estimated propensity model or of a
#: logger that read one unlogged input of moderate strength (Γ of 1.5 to 2 is the "moderate
#: confounding" of the sensitivity-analysis literature, Rosenbaum 2002 and Kallus & Zhou 2018), so
#: the report lists such a decision under what to watch. A convention, not a calibrated error
#: rate: the curve and Γ* are shown whatever their value.
GAMMA_FRAGILE: Final = 1.5

__all__ += ["GAMMA_FRAGILE"]


# --------------------------------------------------------------------------------------------
# skewed terms: intervals the central limit theorem does not reach yet (every estimate)
# --------------------------------------------------------------------------------------------
#: The rule is ``n < SKEW_MIN_ROWS + SKEW_ROWS * g**2`` (``g`` the sample skewness of the
#: influence terms: per row, per episode or per pair): below it the normal (and t) interval of
#: their mean is likely too short. It is Cochran's rule for the normal approximation of a mean
#: (Cochran 1977, section 2.15: 25 g^2) as refined by Sugden, Smith & Jones (JRSS-B 2000):
#: the tails' coverage errors of a skewed mean are of order ``g / sqrt(n)`` (Edgeworth, Hall
#: 1992 section 2.6), so a fixed error needs ``n`` proportional to ``g**2``, and solving Hall's
#: second-order two-sided error for a shortfall of one point gives ``27.7 + 24.7 g^2`` (less a
#: kurtosis term that sample kurtosis is too noisy to estimate). Checked on simulations with
#: exact truth (``benchmarks/short_intervals.py``: bandit IPS, SNIPS, clipped IPS and DR at
#: n = 200 to 5,000, sequential IS, WIS, PDIS and DR at 50 to 1,000 episodes, paired
#: differences; 59,396 results at 300 replications per cell): with the effective-sample rules
#: it flags 77% of the results of the designs whose normal interval covers less than 0.93 and
#: 23% of those covering at least 0.94. A calibration over 150,392 results put the constant 25
#: at the optimum of that separation (flat between 20 and 30). It marks a regime, not a
#: sample: a sample that never drew the rare heavy row looks symmetric and misses all the
#: same, which only the intervals that hold at any n (betting, empirical likelihood,
#: Bernstein) survive.
SKEW_ROWS: Final = 25.0

#: ... and the additive term of the rule: with ``g = 0`` fewer than 28 terms are still too few
#: (symmetric pair differences on 7 to 30 pairs per group gave a Holm family-wise error of 0.084
#: to 0.151 at nominal 0.05 with normal intervals).
SKEW_MIN_ROWS: Final = 28.0


def skewed_terms(n: int, skewness: float, *, min_rows: float = SKEW_MIN_ROWS) -> bool:
    """True when ``n`` terms of sample skewness ``skewness`` are too few for the normal
    approximation of their mean (``n < min_rows + SKEW_ROWS * skewness**2``; False for a NaN
    skewness). ``min_rows=0`` for a t interval, whose quantile already corrects for few
    symmetric terms (on the paired null-item families it brought the Holm family-wise error of
    7 to 30 pairs per group from 0.084-0.151 down to at most 0.066).

    >>> skewed_terms(200, 3.0), skewed_terms(1000, 3.0), skewed_terms(20, 0.0)
    (True, False, True)
    >>> skewed_terms(20, 0.0, min_rows=0)
    False
    """
    return bool(math.isfinite(skewness) and n < min_rows + SKEW_ROWS * skewness * skewness)


def skew_cannot_flag(n: int, width: float, std: float) -> bool:
    """True when no ``n`` terms spread over an interval of ``width`` with sample standard
    deviation ``std`` can break :func:`skewed_terms`: ``|g| <= max|x - mean| / sqrt(m2) <=
    width / (std * sqrt((n - 1) / n))``, so a bound this small on the skewness spares the pass
    that would compute it.

    >>> skew_cannot_flag(10_000, 10.0, 1.0), skew_cannot_flag(100, 10.0, 1.0)
    (True, False)
    """
    if not (n >= MIN_ROWS and std > 0 and math.isfinite(width)):
        return False
    bound = width / (std * math.sqrt((n - 1) / n))
    return n >= SKEW_MIN_ROWS + SKEW_ROWS * bound * bound


def skewed_terms_note(
    n: int,
    skewness: float,
    advice: str,
    *,
    unit: str = "rows",
    terms: str = "influence terms",
    subject: Hashable = None,
) -> Note:
    """The note for :func:`skewed_terms` (a Note of rule ``"skewed_terms"``); ``advice`` names
    the interval that holds for this estimate (the caller knows which apply), ``unit`` what the
    terms are (rows, episodes, pairs) and ``terms`` which of their terms were measured.

    >>> note = skewed_terms_note(200, 3.0, "Use ci(method='betting').")
    >>> note.rule, "253 rows" in note
    ('skewed_terms', True)
    """
    from ope._format import Note

    needed = math.ceil(SKEW_MIN_ROWS + SKEW_ROWS * skewness * skewness)
    return Note(
        f"its normal and t intervals are likely too short (they cover the value less often "
        f"than stated): the {n:,} {unit} it averages are skewed (sample skewness "
        f"{skewness:.3g} of their {terms}), and the central limit theorem behind those "
        f"intervals needs about {needed:,} {unit} at this skew ({SKEW_MIN_ROWS:g} + {SKEW_ROWS:g} x "
        f"skewness^2). {advice}",
        rule="skewed_terms",
        subject=subject,
    )


#: The interval methods the note speaks of: the asymptotic ones (normal, t, and the
#: percentile bootstrap, whose tails a skewed mean shortens alike). An interval of another
#: method (betting, Bottou, Hoeffding, ...) does not rest on the central limit theorem: where
#: an evaluation shows one, the note is not shown beside it.
SKEW_AFFECTED_METHODS: Final = ("normal", "t", "bootstrap")


def shown_notes(notes: Sequence[str], method: str) -> tuple[str, ...]:
    """``notes`` as shown beside an interval of ``method``: without the skewed-terms note
    (:func:`skewed_terms_note`) when ``method`` is not one of :data:`SKEW_AFFECTED_METHODS`.

    >>> note = skewed_terms_note(200, 3.0, "Use ci(method='betting').")
    >>> len(shown_notes(("a", note), "normal")), shown_notes(("a", note), "betting")
    (2, ('a',))
    """
    if method in SKEW_AFFECTED_METHODS:
        return tuple(notes)
    return tuple(n for n in notes if getattr(n, "rule", None) != "skewed_terms")


__all__ += [
    "SKEW_ROWS",
    "SKEW_MIN_ROWS",
    "SKEW_AFFECTED_METHODS",
    "skewed_terms",
    "skew_cannot_flag",
    "skewed_terms_note",
    "shown_notes",
]
