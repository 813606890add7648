"""The executable estimator contract: what every registered estimator promises, as checks.

Like scikit-learn's ``check_estimator``, :func:`check_estimator` runs an estimator object through
planted data whose answer is known and raises ``AssertionError`` naming the failed check and the
numbers; :func:`estimator_checks` gives the checks one by one and :func:`parametrize_with_checks`
turns them into one pytest test per (estimator, check), over the whole registry
:data:`ope.estimators.ESTIMATORS` by default. The checks, in order:

``on_policy_value``
    Target propensity equal to the logging propensity makes every importance weight 1: IPS,
    SNIPS and clipped IPS (``max_weight >= 1``) return the mean reward (to 1e-12 relative), DM
    the mean of ``q_target``, the doubly robust family the mean reward when its model is the
    same at the logged and the target action. An estimator whose settings turn a unit weight
    into ``k < 1`` (shrinkage, a switch threshold below 1) gives exactly
    ``mean(q) + k (mean(r) - mean(q))``, and every doubly robust estimator with a perfect model
    (``q = r``) the mean reward.
``row_permutation``
    Permuting every array the same way leaves value and standard error unchanged.
``reward_scaling``
    ``r -> a r`` (with the reward model scaled too), ``a > 0`` and ``a < 0``, scales the value by
    ``a`` and the standard error by ``|a|``.
``reward_shift``
    ``r -> r + c`` shifts the value by ``c`` times the estimator's value of the constant reward
    1: by ``c`` for self-normalized estimators and for estimators with a reward model shifted
    by ``c`` (shift-equivariant), by exactly ``c * mean(w)`` for IPS.
``evaluate_equals_eager``
    ``ope.evaluate`` on the rows as a log table gives the ``.estimate`` numbers, whether it
    is asked for this estimator alone or together with every other registered estimator that
    needs no reward model.
``streamed_equals_eager``, ``scan_equals_eager`` and ``distributed_equals_eager``
    For the estimators of :data:`ope.evaluation.STREAMING_ESTIMATORS`: the merged statistics
    of 4 batches (:class:`ope.streaming.MomentStats`), ``ope.evaluate(ope.scan_logs(dir))`` and
    :func:`ope.evaluate_distributed` on a parquet directory of 3 files give the eager value,
    standard error and normal interval to 1e-12 relative; the other estimators are refused by
    each of these paths with ``EstimationError``. The marginalized estimators of
    :data:`ope.evaluation.MARGINAL_STREAMING_ESTIMATORS` (MIPS, SNMIPS) must give the eager
    numbers through the scan and Dask (with an embedding; each batch's embedding
    propensities come from its own rows) and be refused by the item statistics.
``low_ess_notes`` and ``mean_weight_notes``
    A planted low effective sample size and a planted mean importance weight of 1.011 at
    ``z ~ 7`` (the logged propensities too small by 1.1 %) are flagged in the notes of every
    weighting estimate, identically by ``.estimate``, ``ope.evaluate`` (estimators without a
    reward model) and the streamed path, and by ``ope.diagnose_arrays`` (``propensity_check``
    not ``"ok"``); a deviation of 0.5 % (below
    :data:`ope._thresholds.MEAN_WEIGHT_TOLERANCE`, though ``z ~ 11``) is flagged by none.
``sampling_weights``
    ``estimate`` takes ``sampling_weight=`` (Horvitz-Thompson weights of rows kept with
    probability ``1 / s``): integer weights give the value of the rows repeated that many
    times, unit weights the unweighted value and standard error (to 1e-10 relative), and
    ``ope.evaluate`` on a log with a ``weight`` column the ``.estimate`` numbers with those
    weights (estimators without a reward model).

What an estimator promises is read from the estimator object itself, never from a list of
names: the arrays its ``estimate`` takes (``target_propensity``: it weights rows;
``q_logged``/``q_target``: it uses a reward model), whether it has settings (dataclass fields
such as the clip level ``max_weight``) and whether its ``name`` is in ``STREAMING_ESTIMATORS``.

The slate and sequential contracts
----------------------------------
:func:`check_slate_estimator` runs a slate estimator (:data:`ope.slates.SLATE_ESTIMATORS`,
plain or self-normalized) and :func:`check_sequential_estimator` a sequential one (a name of
:data:`ope.sequential.SEQUENTIAL_ESTIMATORS`) through planted data of their own input kind:
slate logs with the logger and a candidate as policies, and terminating trajectories. The
checks (:func:`slate_estimator_checks`, :func:`sequential_estimator_checks`): a finite value
and standard error on valid input; the stored, normal, t and bootstrap intervals contain the
estimate; the logger as candidate gives the mean slate reward (summed over the positions the
estimator reads) or the mean discounted return; relabelling slates or episodes changes
nothing; scaling the rewards (and the model) scales the value and the standard error; for
slates, a reward shift adds the shift times the value of the constant reward 1; and bad input
is refused with an error of :mod:`ope.exceptions`.

The hostile-input contract of every public entry point
-------------------------------------------------------
:func:`check_entry_point_contract` takes one entry of the registry :mod:`ope._entrypoints` (a
public function, class, method or CLI subcommand, with the glossary term of each argument and
a minimal valid call) and one argument, replaces that argument by hostile values of its term
and asserts: the call returns finite results, or raises an error of ope's tree
(:class:`ope.OPEError`) whose message names the argument; never a foreign exception (a
``TypeError`` from numpy is foreign; ``ParameterError`` also derives from ``TypeError`` and
``ValueError`` but is ope's). For a CLI subcommand, run with ``--json``: the exit code is 0, 2,
65 or 73 (1 is an unexpected failure), stdout is exactly one JSON document, and a failure names the
flag. The hostile values of a term are its fixed catalogue (:data:`HOSTILE_VALUES`: wrong types,
NaN, infinities, huge and tiny numbers, negative and zero, empty and wrong-shaped containers,
control, bidi and unpaired-surrogate characters; for paths, files built in a temporary folder:
missing, a directory, a FIFO, empty, truncated parquet, gzip-compressed, undecodable bytes, a
dangling link) followed by ``max_examples`` values drawn by Hypothesis from the term's strategy
(:func:`hostile_strategy`), derandomized, with a ``deadline`` of :data:`CONTRACT_DEADLINE_MS` ms
per call; the default budget is :data:`CONTRACT_EXAMPLES` draws, the slow suite's
:data:`CONTRACT_EXAMPLES_SLOW`. ``catalogue_sample=k`` tries only ``k`` values of the catalogue,
spread over it from an offset fixed by the entry and argument (the same on every machine), so
that a fast suite can visit every argument of every entry.

Examples
--------
>>> from ope.estimators import ClippedIPS
>>> from ope.testing import estimator_checks
>>> checks = dict(estimator_checks(ClippedIPS(max_weight=10.0)))
>>> list(checks)[:4]
['on_policy_value', 'row_permutation', 'reward_scaling', 'reward_shift']
>>> checks["reward_shift"](rng=0)   # passes: returns None
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import itertools
import math
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ope._thresholds import kish_ess, low_ess, mean_weight_check
from ope._validation import check_choice, check_rng
from ope.diagnostics import diagnose_arrays
from ope.distributed import evaluate_distributed
from ope.estimators import ESTIMATORS
from ope.evaluation import MARGINAL_STREAMING_ESTIMATORS, STREAMING_ESTIMATORS, evaluate
from ope.exceptions import EstimationError, OPEError, ParameterError
from ope.io import scan_logs
from ope.streaming import MomentStats

__all__ = [
    "check_estimator",
    "estimator_checks",
    "parametrize_with_checks",
    "check_slate_estimator",
    "slate_estimator_checks",
    "check_sequential_estimator",
    "sequential_estimator_checks",
    "check_continuous_estimator",
    "continuous_estimator_checks",
    "check_entry_point_contract",
    "hostile_strategy",
    "HOSTILE_VALUES",
    "CONTRACT_EXAMPLES",
    "CONTRACT_EXAMPLES_SLOW",
    "CONTRACT_DEADLINE_MS",
    "CONTRACT_SAMPLE_FAST",
]

#: Relative tolerance of every comparison: the paths differ only in the order of float64 sums.
RTOL: Final = 1e-12

#: Rows of the planted data of most checks (enough for stable sums, fast on any machine).
N_ROWS: Final = 3000

#: Rows of the planted mean-weight cases: a deviation of 1.1 % of weights with standard
#: deviation 0.7 is z ~ 7 standard errors at 200,000 rows (logged propensities 1.1 % too small).
N_MEAN_WEIGHT_ROWS: Final = 200_000

#: Value given to each required setting of a registered estimator class (every setting of the
#: registry is a positive threshold on the weights: clip level, switch threshold, shrinkage);
#: 10 leaves the unit weights of on-policy data unclipped and unswitched.
DEFAULT_SETTING: Final = 10.0

#: Batches merged by the streamed check (more than 2, so that merging is associative in use).
N_BATCHES: Final = 4

_ESS_PHRASE: Final = "effective sample size"
_MEAN_WEIGHT_PHRASE: Final = "mean importance weight"
_POLICY: Final = "planted"

_Check = Callable[..., None]


# ============================================================================================
# what the estimator exposes
# ============================================================================================
@dataclass(frozen=True)
class _Profile:
    """The promises of one estimator object, read from its public surface."""

    name: str
    weights: bool  # estimate takes logging_propensity and target_propensity
    q_logged: bool
    q_target: bool
    settings: tuple[str, ...]  # dataclass fields (clip level, threshold, ...)
    streams: bool
    merges: bool  # scans and Dask give it (with the contract's embedding for MIPS, SNMIPS)

    @property
    def model(self) -> bool:
        return self.q_logged or self.q_target


def _profile(estimator: Any) -> _Profile:
    params = inspect.signature(estimator.estimate).parameters
    settings = (
        tuple(f.name for f in dataclasses.fields(estimator))
        if dataclasses.is_dataclass(estimator)
        else ()
    )
    name = str(getattr(estimator, "name", type(estimator).__name__))
    return _Profile(
        name=name,
        weights="target_propensity" in params,
        q_logged="q_logged" in params,
        q_target="q_target" in params,
        settings=settings,
        streams=name in STREAMING_ESTIMATORS,
        merges=name in STREAMING_ESTIMATORS or name in MARGINAL_STREAMING_ESTIMATORS,
    )


def _instance(estimator: Any) -> Any:
    """An estimator object from an object, a class or a registry name.

    A class (or the class of a registry name) gets DEFAULT_SETTING for each required setting.
    """
    if isinstance(estimator, str):
        estimator = ESTIMATORS[check_choice(estimator, "estimator", list(ESTIMATORS))]
    if not callable(getattr(estimator, "estimate", None)):
        raise ParameterError(
            f"`estimator` must be an estimator object (e.g. ope.IPS() or "
            f"ope.ClippedIPS(max_weight=10.0)), its class, or a registry name among "
            f"{', '.join(ESTIMATORS)}; got {estimator!r} ({type(estimator).__name__}), which "
            "has no estimate method."
        )
    if not isinstance(estimator, type):
        return estimator
    required = [
        f.name
        for f in (dataclasses.fields(estimator) if dataclasses.is_dataclass(estimator) else ())
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    return estimator(**{name: DEFAULT_SETTING for name in required})


def _label(estimator: Any) -> str:
    est = _instance(estimator)
    return repr(est) if _profile(est).settings else _profile(est).name


# ============================================================================================
# planted data
# ============================================================================================
@dataclass(frozen=True)
class _Logs:
    """Logged rows with one candidate: the arrays every estimator may take."""

    action: np.ndarray
    reward: np.ndarray
    logging_propensity: np.ndarray
    target_propensity: np.ndarray
    q_logged: np.ndarray
    q_target: np.ndarray

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    @property
    def weight(self) -> np.ndarray:
        return self.target_propensity / self.logging_propensity

    def replace(self, **arrays: np.ndarray) -> _Logs:
        return dataclasses.replace(self, **arrays)

    def rows(self, index: np.ndarray) -> _Logs:
        return _Logs(*(getattr(self, f.name)[index] for f in dataclasses.fields(self)))

    def frame(self) -> pd.DataFrame:
        """The rows as a log table (``ope.read_logs`` schema, candidate ``target__planted``)."""
        return pd.DataFrame(
            {
                "event_id": np.arange(len(self), dtype=np.int64),
                "action": self.action,
                "propensity": self.logging_propensity,
                "reward": self.reward,
                f"target__{_POLICY}": self.target_propensity,
            }
        )

    def marginal_frame(self) -> pd.DataFrame:
        """The rows with two candidates each, the logged action ``a`` and a stand-in ``a + 100``
        holding the rest of both policies' mass (``candidates``, ``logging_distribution``,
        ``target_dist__planted``): with each action its own embedding (:data:`_OWN_EMBEDDING`)
        the marginal propensities are the logged ones, so a marginalized estimator must give
        the ``.estimate`` numbers of these arrays."""
        frame = self.frame()
        a, p, t = self.action, self.logging_propensity, self.target_propensity
        frame["candidates"] = list(np.stack([a, a + 100], axis=1))
        frame["logging_distribution"] = list(np.stack([p, 1.0 - p], axis=1))
        frame[f"target_dist__{_POLICY}"] = list(np.stack([t, 1.0 - t], axis=1))
        return frame


def _own_embedding() -> Any:
    """Every action of the contract's logs its own cluster (marginal weights = item weights)."""
    from ope.marginal import ActionEmbedding

    actions = np.concatenate([np.arange(4), 100 + np.arange(4)])
    return ActionEmbedding(
        clusters="cluster", items=pa.table({"action": actions, "cluster": actions})
    )


def _marginal_options(estimators: Sequence[Any]) -> dict[str, Any]:
    """``embedding=`` for ``evaluate`` when a marginalized estimator is among ``estimators``."""
    if any(getattr(e, "marginal", False) for e in estimators):
        return {"embedding": _own_embedding()}
    return {}


def _frame_for(logs: _Logs, estimators: Sequence[Any]) -> pd.DataFrame:
    """The log table ``evaluate`` reads for ``estimators`` (with candidates when marginal)."""
    return logs.marginal_frame() if _marginal_options(estimators) else logs.frame()


def _random_logs(rng: np.random.Generator, n: int = N_ROWS) -> _Logs:
    """Four actions, a logger that explores all of them, a random stochastic candidate."""
    logging_dist = np.array([0.1, 0.2, 0.3, 0.4])
    action = rng.choice(4, n, p=logging_dist)
    target_dist = rng.dirichlet(np.ones(4), n)
    q_all = 0.3 + 0.1 * np.arange(4) + rng.normal(0.0, 0.05, (n, 4))
    return _Logs(
        action=action,
        reward=q_all[np.arange(n), action] + rng.normal(0.0, 1.0, n),
        logging_propensity=logging_dist[action],
        target_propensity=target_dist[np.arange(n), action],
        q_logged=q_all[np.arange(n), action],
        q_target=np.einsum("ia,ia->i", target_dist, q_all),
    )


def _low_ess_logs(rng: np.random.Generator, n: int = N_ROWS) -> _Logs:
    """Ten rows logged with probability 1e-3 that the candidate always takes: ESS ~ 0.5 % of n."""
    logs = _random_logs(rng, n)
    rare = rng.choice(n, 10, replace=False)
    p = logs.logging_propensity.copy()
    t = logs.target_propensity * 0.5
    p[rare], t[rare] = 1e-3, 1.0
    return logs.replace(logging_propensity=p, target_propensity=t)


def _mean_weight_logs(rng: np.random.Generator, *, inflation: float, spread: float) -> _Logs:
    """Two actions logged half and half (exactly), the logged propensity divided by inflation.

    The candidate gives the logged action ``0.5 +- spread / 2``, so the true weights are exactly
    ``1 +- spread`` with mean 1 and the planted mean weight is exactly ``inflation``.
    """
    n = N_MEAN_WEIGHT_ROWS
    action = rng.permutation(np.arange(n) % 2)
    side = rng.permutation(np.arange(n) % 2 * 2 - 1).astype(np.float64)  # half +1, half -1
    target = 0.5 + 0.5 * spread * side
    q_logged = 0.4 + 0.2 * action + rng.normal(0.0, 0.05, n)
    return _Logs(
        action=action,
        reward=rng.binomial(1, 0.4 + 0.2 * action).astype(np.float64),
        logging_propensity=np.full(n, 0.5 / inflation),
        target_propensity=target,
        q_logged=q_logged,
        q_target=q_logged + rng.normal(0.0, 0.05, n),
    )


# ============================================================================================
# running an estimator
# ============================================================================================
def _estimate(estimator: Any, logs: _Logs, **weights: np.ndarray) -> Any:
    """``estimator.estimate`` with exactly the arrays it takes (and ``sampling_weight`` when
    given); warnings are recorded, not shown."""
    prof = _profile(estimator)
    kwargs: dict[str, np.ndarray] = dict(weights)
    if prof.weights:
        kwargs["logging_propensity"] = logs.logging_propensity
        kwargs["target_propensity"] = logs.target_propensity
    if prof.q_logged:
        kwargs["q_logged"] = logs.q_logged
    if prof.q_target:
        kwargs["q_target"] = logs.q_target
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.estimate(logs.reward, **kwargs)


def _streamed(estimator: Any, logs: _Logs) -> Any:
    """The estimate from the merged statistics of N_BATCHES consecutive batches."""
    bounds = np.linspace(0, len(logs), N_BATCHES + 1).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = [
            MomentStats.from_arrays(
                logs.reward[a:b],
                logs.logging_propensity[a:b],
                logs.target_propensity[a:b],
                max_weight=getattr(estimator, "max_weight", None),
            )
            for a, b in zip(bounds[:-1], bounds[1:])
        ]
        return MomentStats.merge_all(parts).estimates(estimator)[0]


def _evaluated(
    check: str, estimator: Any, logs: _Logs, estimators: Sequence[Any] | None = None
) -> Any:
    """The estimate ``ope.evaluate`` gives for the candidate on the same rows.

    ``estimators`` (default: the estimator alone) is what ``evaluate`` is asked for; an
    estimator that ``evaluate`` refuses fails ``check``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            chosen = tuple(estimators or (estimator,))
            ev = evaluate(
                _frame_for(logs, chosen), [_POLICY], estimators=chosen, **_marginal_options(chosen)
            )
        except OPEError as exc:
            raise _fail(check, estimator, f"ope.evaluate refused it: {exc}") from exc
    return ev[(_POLICY, _profile(estimator).name)]


def _fail(check: str, estimator: Any, text: str) -> AssertionError:
    return AssertionError(f"{check} failed for {estimator!r}: {text}")


def _assert_close(check: str, estimator: Any, what: str, got: float, want: float) -> None:
    if not math.isclose(got, want, rel_tol=RTOL, abs_tol=RTOL * 1e-3):
        raise _fail(
            check,
            estimator,
            f"{what} is {got!r}, expected {want!r} (relative difference "
            f"{abs(got - want) / max(abs(want), 1e-300):.3g} > {RTOL:g}).",
        )


def _notes_with(notes: Sequence[str], phrase: str) -> list[str]:
    return [n for n in notes if phrase in n]


# ============================================================================================
# the checks
# ============================================================================================
def _check_on_policy_value(estimator: Any, *, rng: Any = 0) -> None:
    """Target == logging propensity (every weight 1): the value is the mean reward.

    DM (no weights) gives the mean of ``q_target``. With ``q_target == q_logged`` the doubly
    robust family gives the mean reward; an estimator with settings may shrink a unit weight to
    ``k`` in [0, 1] (measured as its value of the constant reward 1 with a zero model), and then
    gives ``mean(q) + k (mean(r) - mean(q))``; clipping at ``max_weight >= 1`` keeps ``k = 1``.
    """
    check = "on_policy_value"
    prof = _profile(estimator)
    logs = _random_logs(check_rng(rng))
    logs = logs.replace(target_propensity=logs.logging_propensity.copy(), q_target=logs.q_logged)
    if not prof.weights:
        _assert_close(
            check,
            estimator,
            "value",
            _estimate(estimator, logs).value,
            float(np.mean(logs.q_target)),
        )
        return
    ones = np.ones(len(logs))
    k = _estimate(estimator, logs.replace(reward=ones, q_logged=0 * ones, q_target=0 * ones)).value
    keeps_unit = not prof.settings or getattr(estimator, "max_weight", 0.0) >= 1.0
    if keeps_unit:
        _assert_close(check, estimator, "value of the constant reward 1 on-policy", k, 1.0)
    elif not -RTOL <= k <= 1.0 + RTOL:
        raise _fail(check, estimator, f"a unit weight becomes {k!r}, outside [0, 1].")
    mean_r = float(np.mean(logs.reward))
    mean_q = float(np.mean(logs.q_logged)) if prof.model else 0.0
    _assert_close(
        check,
        estimator,
        "on-policy value",
        _estimate(estimator, logs).value,
        mean_q + k * (mean_r - mean_q),
    )
    if prof.model:  # a perfect model: every doubly robust estimator gives the mean reward
        perfect = logs.replace(q_logged=logs.reward, q_target=logs.reward)
        _assert_close(
            check,
            estimator,
            "on-policy value with q = r",
            _estimate(estimator, perfect).value,
            mean_r,
        )


def _check_row_permutation(estimator: Any, *, rng: Any = 0) -> None:
    """Permuting every array the same way changes neither value nor standard error."""
    check = "row_permutation"
    gen = check_rng(rng)
    logs = _random_logs(gen)
    base = _estimate(estimator, logs)
    moved = _estimate(estimator, logs.rows(gen.permutation(len(logs))))
    _assert_close(check, estimator, "value after permuting the rows", moved.value, base.value)
    _assert_close(
        check, estimator, "std_error after permuting the rows", moved.std_error, base.std_error
    )


def _check_reward_scaling(estimator: Any, *, rng: Any = 0) -> None:
    """``r -> a r`` and ``q -> a q`` scale the value by ``a`` and std_error by ``|a|``."""
    check = "reward_scaling"
    logs = _random_logs(check_rng(rng))
    base = _estimate(estimator, logs)
    for a in (2.5, -1.5):
        scaled = _estimate(
            estimator,
            logs.replace(
                reward=a * logs.reward, q_logged=a * logs.q_logged, q_target=a * logs.q_target
            ),
        )
        _assert_close(check, estimator, f"value for rewards x {a}", scaled.value, a * base.value)
        _assert_close(
            check,
            estimator,
            f"std_error for rewards x {a}",
            scaled.std_error,
            abs(a) * base.std_error,
        )


def _check_reward_shift(estimator: Any, *, rng: Any = 0) -> None:
    """``r -> r + c`` (and ``q -> q + c``) shifts the value by ``c`` times its value of r = 1.

    That multiplier is 1 for shift-equivariant estimators (self-normalized ones, and every
    estimator with a reward model shifted with the rewards), exactly ``mean(w)`` for IPS, and at
    most ``mean(w)`` for an estimator whose settings shrink weights; the standard error of a
    shift-equivariant estimator does not change.
    """
    check = "reward_shift"
    prof = _profile(estimator)
    logs = _random_logs(check_rng(rng))
    c = 3.0
    ones = np.ones(len(logs))
    base = _estimate(estimator, logs)
    unit = _estimate(estimator, logs.replace(reward=ones, q_logged=ones, q_target=ones)).value
    shifted = _estimate(
        estimator,
        logs.replace(
            reward=logs.reward + c, q_logged=logs.q_logged + c, q_target=logs.q_target + c
        ),
    )
    _assert_close(
        check,
        estimator,
        f"value for rewards + {c} (value + {c} x value of r = 1)",
        shifted.value,
        base.value + c * unit,
    )
    mean_w = float(np.mean(logs.weight))
    if prof.model or not prof.weights:
        _assert_close(
            check, estimator, "value of the constant reward 1 (shift-equivariant)", unit, 1.0
        )
    elif not prof.settings and not math.isclose(unit, 1.0, rel_tol=RTOL):
        _assert_close(
            check, estimator, "value of the constant reward 1 (IPS: mean weight)", unit, mean_w
        )
    elif unit > mean_w * (1 + RTOL) and not math.isclose(unit, 1.0, rel_tol=RTOL):
        raise _fail(
            check,
            estimator,
            f"value of the constant reward 1 is {unit!r}, more than the mean weight {mean_w!r}.",
        )
    if math.isclose(unit, 1.0, rel_tol=RTOL):
        _assert_close(
            check,
            estimator,
            f"std_error for rewards + {c} (shift-equivariant)",
            shifted.std_error,
            base.std_error,
        )


def _assert_same_estimate(check: str, estimator: Any, path: str, got: Any, want: Any) -> None:
    """Same n, value, standard error and 95 % normal interval as the eager estimate."""
    if got.n != want.n:
        raise _fail(check, estimator, f"{path} n is {got.n}, expected {want.n}.")
    ci_got, ci_want = got.ci(0.95, "normal"), want.ci(0.95, "normal")
    for what, a, b in (
        ("value", got.value, want.value),
        ("std_error", got.std_error, want.std_error),
        ("normal ci low", ci_got.low, ci_want.low),
        ("normal ci high", ci_got.high, ci_want.high),
    ):
        _assert_close(check, estimator, f"{path} {what}", float(a), float(b))


def _check_evaluate_equals_eager(estimator: Any, *, rng: Any = 0) -> None:
    """``ope.evaluate`` gives the ``.estimate`` numbers, alone or with the other estimators.

    The others are every estimator of the registry that needs no reward model (built as in
    :func:`estimator_checks`), so ``evaluate``'s result for one estimator cannot depend on what
    else was asked for. Estimators with a reward model are fitted by ``evaluate`` itself
    (cross-fitting), so their numbers are not comparable with given ``q`` arrays: skipped.
    """
    check = "evaluate_equals_eager"
    prof = _profile(estimator)
    if prof.model:
        return
    logs = _random_logs(check_rng(rng))
    eager = _estimate(estimator, logs)
    others = [
        est
        for est in map(_instance, ESTIMATORS.values())
        if not _profile(est).model and _profile(est).name != prof.name
    ]
    for label, estimators in (("alone", [estimator]), ("with the others", [estimator, *others])):
        path = f"ope.evaluate ({label})"
        got = _evaluated(check, estimator, logs, estimators)
        _assert_same_estimate(check, estimator, path, got, eager)


def _check_streamed_equals_eager(estimator: Any, *, rng: Any = 0) -> None:
    """Merged batch statistics give the eager estimate; non-streaming estimators are refused."""
    check = "streamed_equals_eager"
    prof = _profile(estimator)
    logs = _random_logs(check_rng(rng))
    if not prof.streams:
        try:
            _streamed(estimator, logs)
        except EstimationError:
            return
        raise _fail(
            check,
            estimator,
            f"{prof.name!r} is not in STREAMING_ESTIMATORS, yet MomentStats.estimates accepted it.",
        )
    try:
        streamed = _streamed(estimator, logs)
    except EstimationError as exc:
        raise _fail(
            check,
            estimator,
            f"{prof.name!r} is in STREAMING_ESTIMATORS, yet "
            f"MomentStats.estimates refused it: {exc}",
        ) from exc
    eager = _estimate(estimator, logs)
    _assert_same_estimate(check, estimator, "streamed", streamed, eager)


@contextlib.contextmanager
def _parquet_dir(logs: _Logs, estimator: Any) -> Iterator[str]:
    """The rows as 3 parquet files of several row groups each, in a temporary directory (with
    the candidates and distributions a marginalized ``estimator`` reads)."""
    with tempfile.TemporaryDirectory() as tmp:
        table = pa.Table.from_pandas(_frame_for(logs, [estimator]), preserve_index=False)
        bounds = np.linspace(0, len(logs), 4).astype(int)
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            pq.write_table(
                table.slice(a, b - a), Path(tmp) / f"part-{i}.parquet", row_group_size=500
            )
        yield tmp


def _compare_evaluation(
    check: str, estimator: Any, path: str, run: Callable[[], Any], logs: _Logs
) -> None:
    """``run()`` evaluates the candidate on ``logs``' rows as ``path``; compare with eager.

    Estimators outside ``STREAMING_ESTIMATORS`` must be refused with ``EstimationError``.
    """
    prof = _profile(estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ev = run()
        except EstimationError:
            if prof.merges:
                raise
            return
    if not prof.merges:
        raise _fail(
            check,
            estimator,
            f"{prof.name!r} is not in STREAMING_ESTIMATORS (or MARGINAL_STREAMING_ESTIMATORS), "
            f"yet {path} accepted it.",
        )
    eager = _estimate(estimator, logs)
    _assert_same_estimate(check, estimator, path, ev[(_POLICY, prof.name)], eager)
    row = ev.table().iloc[0]
    ci = eager.ci(0.95, "normal")
    _assert_close(check, estimator, f"{path} ci_low", float(row["ci_low"]), float(ci.low))
    _assert_close(check, estimator, f"{path} ci_high", float(row["ci_high"]), float(ci.high))


def _check_scan_equals_eager(estimator: Any, *, rng: Any = 0) -> None:
    """``ope.evaluate(ope.scan_logs(dir))`` on 3 parquet files gives the eager estimate.

    Estimators outside ``STREAMING_ESTIMATORS`` are refused with ``EstimationError``.
    """
    logs = _random_logs(check_rng(rng))
    with _parquet_dir(logs, estimator) as folder:
        _compare_evaluation(
            "scan_equals_eager",
            estimator,
            "ope.evaluate(ope.scan_logs(...))",
            lambda: evaluate(
                scan_logs(folder),
                [_POLICY],
                estimators=(estimator,),
                **_marginal_options([estimator]),
            ),
            logs,
        )


def _check_distributed_equals_eager(estimator: Any, *, rng: Any = 0) -> None:
    """``ope.evaluate_distributed`` on 3 parquet files gives the eager estimate and interval.

    Runs Dask's synchronous scheduler (no cluster needed); needs the ``dask`` extra.
    Estimators outside ``STREAMING_ESTIMATORS`` are refused with ``EstimationError``.
    """
    import dask

    logs = _random_logs(check_rng(rng))
    with _parquet_dir(logs, estimator) as folder, dask.config.set(scheduler="synchronous"):
        _compare_evaluation(
            "distributed_equals_eager",
            estimator,
            "ope.evaluate_distributed",
            lambda: evaluate_distributed(
                folder, [_POLICY], estimators=(estimator,), **_marginal_options([estimator])
            ),
            logs,
        )


def _assert_same_notes(check: str, estimator: Any, path: str, got: Any, want: Any) -> None:
    if tuple(got.notes) != tuple(want.notes):
        raise _fail(
            check,
            estimator,
            f"the {path} notes {list(got.notes)} differ from the "
            f"notes of .estimate {list(want.notes)}.",
        )


def _same_notes_everywhere(check: str, estimator: Any, logs: _Logs, eager: Any) -> None:
    """The streamed path and ``ope.evaluate`` (estimators without a reward model) agree."""
    prof = _profile(estimator)
    if prof.streams:
        _assert_same_notes(check, estimator, "streamed", _streamed(estimator, logs), eager)
    if not prof.model:
        _assert_same_notes(
            check, estimator, "ope.evaluate", _evaluated(check, estimator, logs), eager
        )


def _check_low_ess_notes(estimator: Any, *, rng: Any = 0) -> None:
    """An ESS below ESS_RATIO_WARN of n is noted, and noted identically by every path.

    The ``ess`` of an estimator without settings is the Kish ESS of the raw weights (so the
    planted case is flagged); with settings it is that of the weights it uses. Either way a
    note mentions the effective sample size exactly when ``ess`` is low.
    """
    check = "low_ess_notes"
    prof = _profile(estimator)
    logs = _low_ess_logs(check_rng(rng))
    w = logs.weight
    raw_ess = kish_ess(float(w.sum()), float(w @ w))
    if not low_ess(raw_ess, len(logs)):
        raise _fail(
            check,
            estimator,
            f"the planted weights have ESS {raw_ess:.1f} of "
            f"n={len(logs)}, not low by ope._thresholds.low_ess; the rule changed.",
        )
    eager = _estimate(estimator, logs)
    if prof.weights and not prof.settings:
        _assert_close(check, estimator, "ess (Kish ESS of the weights)", eager.ess, raw_ess)
    flagged = bool(_notes_with(eager.notes, _ESS_PHRASE))
    if flagged != low_ess(eager.ess, eager.n):
        raise _fail(
            check,
            estimator,
            f"ess={eager.ess:.1f} of n={eager.n} but its notes "
            f"{'mention' if flagged else 'do not mention'} the effective sample size: "
            f"{list(eager.notes)}.",
        )
    _same_notes_everywhere(check, estimator, logs, eager)


def _check_mean_weight_notes(estimator: Any, *, rng: Any = 0) -> None:
    """A mean weight of 1.011 at z ~ 7 is flagged everywhere; 1.005 at z ~ 11 nowhere.

    The first is a logger whose propensities are 1.1 % too small; the second is
    statistically clear but below MEAN_WEIGHT_TOLERANCE. Every weighting estimate's notes, the
    notes of ``ope.evaluate`` and of the streamed path, and ``ope.diagnose_arrays``'
    ``propensity_check`` must agree with :func:`ope._thresholds.mean_weight_check`.
    """
    check = "mean_weight_notes"
    prof = _profile(estimator)
    gen = check_rng(rng)
    for inflation, spread, planted in ((1.011, 0.7, "high"), (1.005, 0.2, "ok")):
        logs = _mean_weight_logs(gen, inflation=inflation, spread=spread)
        w = logs.weight
        status, z = mean_weight_check(len(logs), float(w.mean()), float(w.var(ddof=1)))
        case = f"mean weight {w.mean():.4f} (z = {z:.1f}, rule says {status!r})"
        if status != planted:
            raise _fail(
                check,
                estimator,
                f"{case}: the planted case should be {planted!r} by "
                "ope._thresholds.mean_weight_check; the rule or its thresholds changed.",
            )
        eager = _estimate(estimator, logs)
        noted = bool(_notes_with(eager.notes, _MEAN_WEIGHT_PHRASE))
        if noted != (prof.weights and status != "ok"):
            raise _fail(
                check,
                estimator,
                f"{case}: its notes {'flag' if noted else 'miss'} it: {list(eager.notes)}.",
            )
        if prof.weights:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                diag = diagnose_arrays(
                    logs.reward,
                    logs.logging_propensity,
                    logs.target_propensity,
                    policy_names=[_POLICY],
                )
            verdict = str(diag.table()["propensity_check"].iloc[0])
            if verdict != status:
                raise _fail(
                    check,
                    estimator,
                    f"{case}: ope.diagnose_arrays says propensity_check={verdict!r}.",
                )
        _same_notes_everywhere(check, estimator, logs, eager)


def _check_sampling_weights(estimator: Any, *, rng: Any = 0) -> None:
    """Sampling weights: integer weights == repeated rows, unit weights == unweighted, and
    ``ope.evaluate`` reads a ``weight`` column as ``.estimate(..., sampling_weight=...)``."""
    check = "sampling_weights"
    prof = _profile(estimator)
    if "sampling_weight" not in inspect.signature(estimator.estimate).parameters:
        raise _fail(
            check,
            estimator,
            "estimate takes no `sampling_weight`: rows kept with "
            "different probabilities would be averaged as if each stood for one row.",
        )
    gen = check_rng(rng)
    logs = _random_logs(gen, 600)
    s = gen.integers(1, 4, len(logs)).astype(np.float64)
    weighted = _estimate(estimator, logs, sampling_weight=s)
    repeated = _estimate(estimator, logs.rows(np.repeat(np.arange(len(logs)), s.astype(int))))
    _assert_close(
        check,
        estimator,
        "value with integer sampling weights (rows repeated)",
        weighted.value,
        repeated.value,
    )
    ones = _estimate(estimator, logs, sampling_weight=np.ones(len(logs)))
    plain = _estimate(estimator, logs)
    _assert_close(check, estimator, "value with unit sampling weights", ones.value, plain.value)
    if not math.isclose(ones.std_error, plain.std_error, rel_tol=1e-10):
        raise _fail(
            check,
            estimator,
            f"std_error with unit sampling weights is "
            f"{ones.std_error!r}, expected {plain.std_error!r}.",
        )
    if prof.model:
        return
    frame = _frame_for(logs, [estimator]).assign(weight=s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate(
            frame, policies=[_POLICY], estimators=[estimator], **_marginal_options([estimator])
        )
    _assert_same_estimate(
        check, estimator, "ope.evaluate with a weight column", ev[(_POLICY, prof.name)], weighted
    )


_CHECKS: Final[tuple[tuple[str, _Check], ...]] = (
    ("on_policy_value", _check_on_policy_value),
    ("row_permutation", _check_row_permutation),
    ("reward_scaling", _check_reward_scaling),
    ("reward_shift", _check_reward_shift),
    ("evaluate_equals_eager", _check_evaluate_equals_eager),
    ("streamed_equals_eager", _check_streamed_equals_eager),
    ("scan_equals_eager", _check_scan_equals_eager),
    ("distributed_equals_eager", _check_distributed_equals_eager),
    ("low_ess_notes", _check_low_ess_notes),
    ("mean_weight_notes", _check_mean_weight_notes),
    ("sampling_weights", _check_sampling_weights),
)

#: Checks that need an optional extra, by the module they import.
_NEEDS: Final[dict[str, str]] = {"distributed_equals_eager": "dask"}


# ============================================================================================
# the entry points
# ============================================================================================
def estimator_checks(estimator: Any) -> Iterator[tuple[str, Callable[..., None]]]:
    """The contract's checks for one estimator, as ``(check_name, check)`` pairs.

    Parameters
    ----------
    estimator : estimator object, class or registry name
        E.g. ``IPS()`` or ``ClippedIPS(max_weight=5.0)``; a class (or a name such as
        ``"clipped_ips"``) is built with :data:`DEFAULT_SETTING` for each required setting.

    Returns
    -------
    iterator of (str, callable)
        ``(check_name, check)`` in this order: ``on_policy_value``, ``row_permutation``,
        ``reward_scaling``, ``reward_shift``, ``evaluate_equals_eager``,
        ``streamed_equals_eager``, ``scan_equals_eager``, ``distributed_equals_eager``,
        ``low_ess_notes``, ``mean_weight_notes``, ``sampling_weights``; ``check(rng=0)`` returns
        None or raises ``AssertionError`` naming the check.

    Raises
    ------
    ope.ParameterError
        ``estimator`` is an unknown name or has no ``estimate`` method (raised at once, not
        on iteration).

    Examples
    --------
    >>> from ope.estimators import SNIPS
    >>> from ope.testing import estimator_checks
    >>> checks = dict(estimator_checks(SNIPS()))
    >>> checks["row_permutation"](rng=1)
    """
    est = _instance(estimator)
    return iter([(name, functools.partial(check, est)) for name, check in _CHECKS])


def check_estimator(estimator: Any, *, rng: Any = 0) -> None:
    """Run every check of the estimator contract; raise on the first that fails.

    Parameters
    ----------
    estimator : estimator object, class or registry name
        An estimator of :mod:`ope.estimators` (or any object with the same ``estimate``
        interface and a ``name``), with its settings; a class or name is built with
        :data:`DEFAULT_SETTING` for each required setting.
    rng : int, numpy.random.Generator or None, default 0
        Randomness of the planted data (each check draws from its own seeded generator when an
        int is given, so a failure is reproducible).

    Raises
    ------
    AssertionError
        ``"<check> failed for <estimator>: <what> is <number>, expected <number> ..."``.
    ope.ParameterError
        ``estimator`` is an unknown name or has no ``estimate`` method.

    Notes
    -----
    The checks and the promises behind them are listed in the module docstring. The
    ``distributed_equals_eager`` check needs Dask (``pip install 'ope-toolkit[dask]'``); without it
    the check is skipped with a ``UserWarning``.

    References
    ----------
    .. [1] scikit-learn developers, "sklearn.utils.estimator_checks.check_estimator"
       (the model for an executable contract).

    Examples
    --------
    A broken estimator (twice the IPS value) fails the first check, with the numbers:

    >>> import dataclasses
    >>> import numpy as np
    >>> from ope.estimators import IPS
    >>> from ope.testing import check_estimator
    >>> @dataclasses.dataclass(frozen=True)
    ... class Doubled(IPS):
    ...     def estimate(self, reward, logging_propensity, target_propensity, *,
    ...                  reward_range=None):
    ...         return super().estimate(2 * np.asarray(reward), logging_propensity,
    ...                                 target_propensity, reward_range=reward_range)
    >>> check_estimator(Doubled())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: on_policy_value failed for Doubled(): ... is 2.0, expected 1.0 ...
    """
    for name, check in estimator_checks(estimator):
        if name in _NEEDS and not _importable(_NEEDS[name]):
            warnings.warn(
                f"ope.testing: {name} skipped, it needs {_NEEDS[name]} (pip install "
                "'ope-toolkit[dask]').",
                UserWarning,
                stacklevel=2,
            )
            continue
        check(rng=rng)


def parametrize_with_checks(estimators: Sequence[Any] | None = None) -> Callable[..., Any]:
    """A pytest decorator giving one test per (estimator, check).

    Parameters
    ----------
    estimators : sequence of estimator objects, classes or registry names, optional
        Default: every class of :data:`ope.estimators.ESTIMATORS` (with
        :data:`DEFAULT_SETTING` for its required settings).

    Returns
    -------
    decorator
        ``pytest.mark.parametrize("estimator, check", ...)`` with ids ``"<estimator>-<check>"``;
        ``check`` is already bound to ``estimator``, so the test calls ``check()`` (or
        ``check(rng=...)``). A check needing a missing optional extra is skipped.

    Examples
    --------
    In a test module::

        from ope.testing import parametrize_with_checks

        @parametrize_with_checks()
        def test_contract(estimator, check):
            check()
    """
    import pytest

    chosen = list(ESTIMATORS.values()) if estimators is None else list(estimators)
    params = []
    for item in chosen:
        est = _instance(item)
        for name, check in estimator_checks(est):
            marks = []
            if name in _NEEDS:
                marks.append(
                    pytest.mark.skipif(
                        not _importable(_NEEDS[name]), reason=f"needs {_NEEDS[name]}"
                    )
                )
            params.append(pytest.param(est, check, id=f"{_label(est)}-{name}", marks=marks))
    return pytest.mark.parametrize("estimator, check", params)


# ============================================================================================
# the slate and sequential estimator contracts
# ============================================================================================
#: Relative tolerance of the slate and sequential checks: the pseudoinverse's weights come
#: from a least-squares solve, exact to about 1e-12 of the largest weight, not to the last bit.
RTOL_STRUCTURED: Final = 1e-9


@dataclass(frozen=True)
class _Planted:
    """The shape of the planted inputs of the slate and sequential contracts."""

    #: slate logs: slates of ``slate_size`` of ``items`` items (12 ordered slates) in
    #: ``contexts`` contexts
    slates: int = 600
    items: int = 4
    slate_size: int = 2
    contexts: int = 2
    #: trajectories: episodes of 1 to 4 steps, 3 actions, discount ``gamma``
    episodes: int = 400
    gamma: float = 0.9
    #: resamples of the bootstrap intervals the contracts check (enough for a stable interval)
    resamples: int = 200


_PLANTED: Final = _Planted()


def _close(check: str, estimator: Any, what: str, got: float, want: float) -> None:
    if not math.isclose(got, want, rel_tol=RTOL_STRUCTURED, abs_tol=RTOL_STRUCTURED * 1e-3):
        raise _fail(
            check,
            estimator,
            f"{what} is {got!r}, expected {want!r} (relative "
            f"difference {abs(got - want) / max(abs(want), 1e-300):.3g} > "
            f"{RTOL_STRUCTURED:g}).",
        )


def _quiet(run: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run()


def _finite_result(check: str, estimator: Any, res: Any) -> None:
    for what in ("value", "std_error"):
        got = getattr(res, what)
        if not math.isfinite(got):
            raise _fail(check, estimator, f"{what} is {got!r} on valid input, expected finite.")


def _interval_holds(check: str, estimator: Any, res: Any) -> None:
    """The stored interval and the normal, t and bootstrap intervals contain the value (the
    bootstrap where the estimate offers it: MAGIC's error has a bias term no resample sees)."""
    tol = RTOL_STRUCTURED * max(1.0, abs(res.value))
    intervals = [("the stored interval", (res.ci_low, res.ci_high))]
    offered = getattr(res.source, "methods", ("bootstrap",))
    for method in ("normal", "t", "bootstrap")[: 3 if "bootstrap" in offered else 2]:
        opts = {"rng": 0, "n_resamples": _PLANTED.resamples} if method == "bootstrap" else {}
        iv = _quiet(functools.partial(res.ci, 0.95, method, **opts))
        intervals.append((f"the {method} interval", (iv.low, iv.high)))
    for what, (low, high) in intervals:
        if not (low - tol <= res.value <= high + tol):
            raise _fail(
                check,
                estimator,
                f"{what} [{low!r}, {high!r}] does not contain the value {res.value!r}.",
            )


def _refuses(check: str, estimator: Any, what: str, run: Callable[[], Any]) -> None:
    """``run`` raises an error of ope's tree (not a foreign one, and does not succeed)."""
    try:
        _quiet(run)
    except OPEError:
        return
    except Exception as exc:  # noqa: BLE001 - the check reports any foreign exception
        raise _fail(
            check,
            estimator,
            f"{what} raised {type(exc).__name__}: {exc} (not an error of ope.exceptions).",
        ) from exc
    raise _fail(check, estimator, f"{what} was accepted; expected an ope error.")


# ------------------------------------------------------------------------------- slates
@dataclass(frozen=True)
class _Slates:
    """Planted slate logs (long layout) with the logger and a candidate as policies."""

    frame: pd.DataFrame
    logging: Any
    target: Any

    def replace(self, **columns: Any) -> _Slates:
        return dataclasses.replace(self, frame=self.frame.assign(**columns))


def _slate_instance(estimator: Any) -> Any:
    """A slate estimator object from an object, a class or a name of ``SLATE_ESTIMATORS``."""
    from ope.slates import SLATE_ESTIMATORS

    if isinstance(estimator, str):
        estimator = SLATE_ESTIMATORS[check_choice(estimator, "estimator", list(SLATE_ESTIMATORS))]
    if not callable(getattr(estimator, "estimate", None)):
        raise ParameterError(
            "`estimator` must be a slate estimator object (e.g. ope.SlateIPS()), its class, "
            f"or a name among {', '.join(SLATE_ESTIMATORS)}; got {estimator!r} "
            f"({type(estimator).__name__}), which has no estimate method."
        )
    return estimator() if isinstance(estimator, type) else estimator


def _planted_slates(gen: np.random.Generator, n: int = _PLANTED.slates) -> _Slates:
    """Contexts drawn uniformly, slates from a logger that gives every slate at least half
    the uniform probability, clicks that depend on item and position, plus noise."""
    from ope.slates import EnumeratedSlatePolicy

    slates = np.array(list(itertools.permutations(range(_PLANTED.items), _PLANTED.slate_size)))
    k = slates.shape[0]

    def policy() -> Any:
        prob = 0.5 / k + 0.5 * gen.dirichlet(np.ones(k), _PLANTED.contexts)
        return EnumeratedSlatePolicy(
            slates, prob / prob.sum(axis=1, keepdims=True), n_items=_PLANTED.items
        )

    logging, target = policy(), policy()
    prob = logging.distribution()[1]
    ctx = gen.integers(0, _PLANTED.contexts, n)
    cdf = np.cumsum(prob[ctx], axis=1)
    shown = np.minimum((gen.random(n)[:, None] > cdf).sum(axis=1), k - 1)
    items = slates[shown]
    click = 0.2 + 0.1 * items - 0.05 * np.arange(_PLANTED.slate_size)
    reward = (gen.random(items.shape) < click) + gen.normal(0.0, 0.1, items.shape)
    frame = pd.DataFrame(
        {
            "slate_id": np.repeat(np.arange(n), _PLANTED.slate_size),
            "position": np.tile(np.arange(_PLANTED.slate_size), n),
            "item": items.ravel(),
            "reward": reward.ravel(),
            "slate_propensity": np.repeat(prob[ctx, shown], _PLANTED.slate_size),
            "context": np.repeat(ctx, _PLANTED.slate_size),
        }
    )
    return _Slates(frame, logging, target)


def _slate_estimate(estimator: Any, data: _Slates, *, target: Any = None) -> Any:
    return _quiet(
        lambda: estimator.estimate(
            data.frame,
            data.target if target is None else target,
            logging=data.logging,
            policy=_POLICY,
        )
    )


def _check_slate_finite_value(estimator: Any, *, rng: Any = 0) -> None:
    """Valid logs give a finite value and standard error, on every planted slate."""
    check = "finite_value"
    res = _slate_estimate(estimator, _planted_slates(check_rng(rng)))
    _finite_result(check, estimator, res)
    if res.n != _PLANTED.slates:
        raise _fail(check, estimator, f"n is {res.n!r}, expected {_PLANTED.slates} slates.")


def _check_slate_interval(estimator: Any, *, rng: Any = 0) -> None:
    """The stored, normal, t and bootstrap intervals contain the estimate."""
    res = _slate_estimate(estimator, _planted_slates(check_rng(rng)))
    _interval_holds("interval_contains_estimate", estimator, res)


def _check_slate_on_policy(estimator: Any, *, rng: Any = 0) -> None:
    """The candidate equal to the logger makes every weight 1: the value is the mean slate
    reward (summed over the positions the estimator reads); for a doubly robust estimator (a
    ``model`` other than ``"zero"``), with a model whose expectation equals its value at the
    logged items."""
    check = "on_policy_value"
    data = _planted_slates(check_rng(rng))
    positions = getattr(estimator, "positions", None)
    reward = data.frame.pivot(index="slate_id", columns="position", values="reward").to_numpy()
    chosen = list(range(_PLANTED.slate_size)) if positions is None else list(positions)
    want = float(reward[:, chosen].sum(axis=1).mean())
    if getattr(estimator, "model", "zero") != "zero":
        # a doubly robust estimator on-policy: the model's terms cancel when its expectation
        # over the candidate's next item is its value at the logged one (q_expected = q_logged)
        q = check_rng(rng).normal(size=reward.shape)
        got = _quiet(
            lambda: estimator.estimate(
                data.frame, data.logging, logging=data.logging, policy=_POLICY, model=(q, q)
            )
        ).value
    else:
        got = _slate_estimate(estimator, data, target=data.logging).value
    _close(check, estimator, "on-policy value", got, want)


def _check_slate_permutation(estimator: Any, *, rng: Any = 0) -> None:
    """Relabelling the slates (a new order after sorting by id) changes neither value nor
    standard error."""
    check = "slate_permutation"
    gen = check_rng(rng)
    data = _planted_slates(gen)
    base = _slate_estimate(estimator, data)
    order = gen.permutation(_PLANTED.slates)
    moved = _slate_estimate(estimator, data.replace(slate_id=order[data.frame["slate_id"]]))
    _close(check, estimator, "value after relabelling the slates", moved.value, base.value)
    _close(
        check, estimator, "std_error after relabelling the slates", moved.std_error, base.std_error
    )


def _check_slate_reward_scaling(estimator: Any, *, rng: Any = 0) -> None:
    """``r -> a r`` scales the value by ``a`` and the standard error by ``|a|``."""
    check = "reward_scaling"
    data = _planted_slates(check_rng(rng))
    base = _slate_estimate(estimator, data)
    for a in (2.5, -1.5):
        scaled = _slate_estimate(estimator, data.replace(reward=a * data.frame["reward"]))
        _close(check, estimator, f"value for rewards x {a}", scaled.value, a * base.value)
        _close(
            check,
            estimator,
            f"std_error for rewards x {a}",
            scaled.std_error,
            abs(a) * base.std_error,
        )


def _check_slate_reward_shift(estimator: Any, *, rng: Any = 0) -> None:
    """``r -> r + c`` shifts the value by ``c`` times the estimator's value of the constant
    reward 1 (the number of positions read, for the self-normalized ones)."""
    check = "reward_shift"
    data = _planted_slates(check_rng(rng))
    base = _slate_estimate(estimator, data).value
    unit = _slate_estimate(estimator, data.replace(reward=1.0)).value
    if getattr(estimator, "self_normalized", False):
        positions = getattr(estimator, "positions", None)
        _close(
            check,
            estimator,
            "self-normalized value of the constant reward 1",
            unit,
            float(_PLANTED.slate_size if positions is None else len(positions)),
        )
    c = 0.75
    shifted = _slate_estimate(estimator, data.replace(reward=data.frame["reward"] + c)).value
    _close(check, estimator, f"value for rewards + {c}", shifted, base + c * unit)


def _check_slate_refuses_bad_input(estimator: Any, *, rng: Any = 0) -> None:
    """A NaN reward, a slate probability above 1, a candidate that is no policy and logs that
    are no table are refused with an error of ope's tree."""
    check = "refuses_bad_input"
    data = _planted_slates(check_rng(rng))
    reward = data.frame["reward"].to_numpy().copy()
    reward[3] = np.nan
    prob = data.frame["slate_propensity"].to_numpy().copy()
    prob[:2] = 1.5
    cases = [
        ("a NaN reward", lambda: _slate_estimate(estimator, data.replace(reward=reward))),
        (
            "a slate probability of 1.5",
            lambda: _slate_estimate(estimator, data.replace(slate_propensity=prob)),
        ),
        (
            "target='greedy' (a string, not a policy)",
            lambda: _slate_estimate(estimator, data, target="greedy"),
        ),
        (
            "logs given as a number",
            lambda: estimator.estimate(3, data.target, logging=data.logging),
        ),
    ]
    for what, run in cases:
        _refuses(check, estimator, what, run)


_SLATE_CHECKS: Final[tuple[tuple[str, _Check], ...]] = (
    ("finite_value", _check_slate_finite_value),
    ("interval_contains_estimate", _check_slate_interval),
    ("on_policy_value", _check_slate_on_policy),
    ("slate_permutation", _check_slate_permutation),
    ("reward_scaling", _check_slate_reward_scaling),
    ("reward_shift", _check_slate_reward_shift),
    ("refuses_bad_input", _check_slate_refuses_bad_input),
)


def slate_estimator_checks(estimator: Any) -> Iterator[tuple[str, Callable[..., None]]]:
    """The slate estimator contract's checks for one estimator, as ``(check_name, check)``.

    Parameters
    ----------
    estimator : slate estimator object, class or name
        E.g. ``SlateIPS()``, ``IndependentIPS(self_normalized=True)``, or a key of
        :data:`ope.slates.SLATE_ESTIMATORS` (a class or name is built with its defaults).

    Returns
    -------
    iterator of (str, callable)
        In this order: ``finite_value`` (finite value and standard error on valid logs),
        ``interval_contains_estimate`` (stored, normal, t and bootstrap intervals),
        ``on_policy_value`` (the logger as candidate gives the mean slate reward),
        ``slate_permutation`` (relabelled slates change nothing), ``reward_scaling``
        (value x ``a``, standard error x ``|a|``), ``reward_shift`` (value + ``c`` times the
        value of the constant reward 1, the number of positions when self-normalized) and
        ``refuses_bad_input`` (NaN rewards, probabilities above 1, a candidate that is no
        policy, logs that are no table: errors of :mod:`ope.exceptions`). ``check(rng=0)``
        returns None or raises ``AssertionError`` naming the check and the numbers.

    Raises
    ------
    ope.ParameterError
        ``estimator`` is an unknown name or has no ``estimate`` method.

    Examples
    --------
    >>> from ope.slates import CascadeIPS
    >>> from ope.testing import slate_estimator_checks
    >>> checks = dict(slate_estimator_checks(CascadeIPS(self_normalized=True)))
    >>> list(checks)[:3]
    ['finite_value', 'interval_contains_estimate', 'on_policy_value']
    >>> checks["reward_shift"](rng=1)   # passes: returns None
    """
    est = _slate_instance(estimator)
    return iter([(name, functools.partial(check, est)) for name, check in _SLATE_CHECKS])


def check_slate_estimator(estimator: Any, *, rng: Any = 0) -> None:
    """Run every check of the slate estimator contract; raise on the first that fails.

    Parameters
    ----------
    estimator : slate estimator object, class or name
        A slate estimator of :mod:`ope.slates` (or any object with the same ``estimate(logs,
        target, *, logging=None, policy=None)``), with its settings; see
        :func:`slate_estimator_checks` for the checks.
    rng : int, numpy.random.Generator or None, default 0
        Randomness of the planted logs and policies.

    Raises
    ------
    AssertionError
        ``"<check> failed for <estimator>: ..."`` with the numbers.
    ope.ParameterError
        ``estimator`` is an unknown name or has no ``estimate`` method.

    Examples
    --------
    A broken estimator (slate IPS that drops the last slot's reward) fails on-policy:

    >>> import dataclasses
    >>> from ope.slates import SlateIPS
    >>> from ope.testing import check_slate_estimator
    >>> @dataclasses.dataclass(frozen=True)
    ... class FirstSlot(SlateIPS):
    ...     def _weights(self, logs, target, logging):
    ...         w = super()._weights(logs, target, logging)
    ...         w[:, -1] = 0.0
    ...         return w
    >>> check_slate_estimator(FirstSlot())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: on_policy_value failed for FirstSlot(self_normalized=False): ...
    """
    for _, check in slate_estimator_checks(estimator):
        check(rng=rng)


# --------------------------------------------------------------------------- sequential
def _sequential_name(estimator: Any) -> str:
    from ope.sequential import SEQUENTIAL_ESTIMATORS

    return check_choice(estimator, "estimator", SEQUENTIAL_ESTIMATORS)


def _planted_episodes(gen: np.random.Generator, n: int = _PLANTED.episodes) -> pd.DataFrame:
    """Episodes of 1 to 4 steps that all terminate, 3 actions logged with (0.2, 0.3, 0.5), a
    random stochastic candidate, and per-step model values ``q`` and ``v``."""
    lengths = gen.integers(1, 5, n)
    steps = int(lengths.sum())
    episode = np.repeat(np.arange(n), lengths)
    step = np.arange(steps) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    logging_dist = np.array([0.2, 0.3, 0.5])
    action = gen.choice(3, steps, p=logging_dist)
    target = gen.dirichlet(np.ones(3), steps)[np.arange(steps), action]
    return pd.DataFrame(
        {
            "episode_id": episode,
            "step": step,
            "action": action,
            "propensity": logging_dist[action],
            "reward": 0.5 + 0.2 * action + gen.normal(0.0, 0.5, steps),
            "done": step == np.repeat(lengths - 1, lengths),
            "target__planted": target,
            "state": gen.integers(0, 3, steps),  # the marginalized estimators' states
            "q": gen.normal(1.0, 0.3, steps),
            "v": gen.normal(1.0, 0.3, steps),
        }
    )


def _sequential_estimate(estimator: str, frame: pd.DataFrame, **options: Any) -> Any:
    from ope.io import read_trajectories
    from ope.sequential import sequential_estimate
    from ope.sequential._steps import MODEL_BASED

    model = {"q_hat": "q", "v_hat": "v"} if estimator in MODEL_BASED else {}
    # the estimator's name is one of SEQUENTIAL_ESTIMATORS, checked by sequential_estimate
    kwargs: dict[str, Any] = {"gamma": _PLANTED.gamma, "estimator": estimator, **model, **options}
    return _quiet(lambda: sequential_estimate(read_trajectories(frame), _POLICY, **kwargs))


def _check_sequential_finite_value(estimator: str, *, rng: Any = 0) -> None:
    """Valid trajectories give a finite value and standard error, one row per episode."""
    check = "finite_value"
    res = _sequential_estimate(estimator, _planted_episodes(check_rng(rng)))
    _finite_result(check, estimator, res)
    if res.n != _PLANTED.episodes:
        raise _fail(check, estimator, f"n is {res.n!r}, expected {_PLANTED.episodes} episodes.")


def _check_sequential_interval(estimator: str, *, rng: Any = 0) -> None:
    """The stored, normal, t and bootstrap intervals contain the estimate."""
    res = _sequential_estimate(estimator, _planted_episodes(check_rng(rng)))
    _interval_holds("interval_contains_estimate", estimator, res)


def _check_sequential_on_policy(estimator: str, *, rng: Any = 0) -> None:
    """The candidate equal to the logger makes every ratio 1: the value is the mean discounted
    return (with ``q_hat == v_hat`` the doubly robust corrections cancel; both are the
    realized discounted return from each step, so MAGIC's partial returns, which end on the
    model's value, are the return too)."""
    check = "on_policy_value"
    frame = _planted_episodes(check_rng(rng))
    g = _PLANTED.gamma
    disc = g ** frame["step"].to_numpy(dtype=np.float64)
    ahead = (frame["reward"] * disc)[::-1].groupby(frame["episode_id"][::-1]).cumsum()[::-1]
    to_go = ahead.to_numpy() / disc
    frame = frame.assign(target__planted=frame["propensity"], q=to_go, v=to_go)
    discounted = frame["reward"] * _PLANTED.gamma ** frame["step"]
    want = float(discounted.groupby(frame["episode_id"]).sum().mean())
    _close(check, estimator, "on-policy value", _sequential_estimate(estimator, frame).value, want)


def _check_episode_permutation(estimator: str, *, rng: Any = 0) -> None:
    """Relabelling the episodes (a new order after sorting by id) changes neither value nor
    standard error."""
    check = "episode_permutation"
    gen = check_rng(rng)
    frame = _planted_episodes(gen)
    base = _sequential_estimate(estimator, frame)
    order = gen.permutation(_PLANTED.episodes)
    moved = _sequential_estimate(estimator, frame.assign(episode_id=order[frame["episode_id"]]))
    _close(check, estimator, "value after relabelling the episodes", moved.value, base.value)
    _close(
        check,
        estimator,
        "std_error after relabelling the episodes",
        moved.std_error,
        base.std_error,
    )


def _check_sequential_reward_scaling(estimator: str, *, rng: Any = 0) -> None:
    """``r -> a r`` (with the model scaled too) scales the value by ``a`` and the standard
    error by ``|a|``."""
    check = "reward_scaling"
    frame = _planted_episodes(check_rng(rng))
    base = _sequential_estimate(estimator, frame)
    for a in (2.5, -1.5):
        scaled = _sequential_estimate(
            estimator, frame.assign(reward=a * frame["reward"], q=a * frame["q"], v=a * frame["v"])
        )
        _close(check, estimator, f"value for rewards x {a}", scaled.value, a * base.value)
        _close(
            check,
            estimator,
            f"std_error for rewards x {a}",
            scaled.std_error,
            abs(a) * base.std_error,
        )


def _check_sequential_refuses_bad_input(estimator: str, *, rng: Any = 0) -> None:
    """A NaN reward, a negative candidate probability, a discount above 1 and an unknown
    candidate are refused with an error of ope's tree."""
    check = "refuses_bad_input"
    frame = _planted_episodes(check_rng(rng))
    reward = frame["reward"].to_numpy().copy()
    reward[5] = np.nan
    target = frame["target__planted"].to_numpy().copy()
    target[2] = -0.5
    cases = [
        ("a NaN reward", lambda: _sequential_estimate(estimator, frame.assign(reward=reward))),
        (
            "a candidate probability of -0.5",
            lambda: _sequential_estimate(estimator, frame.assign(target__planted=target)),
        ),
        ("gamma=1.5", lambda: _sequential_estimate(estimator, frame, gamma=1.5)),
        (
            "confidence_level=95",
            lambda: _sequential_estimate(estimator, frame, confidence_level=95),
        ),
    ]
    for what, run in cases:
        _refuses(check, estimator, what, run)


_SEQUENTIAL_CHECKS: Final[tuple[tuple[str, _Check], ...]] = (
    ("finite_value", _check_sequential_finite_value),
    ("interval_contains_estimate", _check_sequential_interval),
    ("on_policy_value", _check_sequential_on_policy),
    ("episode_permutation", _check_episode_permutation),
    ("reward_scaling", _check_sequential_reward_scaling),
    ("refuses_bad_input", _check_sequential_refuses_bad_input),
)


def sequential_estimator_checks(estimator: str) -> Iterator[tuple[str, Callable[..., None]]]:
    """The sequential estimator contract's checks for one estimator, as ``(check_name, check)``.

    Parameters
    ----------
    estimator : str
        One of :data:`ope.sequential.SEQUENTIAL_ESTIMATORS` (the ``estimator`` argument of
        :func:`ope.sequential.sequential_estimate`); the doubly robust ones get the planted
        ``q_hat`` and ``v_hat``.

    Returns
    -------
    iterator of (str, callable)
        In this order: ``finite_value``, ``interval_contains_estimate`` (stored, normal, t and
        bootstrap intervals), ``on_policy_value`` (the logger as candidate gives the mean
        discounted return), ``episode_permutation``, ``reward_scaling`` and
        ``refuses_bad_input`` (NaN rewards, negative probabilities, ``gamma`` above 1, a
        confidence level of 95: errors of :mod:`ope.exceptions`). ``check(rng=0)`` returns
        None or raises ``AssertionError`` naming the check and the numbers.

    Raises
    ------
    ope.ParameterError
        ``estimator`` is not one of :data:`ope.sequential.SEQUENTIAL_ESTIMATORS`.

    Examples
    --------
    >>> from ope.testing import sequential_estimator_checks
    >>> checks = dict(sequential_estimator_checks("wpdis"))
    >>> list(checks)[2:4]
    ['on_policy_value', 'episode_permutation']
    >>> checks["on_policy_value"](rng=2)   # passes: returns None
    """
    name = _sequential_name(estimator)
    return iter(
        [(check_name, functools.partial(check, name)) for check_name, check in _SEQUENTIAL_CHECKS]
    )


def check_sequential_estimator(estimator: str, *, rng: Any = 0) -> None:
    """Run every check of the sequential estimator contract; raise on the first that fails.

    Parameters
    ----------
    estimator : str
        One of :data:`ope.sequential.SEQUENTIAL_ESTIMATORS`; see
        :func:`sequential_estimator_checks` for the checks.
    rng : int, numpy.random.Generator or None, default 0
        Randomness of the planted trajectories.

    Raises
    ------
    AssertionError
        ``"<check> failed for '<estimator>': ..."`` with the numbers.
    ope.ParameterError
        ``estimator`` is not a sequential estimator's name.

    Examples
    --------
    >>> from ope.testing import check_sequential_estimator
    >>> check_sequential_estimator("dr")
    >>> check_sequential_estimator("q_learning")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: `estimator` must be one of 'is', 'pdis', ...
    """
    for _, check in sequential_estimator_checks(estimator):
        check(rng=rng)


# ------------------------------------------------------------------------ continuous actions
#: The planted continuous-action logs: rows, the fixed bandwidth of the checks (the bandwidth
#: rule itself is tested in tests/test_continuous.py) and the clip level of clipped IPS.
_CONTINUOUS_ROWS: Final = 600
_CONTINUOUS_BANDWIDTH: Final = 0.4
_CONTINUOUS_CLIP: Final = 5.0


def _continuous_name(estimator: Any) -> str:
    from ope.continuous import CONTINUOUS_ESTIMATORS

    return check_choice(estimator, "estimator", CONTINUOUS_ESTIMATORS)


def _planted_continuous(gen: np.random.Generator) -> pd.DataFrame:
    """Rows of a Gaussian logger around ``x``, a deterministic candidate ``pi`` (``x`` shifted
    by 0.3), the logger itself by its density (``same``), and model columns ``q`` (at the logged
    action) and ``v__<name>`` (at the candidate's)."""
    n = _CONTINUOUS_ROWS
    x = gen.normal(0.0, 1.0, n)
    action = x + gen.normal(0.0, 1.0, n)
    density = np.exp(-0.5 * (action - x) ** 2) / math.sqrt(2.0 * math.pi)
    q = 1.0 - 0.5 * (action - x) ** 2
    return pd.DataFrame(
        {
            "x": x,
            "action": action,
            "density": density,
            "reward": q + gen.normal(0.0, 0.5, n),
            "target__pi": x + 0.3,
            "density__same": density,
            "q": q,
            "v__pi": np.full(n, 1.0 - 0.5 * 0.09),
            "v__same": q,  # on-policy: the model's value at the logged actions
        }
    )


def _continuous_estimate(estimator: str, frame: pd.DataFrame, policy: str = "pi") -> Any:
    from ope.continuous import evaluate_continuous

    options: dict[str, Any] = {"estimators": [estimator]}
    if estimator == "dr":
        options.update(q_column="q", v_column="v__{policy}")
    if estimator == "clipped_ips":
        options["max_weight"] = _CONTINUOUS_CLIP
    return _quiet(
        lambda: evaluate_continuous(frame, [policy], bandwidth=_CONTINUOUS_BANDWIDTH, **options)[
            policy, estimator
        ]
    )


def _check_continuous_finite_value(estimator: str, *, rng: Any = 0) -> None:
    """Valid logs give a finite value and standard error over every row."""
    check = "finite_value"
    res = _continuous_estimate(estimator, _planted_continuous(check_rng(rng)))
    _finite_result(check, estimator, res)
    if res.n != _CONTINUOUS_ROWS:
        raise _fail(check, estimator, f"n is {res.n!r}, expected {_CONTINUOUS_ROWS} rows.")


def _check_continuous_interval(estimator: str, *, rng: Any = 0) -> None:
    """The stored, normal, t and bootstrap intervals contain the estimate."""
    res = _continuous_estimate(estimator, _planted_continuous(check_rng(rng)))
    _interval_holds("interval_contains_estimate", estimator, res)


def _check_continuous_on_policy(estimator: str, *, rng: Any = 0) -> None:
    """The logger as candidate (its own density: every weight 1) gives the mean reward (DR
    with the model's value at the logged actions: the mean reward too)."""
    check = "on_policy_value"
    frame = _planted_continuous(check_rng(rng))
    res = _continuous_estimate(estimator, frame, policy="same")
    _close(check, estimator, "the on-policy value", res.value, float(frame["reward"].mean()))


def _check_continuous_permutation(estimator: str, *, rng: Any = 0) -> None:
    """Reordering the rows leaves the estimate and its standard error unchanged."""
    check = "row_permutation"
    gen = check_rng(rng)
    frame = _planted_continuous(gen)
    a = _continuous_estimate(estimator, frame)
    b = _continuous_estimate(estimator, frame.iloc[gen.permutation(len(frame))])
    _close(check, estimator, "the value after a permutation", b.value, a.value)
    _close(check, estimator, "the standard error after a permutation", b.std_error, a.std_error)


def _check_continuous_reward_scaling(estimator: str, *, rng: Any = 0) -> None:
    """Rewards (and the model's predictions) times 3 give 3 times the value and error."""
    check = "reward_scaling"
    frame = _planted_continuous(check_rng(rng))
    scaled = frame.assign(
        reward=3.0 * frame["reward"], q=3.0 * frame["q"], v__pi=3.0 * frame["v__pi"]
    )
    a = _continuous_estimate(estimator, frame)
    b = _continuous_estimate(estimator, scaled)
    _close(check, estimator, "the scaled value", b.value, 3.0 * a.value)
    _close(check, estimator, "the scaled standard error", b.std_error, 3.0 * a.std_error)


def _check_continuous_reward_shift(estimator: str, *, rng: Any = 0) -> None:
    """Rewards (and the model) plus 2: SNIPS and DR move by 2, IPS by 2 times the mean weight."""
    check = "reward_shift"
    if estimator == "clipped_ips":
        return  # clipping's bias moves with the shift: no identity to hold
    frame = _planted_continuous(check_rng(rng))
    shifted = frame.assign(
        reward=frame["reward"] + 2.0, q=frame["q"] + 2.0, v__pi=frame["v__pi"] + 2.0
    )
    a = _continuous_estimate(estimator, frame)
    b = _continuous_estimate(estimator, shifted)
    if estimator == "ips":
        from ope.continuous import kernel

        u = (frame["target__pi"] - frame["action"]) / _CONTINUOUS_BANDWIDTH
        w = kernel(u.to_numpy()) / (_CONTINUOUS_BANDWIDTH * frame["density"].to_numpy())
        want = a.value + 2.0 * float(w.mean())
    else:
        want = a.value + 2.0
    _close(check, estimator, "the shifted value", b.value, want)


def _check_continuous_refuses_bad_input(estimator: str, *, rng: Any = 0) -> None:
    """A density of 0, a NaN reward, a bandwidth of 0: errors of :mod:`ope.exceptions`."""
    from ope.continuous import evaluate_continuous

    check = "refuses_bad_input"
    frame = _planted_continuous(check_rng(rng))
    bad_density = frame.assign(density=np.where(np.arange(len(frame)) == 3, 0.0, frame["density"]))
    _refuses(
        check,
        estimator,
        "a logged density of 0",
        lambda: _continuous_estimate(estimator, bad_density),
    )
    bad_reward = frame.assign(reward=np.where(np.arange(len(frame)) == 3, np.nan, frame["reward"]))
    _refuses(check, estimator, "a NaN reward", lambda: _continuous_estimate(estimator, bad_reward))
    _refuses(
        check,
        estimator,
        "a bandwidth of 0",
        lambda: evaluate_continuous(frame, ["pi"], bandwidth=0.0, estimators=[estimator]),
    )


_CONTINUOUS_CHECKS: Final[tuple[tuple[str, _Check], ...]] = (
    ("finite_value", _check_continuous_finite_value),
    ("interval_contains_estimate", _check_continuous_interval),
    ("on_policy_value", _check_continuous_on_policy),
    ("row_permutation", _check_continuous_permutation),
    ("reward_scaling", _check_continuous_reward_scaling),
    ("reward_shift", _check_continuous_reward_shift),
    ("refuses_bad_input", _check_continuous_refuses_bad_input),
)


def continuous_estimator_checks(estimator: str) -> Iterator[tuple[str, Callable[..., None]]]:
    """The continuous-action estimator contract's checks for one estimator, as
    ``(check_name, check)``.

    Parameters
    ----------
    estimator : str
        One of :data:`ope.continuous.CONTINUOUS_ESTIMATORS` (kernel IPS, SNIPS, clipped IPS,
        DR), run by :func:`ope.evaluate_continuous` at a fixed bandwidth on planted logs (DR
        with planted model columns).

    Returns
    -------
    iterator of (str, callable)
        In this order: ``finite_value``, ``interval_contains_estimate``, ``on_policy_value``
        (the logger as candidate gives the mean reward), ``row_permutation``,
        ``reward_scaling``, ``reward_shift`` and ``refuses_bad_input``. ``check(rng=0)``
        returns None or raises ``AssertionError`` naming the check and the numbers.

    Examples
    --------
    >>> from ope.testing import continuous_estimator_checks
    >>> checks = dict(continuous_estimator_checks("snips"))
    >>> checks["on_policy_value"](rng=1)   # passes: returns None
    """
    name = _continuous_name(estimator)
    return iter(
        [(check_name, functools.partial(check, name)) for check_name, check in _CONTINUOUS_CHECKS]
    )


def check_continuous_estimator(estimator: str, *, rng: Any = 0) -> None:
    """Run every check of the continuous-action estimator contract; raise on the first failure
    (see :func:`continuous_estimator_checks`).

    Examples
    --------
    >>> from ope.testing import check_continuous_estimator
    >>> check_continuous_estimator("dr")
    """
    for _, check in continuous_estimator_checks(estimator):
        check(rng=rng)


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# ============================================================================================
# the hostile-input contract of every public entry point
# ============================================================================================
#: Hypothesis draws per (entry point, argument) after the fixed catalogue, in the default suite.
CONTRACT_EXAMPLES: Final = 3

#: The same in the slow suite.
CONTRACT_EXAMPLES_SLOW: Final = 40

#: Catalogue values per argument in the fast suite (every value runs in the slow suite).
CONTRACT_SAMPLE_FAST: Final = 3

#: Hypothesis deadline of one call (ms): generous, the planted logs have 60 rows.
CONTRACT_DEADLINE_MS: Final = 5000

#: Exit codes a CLI run may end with on hostile input: ok, usage error, invalid data, an output
#: that cannot be written.
_CLI_CODES: Final = (0, 2, 65, 73)

_NAN, _INF = float("nan"), float("inf")
_BIDI: Final = "\u202e"  # right-to-left override
_SURROGATE: Final = "\udcff"  # an unpaired surrogate: not encodable as UTF-8


class _Array:
    """A hostile value derived from the valid one (an array; a DataFrame for logs), of the same
    length unless said otherwise."""

    def __init__(self, label: str, make: Callable[[Any], Any]) -> None:
        self.label, self.make = label, make

    def __repr__(self) -> str:
        return f"<{self.label}>"


def _arrays_hostile() -> list[Any]:
    return [
        _Array("all NaN", lambda v: np.full(len(v), _NAN)),
        _Array("all +inf", lambda v: np.full(len(v), _INF)),
        _Array("all -1", lambda v: np.full(len(v), -1.0)),
        _Array("all 1e308", lambda v: np.full(len(v), 1e308)),
        _Array("all 0", lambda v: np.zeros(len(v))),
        _Array("empty", lambda v: np.empty(0)),
        _Array("one row short", lambda v: np.asarray(v)[:-1]),
        _Array("2-d", lambda v: np.stack([np.asarray(v)] * 2, axis=1)),
        _Array("strings", lambda v: np.array(["x"] * len(v))),
        _Array("objects", lambda v: np.array([object()] * len(v), dtype=object)),
        "0.5",
        3,
    ]


_NUMBERS: Final = [
    _NAN,
    _INF,
    -_INF,
    -1.0,
    0.0,
    1e308,
    5e-324,
    "0.5",
    True,
    [0.5],
    complex(1, 1),
    10**400,
    np.float32(_NAN),
]
_TEXTS: Final = ["", "\x00", _BIDI + "ydeerg", _SURROGATE, "a" * 100_000, "\n\r\t", 3, b"greedy"]


class _FileCase:
    """A file-system case, built in a temporary folder when the call is made."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<path: {self.label}>"

    def build(self, tmp: Path) -> Path:
        import gzip
        import os

        path = tmp / f"case-{self.label.replace(' ', '-')}.parquet"
        valid = pa.table(
            {"reward": [1.0, 0.0], "propensity": [0.5, 0.5], "action": [0, 1], "event_id": [0, 1]}
        )
        if self.label == "missing":
            return path
        if self.label == "directory":
            path.mkdir()
        elif self.label == "fifo":
            os.mkfifo(path)
            _FifoWriter(path).start()
        elif self.label == "empty":
            path.write_bytes(b"")
        elif self.label in ("truncated parquet", "gzip parquet"):
            pq.write_table(valid, path)
            data = path.read_bytes()
            path.write_bytes(
                data[: len(data) // 2] if self.label == "truncated parquet" else gzip.compress(data)
            )
        elif self.label == "undecodable bytes":
            path.write_bytes(b"\xff\xfe\x00\x80garbage" * 10)
        elif self.label == "dangling link":
            path.symlink_to(tmp / "nowhere.parquet")
        elif self.label == "bidi name":
            path = tmp / f"logs{_BIDI}.parquet"
        return path


class _FifoWriter:
    """Keeps a FIFO from hanging the harness: every 50 ms it opens and closes each end without
    blocking, so a reader blocked in ``open`` gets end-of-file and a writer a broken pipe.

    :meth:`release` stops the thread once the call has returned.
    """

    def __init__(self, path: Path) -> None:
        import threading

        self.path = path
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poke, daemon=True)
        _FIFO_WRITERS.append(self)

    def _poke(self) -> None:
        import os

        while not self.stop.wait(0.05):
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                with contextlib.suppress(OSError):
                    os.close(os.open(self.path, flags))

    def start(self) -> None:
        self.thread.start()

    def release(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


_FIFO_WRITERS: list[_FifoWriter] = []


def _release_fifos() -> None:
    while _FIFO_WRITERS:
        _FIFO_WRITERS.pop().release()


_FILE_CASES: Final = (
    "missing",
    "directory",
    "fifo",
    "empty",
    "truncated parquet",
    "gzip parquet",
    "undecodable bytes",
    "dangling link",
    "bidi name",
)

#: The fixed catalogue of hostile values per glossary term (arrays are derived from the valid
#: array of the call, paths built in a temporary folder).
HOSTILE_VALUES: Final[dict[str, list[Any]]] = {
    "reward": _arrays_hostile(),
    "propensity": _arrays_hostile() + [_Array("above 1", lambda v: np.full(len(v), 1.5))],
    "target_propensity": _arrays_hostile() + [_Array("above 1", lambda v: np.full(len(v), 1.5))],
    "weight": _arrays_hostile(),
    "confidence_level": _NUMBERS + [1.0, 95, 0.05 * 1j],
    "max_weight": _NUMBERS,
    "positive_real": _NUMBERS,
    "real": _NUMBERS,
    "fraction": _NUMBERS + [1.5],
    "count": [0, -1, 2.5, _NAN, "3", True, 10**30, np.int64(-5)],
    "rng": [-1, "0", 1.5, 2**200, object(), True, [_NAN]],
    "reward_range": [
        (1.0, 0.0),
        (_NAN, 1.0),
        (0.0, _INF),
        "0,1",
        (0.0,),
        5,
        (0.0, 1.0, 2.0),
        (0.0, 0.0),
        ("a", "b"),
    ],
    "choice": ["", "\x00", _BIDI + "ips", "IPS ", 3, ["ips"], _SURROGATE],
    "names": [[], ["\x00"], [3], ["no_such_policy"], [["a"]], 3.5, [_BIDI]],
    "columns": [[], ["no_such_column"], [3], "\x00", [["a"]], 3.5],
    "column": _TEXTS,
    "policy_name": _TEXTS,
    "text": _TEXTS,
    "actions": [[], [_NAN], "abc", [[1]], [object()]],
    "mapping": [{"reward": "no_such_column"}, {3: "x"}, "reward", {"reward": "\x00"}, [1]],
    "flag": ["yes", 2, _NAN],
    "logs": [
        pd.DataFrame(),
        pd.DataFrame({"x": [1.0]}),
        3,
        ["a"],
        _FileCase("missing"),
        _Array("propensity NaN", lambda v: v.assign(propensity=_NAN)),
        _Array("reward strings", lambda v: v.assign(reward="x")),
        _Array("no rows", lambda v: v.iloc[:0]),
        _Array("reward 1e308", lambda v: v.assign(reward=1e308)),
    ],
    "path": [_FileCase(label) for label in _FILE_CASES] + [3, ""],
    "object": [object(), _NAN, "\x00"],
}

#: Hostile command-line values per term of a flag (strings, as typed).
_CLI_VALUES: Final[dict[str, list[Any]]] = {
    "real": ["nan", "inf", "-1", "0", "1e309", "abc", "", _BIDI + "1", "1e400", "-inf", "--json"],
    "count": ["0", "-1", "2.5", "1e100", "abc", "99999999999999999999", "--json"],
    "choice": ["", _BIDI + "raise", "RAISE", "--json", _SURROGATE],
    "text": [
        "",
        _BIDI + "greedy",
        "\n",
        "a" * 10_000,
        "\x1b]0;PWNED\x07\x1b[2J",
        "--json",
        _SURROGATE,
        "\x00",
    ],
    "path": [_FileCase(label) for label in _FILE_CASES] + ["", "-", "--json"],
}


def hostile_strategy(term: str) -> Any:
    """The Hypothesis strategy of hostile (and some valid) values of a glossary term.

    Numbers draw from all floats (NaN, infinities, subnormals included) and huge integers, texts
    from all of Unicode (control, bidi, surrogate characters), containers from empty to
    oversized lists; ``path`` from the file-system cases; ``object`` from values of every type.
    """
    from hypothesis import strategies as st

    floats = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
    ints = st.integers(min_value=-(2**70), max_value=2**70)
    texts = st.text(st.characters(codec=None, categories=None), max_size=40)
    anything = st.one_of(
        floats, ints, texts, st.none(), st.booleans(), st.lists(floats, max_size=5)
    )
    by_term = {
        "count": st.one_of(ints, floats),
        "rng": st.one_of(ints, floats, texts),
        "reward_range": st.one_of(st.tuples(floats, floats), st.lists(floats, max_size=4)),
        "choice": texts,
        "column": texts,
        "policy_name": texts,
        "text": texts,
        "names": st.lists(texts, max_size=5),
        "columns": st.lists(texts, max_size=5),
        "actions": st.lists(st.one_of(ints, floats), max_size=5),
        "flag": anything,
        "path": st.sampled_from([_FileCase(label) for label in _FILE_CASES]),
    }
    if term in by_term:
        return by_term[term]
    if term in ("confidence_level", "max_weight", "positive_real", "real", "fraction"):
        return st.one_of(floats, ints)
    if term in ("reward", "propensity", "target_propensity", "weight"):
        return st.lists(floats, min_size=0, max_size=8).map(np.asarray)
    return anything


def _finite(result: Any) -> str | None:
    """None when the numbers a result carries are finite, else what is not."""
    if isinstance(result, (float, np.floating)):
        return None if math.isfinite(result) else f"returned {result!r}"
    if isinstance(result, np.ndarray) and result.dtype.kind == "f":
        return None if np.isfinite(result).all() else "returned an array with non-finite entries"
    for attr in ("value", "std_error"):
        got = getattr(result, attr, None)
        if isinstance(got, (float, np.floating)) and not math.isfinite(got):
            return f"returned {attr}={got!r}"
    return None


def _materialize(value: Any, original: Any, tmp: Path) -> Any:
    if isinstance(value, _FileCase):
        return value.build(tmp)
    if isinstance(value, _Array):
        base = original if original is not None else np.ones(3)
        if isinstance(base, (str, Path)) and str(base).endswith(".parquet"):
            base = pd.read_parquet(base)  # a log given as a file: vary its table
        table = getattr(base, "table", None)  # a log object (BanditLogs): vary its table
        if isinstance(table, pa.Table):
            base = table.to_pandas()
        elif isinstance(table, pd.DataFrame):
            base = table
        return value.make(base if isinstance(base, pd.DataFrame) else np.asarray(base))
    return value


def _names_argument(exc: BaseException, names: Sequence[str]) -> bool:
    """Whether the message names one of ``names``: as a whole word for names of four
    characters or fewer (``d`` or ``name`` inside another word does not count)."""
    import re

    text = str(exc)
    return any(
        name
        and (
            re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)
            if len(name) <= 4
            else name in text
        )
        for name in names
    )


def _accepted_names(argument: str, term: str, value: Any) -> list[str]:
    names = [argument, argument.lstrip("-"), argument.lstrip("-").replace("-", "_")]
    if isinstance(value, Path):
        names += [str(value), value.name]
    if term == "logs":  # data errors name the column or the file
        names += [
            "reward",
            "propensity",
            "action",
            "event_id",
            "target__",
            "logs",
            "column",
            "rows",
            "source",
        ]
    return names


def _warm_up(entry: Any) -> None:
    """Run the entry's valid call once, whatever it gives: the one-time costs of a first call
    (Spark's JVM and session, numba loading the compiled kernel) are paid before the timed
    calls, whose deadline is there to catch a call that hangs."""
    with tempfile.TemporaryDirectory() as tmp:
        call = entry.valid(Path(tmp))
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore")
            call.target(*call.args, **dict(call.kwargs))


def _one_python_call(entry: Any, argument: str, value: Any, tmp: Path) -> str | None:
    """Run the entry's valid call with ``argument`` replaced; None or what broke the contract."""
    call = entry.valid(tmp)
    kwargs = dict(call.kwargs)
    original = kwargs.get(argument)
    try:
        hostile = _materialize(value, original, tmp)
    except (AttributeError, TypeError, ValueError):  # a table case for a value with no table
        return None
    kwargs[argument] = hostile
    shown = f"{entry.name}({argument}={repr(value)[:80]})".replace("\n", " ")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call.target(*call.args, **kwargs)
    except OPEError as exc:
        if _names_argument(exc, _accepted_names(argument, entry.terms.get(argument, ""), hostile)):
            return None
        return f"{shown} raised {type(exc).__name__} not naming `{argument}`: {str(exc)[:300]}"
    except Exception as exc:  # noqa: BLE001 - any foreign exception breaks the contract
        return (
            f"{shown} raised {type(exc).__name__} (not from ope's exception tree): {str(exc)[:300]}"
        )
    bad = _finite(result)
    return None if bad is None else f"{shown} {bad}"


def _cli_argv(valid: list[str], flag: str, value: str) -> list[str]:
    """The valid argv with ``flag``'s value replaced (a positional at its place after the
    subcommand, in the parser's order: ``ope import FORMAT SRC`` has SRC at argv[2])."""
    from ope._entrypoints import cli_positionals

    argv = list(valid)
    if not flag.startswith("-"):
        argv[1 + cli_positionals(argv[0]).index(flag)] = value
        return argv
    pair = [value, "1"] if flag == "--reward-range" else [value]
    if flag in argv:
        i = argv.index(flag)
        argv[i + 1 : i + 2] = pair[:1]
        return argv
    return argv + [flag, *pair]


def _one_cli_call(entry: Any, flag: str, value: Any, tmp: Path) -> str | None:
    """Run ``ope`` with the flag's value replaced, ``--json``; None or what broke."""
    import contextlib
    import io
    import json

    from ope.cli import main

    hostile = _materialize(value, None, tmp)
    argv = _cli_argv(entry.valid(tmp), flag, str(hostile)) + ["--json"]
    shown = f"{entry.name} {flag} {value!r:.60}"
    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            code = main(argv)
    except BaseException as exc:  # noqa: BLE001 - main must never raise
        return f"{shown}: main raised {type(exc).__name__}: {str(exc)[:200]}"
    try:
        document = json.loads(out.getvalue())
    except ValueError:
        return f"{shown}: stdout is not one JSON document: {out.getvalue()[:200]!r}"
    if code not in _CLI_CODES:
        return f"{shown}: exit code {code}, error {document.get('error')}"
    if code == 0:
        return None
    error = document.get("error") or {}
    names = _accepted_names(
        flag,
        "path" if isinstance(hostile, Path) else "",
        hostile if isinstance(hostile, Path) else None,
    )
    if flag == "logs":
        names += ["LOGS"]
    if error.get("flag") == flag or any(n and n in str(error.get("message", "")) for n in names):
        return None
    return f"{shown}: exit {code} but the error does not name {flag}: {error}"


def _sampled(values: list[Any], key: str, k: int | None) -> list[Any]:
    """``k`` values spread over ``values`` from an offset fixed by ``key`` (all when None)."""
    import zlib

    if k is None or k >= len(values):
        return values
    start = zlib.crc32(key.encode()) % len(values)
    return [values[(start + i * len(values) // k) % len(values)] for i in range(k)]


def check_entry_point_contract(
    entry: Any,
    argument: str,
    *,
    max_examples: int = CONTRACT_EXAMPLES,
    catalogue_sample: int | None = None,
) -> None:
    """Feed hostile values to one argument of one registered entry point.

    Parameters
    ----------
    entry : ope._entrypoints.Entry
        A Python or CLI entry with a minimal valid call (``entry.valid`` not None).
    argument : str
        The argument (or CLI flag, or the positional ``logs``/``src``) to replace.
    max_examples : int, default CONTRACT_EXAMPLES
        Hypothesis draws after the fixed catalogue of the argument's term.
    catalogue_sample : int or None, default None
        Try only this many values of the fixed catalogue (spread over it, from an offset fixed
        by the entry and argument); None tries every value.

    Raises
    ------
    AssertionError
        Listing each hostile value that broke the contract: a foreign exception, an ope error
        not naming the argument, a non-finite result; for the CLI an exit code outside 0, 2,
        65, 73, stdout that is not one JSON document, or a failure not naming the flag.
    ope.ParameterError
        The entry has no minimal valid call.

    Examples
    --------
    >>> from ope import _entrypoints
    >>> from ope.testing import check_entry_point_contract
    >>> entry = next(e for e in _entrypoints.entries() if e.name == "ope.get_estimator")
    >>> check_entry_point_contract(entry, "max_weight", max_examples=2)
    """
    from hypothesis import HealthCheck, given, settings

    if entry.valid is None:
        raise ParameterError(f"`entry` {entry.name} has no minimal valid call to vary.")
    term = entry.terms[argument]
    one = _one_cli_call if entry.cli else _one_python_call
    catalogue = _CLI_VALUES.get(term, []) if entry.cli else HOSTILE_VALUES.get(term, [])
    catalogue = _sampled(list(catalogue), f"{entry.name}::{argument}", catalogue_sample)
    broken: list[str] = []
    for value in catalogue:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                problem = one(entry, argument, value, Path(tmp))
            finally:
                _release_fifos()
        if problem:
            broken.append(problem)
    if not entry.cli and max_examples > 0:
        drawn: list[str] = []
        _warm_up(entry)  # a first call may start a JVM or load compiled code: not in the deadline

        @settings(
            max_examples=max_examples,
            derandomize=True,
            database=None,
            deadline=CONTRACT_DEADLINE_MS,
            suppress_health_check=list(HealthCheck),
        )
        @given(value=hostile_strategy(term))
        def run(value: Any) -> None:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    problem = one(entry, argument, value, Path(tmp))
                finally:
                    _release_fifos()
            if problem and len(drawn) < 3:
                drawn.append(problem)

        run()
        broken += drawn
    if broken:
        raise AssertionError(
            f"{len(broken)} hostile value(s) broke the contract of "
            f"{entry.name} `{argument}`:\n" + "\n".join(broken)
        )
