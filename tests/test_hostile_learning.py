"""Hostile input on the learning and selection entry points (the policy learners, the safety
gate and its certificate, learning from logs, propensity estimation and checks, the reward
model): an ope error naming the argument, never a raw foreign exception or a silent non-finite
result; and the same numbers as before on well-formed input."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score

import ope
from ope.exceptions import (
    EstimationError,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.learning import (
    Certificate,
    ConservativePolicyLearner,
    DirectMethodPolicyLearner,
    IPSPolicyLearner,
    SafetyGate,
    certify,
    learn_from_logs,
    learner_policy_batches,
    learner_policy_table,
    rank_policies,
    write_learner_policy_table,
)
from ope.loggers import balanced_propensities
from ope.propensity import check_propensities, estimate_propensities
from ope.reward_models import MAX_DESIGN_COLUMNS, RewardModel

N = 24


def _frame(n: int = N, seed: int = 3) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    action = np.arange(n) % 3
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": action,
            "propensity": np.full(n, 1 / 3),
            "reward": gen.binomial(1, 0.3 + 0.4 * (action == 1)).astype(float),
            "x0": gen.normal(size=n),
        }
    )


def _arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    f = _frame()
    return (
        f[["x0"]].to_numpy(),
        f["action"].to_numpy(),
        f["reward"].to_numpy(),
        f["propensity"].to_numpy(),
    )


def _logs() -> Any:
    return ope.read_logs(_frame())


@cache
def _fitted(cls: type) -> Any:
    X, y, r, p = _arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few L-BFGS iterations on 24 rows
        return cls(**({} if cls is DirectMethodPolicyLearner else {"max_iter": 30})).fit(X, y, r, p)


def _fit(**settings: Any) -> Callable[[], Any]:
    def run() -> Any:
        X, y, r, p = _arrays()
        return ConservativePolicyLearner(**settings).fit(X, y, r, p)

    return run


def _certify(**arguments: Any) -> Callable[[], Any]:
    def run() -> Any:
        X, y, r, p = _arrays()
        given = {
            "policy": _fitted(IPSPolicyLearner),
            "X": X,
            "action": y,
            "reward": r,
            "propensity": p,
            **arguments,
        }
        return SafetyGate(reward_range=(0.0, 1.0), max_weight=3.0).certify(**given)

    return run


def _certificate_dict() -> dict[str, Any]:
    return _certify()().to_dict()


CASES: list[Any] = [
    # hyperparameters of the learners: checked where fit reads them, each named
    pytest.param(_fit(tol=object()), ParameterError, r"`tol` must be a number", id="tol-object"),
    pytest.param(
        _fit(tol=-1.0), ParameterError, r"`tol` must be a finite number >= 0", id="tol-negative"
    ),
    pytest.param(
        _fit(l2_penalty=float("inf")), ParameterError, r"`l2_penalty` must be a finite", id="l2-inf"
    ),
    pytest.param(
        _fit(l2_penalty=10**400), ParameterError, r"`l2_penalty` must be a finite", id="l2-huge-int"
    ),
    pytest.param(
        _fit(variance_penalty=10**400),
        ParameterError,
        r"`variance_penalty` must be a finite",
        id="penalty-huge-int",
    ),
    pytest.param(
        _fit(variance_penalty=1e308, max_iter=20),
        EstimationError,
        r"diverged .* with l2_penalty=0\.001, variance_penalty=1e\+308",
        id="penalty-1e308",
    ),
    pytest.param(
        _fit(validation_fraction=[0.5]),
        ParameterError,
        r"`validation_fraction` must be a number",
        id="validation-fraction-list",
    ),
    pytest.param(
        _fit(max_iter=True),
        ParameterError,
        r"`max_iter` must be a positive integer",
        id="max-iter-bool",
    ),
    pytest.param(
        lambda: DirectMethodPolicyLearner(l2_penalty=10**400).fit(*_arrays()),
        ParameterError,
        r"`l2_penalty` must be a positive finite number",
        id="dm-l2",
    ),
    # X and y of fit, predict and score
    pytest.param(
        lambda: IPSPolicyLearner().fit(object(), *_arrays()[1:]),
        ParameterError,
        r"`X` must be a 2-D array .* not 'object'",
        id="fit-X-object",
    ),
    pytest.param(
        lambda: IPSPolicyLearner().fit(0.0, *_arrays()[1:]),
        ValidationError,
        r"`X` must be a 2-D array .*Expected 2D array",
        id="fit-X-scalar",
    ),
    pytest.param(
        lambda: IPSPolicyLearner().fit(_arrays()[0], np.array([0, 1]), None, None),
        ValidationError,
        r"`y` has 2 labels but X has 24 rows",
        id="fit-y-short",
    ),
    pytest.param(
        lambda: _fitted(IPSPolicyLearner).predict(object()),
        ParameterError,
        r"`X` must be a 2-D array",
        id="predict-X-object",
    ),
    pytest.param(
        lambda: _fitted(IPSPolicyLearner).target_propensity(0.0, _arrays()[1]),
        ValidationError,
        r"`X` must be a 2-D array",
        id="target-propensity-X-scalar",
    ),
    pytest.param(
        lambda: _fitted(IPSPolicyLearner).target_propensity(_arrays()[0], "abc"),
        ValidationError,
        r"`action` must hold one action label per row of X \(24 rows",
        id="target-propensity-action-text",
    ),
    pytest.param(
        lambda: _fitted(DirectMethodPolicyLearner).predict_reward(object()),
        ParameterError,
        r"`X` must be a 2-D array",
        id="predict-reward-X-object",
    ),
    pytest.param(
        lambda: _fitted(IPSPolicyLearner).score(_arrays()[0], np.full(N, np.nan)),
        ValidationError,
        r"`y` must be finite",
        id="score-y-nan",
    ),
    pytest.param(
        lambda: _fitted(IPSPolicyLearner).score(_arrays()[0], np.array(["x"] * N)),
        ValidationError,
        r"`y` holds text but the actions seen in fit",
        id="score-y-text",
    ),
    pytest.param(
        lambda: _fitted(IPSPolicyLearner).score(*_arrays()[:2], sample_weight=[1.0]),
        ValidationError,
        r"`sample_weight`",
        id="score-sample-weight-short",
    ),
    pytest.param(
        lambda: _fitted(IPSPolicyLearner).score(*_arrays()[:2], sample_weight="0.5"),
        ValidationError,
        r"`sample_weight`",
        id="score-sample-weight-text",
    ),
    pytest.param(
        lambda: IPSPolicyLearner().set_params(l2_penaltyy=1.0),
        ParameterError,
        r"`l2_penaltyy` is not a parameter of IPSPolicyLearner; its parameters are "
        r"action_model, fit_intercept, l2_penalty",
        id="set-params-unknown",
    ),
    # learning from logs
    pytest.param(
        lambda: IPSPolicyLearner().fit_logs(_frame(), context_columns=["x0"]),
        ParameterError,
        r"IPSPolicyLearner.fit_logs: `logs` must be BanditLogs, .* got "
        r".*DataFrame",
        id="fit-logs-dataframe",
    ),
    pytest.param(
        lambda: IPSPolicyLearner().fit_logs(_logs(), context_columns=3.5),
        ParameterError,
        r"`context_columns` must be a column name or a list",
        id="cc-float",
    ),
    pytest.param(
        lambda: IPSPolicyLearner().fit_logs(_logs(), context_columns=["nope"]),
        SchemaError,
        r"context column\(s\) \['nope'\] are not in the logs "
        r"\(`context_columns`\)",
        id="cc-missing",
    ),
    pytest.param(
        lambda: learn_from_logs(_frame(), context_columns=["x0"]),
        ParameterError,
        r"learn_from_logs: `logs` must be BanditLogs",
        id="learn-dataframe",
    ),
    pytest.param(
        lambda: learn_from_logs(_logs(), context_columns=["x0"], learner=object()),
        ParameterError,
        r"`learner` must be an unfitted policy learner",
        id="learner-object",
    ),
    pytest.param(
        lambda: learn_from_logs(_logs(), context_columns=["x0"], learner=LogisticRegression()),
        ParameterError,
        r"`learner` must be an unfitted policy learner whose fit takes",
        id="learner-classifier",
    ),
    pytest.param(
        lambda: learn_from_logs(_logs(), context_columns=["x0"], certify_fraction=[0.5]),
        ParameterError,
        r"`certify_fraction` must be a number",
        id="certify-fraction",
    ),
    pytest.param(
        lambda: learner_policy_batches(IPSPolicyLearner(), _logs(), context_columns=["x0"]),
        ParameterError,
        r"`learner` \(IPSPolicyLearner\) is not fitted",
        id="batches-unfitted-learner",
    ),
    pytest.param(
        lambda: learner_policy_batches(0.0, _logs(), context_columns=["x0"]),
        ParameterError,
        r"`learner` must be a fitted policy learner",
        id="batches-float",
    ),
    pytest.param(
        lambda: learner_policy_table(
            _fitted(IPSPolicyLearner), _logs(), context_columns=["x0"], name="\udcff"
        ),
        ParameterError,
        r"`name` must be a non-blank str .* that can be written as UTF-8",
        id="table-name-surrogate",
    ),
    pytest.param(
        lambda: learner_policy_table(
            _fitted(IPSPolicyLearner), _logs(), context_columns=["x0"], name=" "
        ),
        ParameterError,
        r"`name` must be a non-blank str",
        id="table-name-blank",
    ),
    pytest.param(
        lambda: write_learner_policy_table(
            _fitted(IPSPolicyLearner), _logs(), 3, context_columns=["x0"]
        ),
        ParameterError,
        r"`path` must be the file to write",
        id="write-path-int",
    ),
    # the gate
    pytest.param(
        _certify(policy=""),
        PolicyError,
        r"`policy` must be a fitted learner .* got ''",
        id="certify-policy-text",
    ),
    pytest.param(
        _certify(X=0.0), ValidationError, r"`X` must be a 2-D array", id="certify-X-scalar"
    ),
    pytest.param(
        _certify(action="abc"),
        ValidationError,
        r"`action` must hold the logged action of each certification row .* shape \(\)",
        id="certify-action-text",
    ),
    pytest.param(
        _certify(action=np.array([0, 1])),
        ValidationError,
        r"`reward` has 24 rows but `action` has 2",
        id="certify-action-short",
    ),
    pytest.param(
        _certify(action=np.array([], dtype=int)),
        EstimationError,
        r"`action` has 0 row\(s\): certification needs at least 2",
        id="certify-empty",
    ),
    pytest.param(
        _certify(n_train=float("nan")),
        ParameterError,
        r"`n_train` must be a whole number >= 0",
        id="certify-n-train-nan",
    ),
    pytest.param(
        _certify(action=np.where(np.arange(N) == 5, 9, _arrays()[1])),
        ValidationError,
        r"`action` has 1 label\(s\) the policy never saw in fit \(9\)",
        id="certify-unseen-action",
    ),
    pytest.param(
        lambda: rank_policies(["ips"], *_arrays(), reward_range=(0, 1), max_weight=3.0),
        ParameterError,
        r"`policies` must be a mapping of policy name to policy",
        id="rank-policies-list",
    ),
    # the certificate
    pytest.param(
        lambda: Certificate.from_dict({**_certificate_dict(), "value": float("nan")}),
        ValidationError,
        r"`data`: the certificate's 'value' must be a finite number; got nan",
        id="from-dict-nan",
    ),
    pytest.param(
        lambda: Certificate.from_dict({**_certificate_dict(), "verdict": "maybe"}),
        ValidationError,
        r"`data`: the certificate's 'verdict' must be one of 'approve', 'reject'",
        id="from-dict-verdict",
    ),
    pytest.param(
        lambda: Certificate.from_dict({**_certificate_dict(), "reward_range": [1, 0]}),
        ValidationError,
        r"`data`: the certificate's 'reward_range' must be a pair \[low, high\] with "
        r"low < high",
        id="from-dict-range",
    ),
    pytest.param(
        lambda: Certificate.from_dict([1]),
        ValidationError,
        r"`data`: a certificate must be a JSON object",
        id="from-dict-list",
    ),
    pytest.param(
        lambda: Certificate.from_json(
            json.dumps({**_certificate_dict(), "lower_bound": float("inf")})
        ),
        ValidationError,
        r"`text`: the certificate's 'lower_bound' must be a finite number; got inf",
        id="from-json-inf",
    ),
    pytest.param(
        lambda: Certificate.from_json('{"policy": '),
        ValidationError,
        r"`text`: the certificate is not valid JSON",
        id="from-json-truncated",
    ),
    pytest.param(
        lambda: Certificate.from_json("[" * 100_000 + "]" * 100_000),
        ValidationError,
        r"`text`: the certificate nests JSON arrays or objects deeper",
        id="from-json-deep",
    ),
    pytest.param(
        lambda: Certificate.from_json("true"),
        ValidationError,
        r"`text`: a certificate must be a JSON object .* got a bool",
        id="from-json-bool",
    ),
    # propensities
    pytest.param(
        lambda: estimate_propensities(_frame().iloc[:0], context_columns=["x0"]),
        EstimationError,
        r"`action` has no rows \(the logs are empty\)",
        id="estimate-empty",
    ),
    pytest.param(
        lambda: check_propensities(_frame(), context_columns=["x0"], by=["x0"]),
        ParameterError,
        r"`by` must be the name of one segment column",
        id="by-list",
    ),
    pytest.param(
        lambda: check_propensities(_frame(), context_columns=["x0"], by="nope"),
        SchemaError,
        r"`by` names the segment column 'nope', which is not in the logs",
        id="by-missing",
    ),
    pytest.param(
        lambda: balanced_propensities(_frame().assign(logging_policy="a"), long_table=3.0),
        ParameterError,
        r"`long_table` must be a pandas.DataFrame or a pyarrow.Table",
        id="long-table-float",
    ),
    pytest.param(
        lambda: balanced_propensities(_frame().iloc[:0].assign(logging_policy="a")),
        ValidationError,
        r"the logs have no rows",
        id="balanced-empty",
    ),
    # the reward model
    pytest.param(
        lambda: RewardModel(n_folds=2, rng=0).fit(*_arrays()[:3], n_actions=10**30),
        ParameterError,
        r"`n_actions` must be at most 4,194,304",
        id="n-actions-huge",
    ),
    pytest.param(
        lambda: RewardModel(n_folds=2, rng=0).fit(
            _arrays()[0], np.where(np.arange(N) == 0, 2**40, _arrays()[1]), _arrays()[2]
        ),
        EstimationError,
        r"the design would have .* columns \(catalog of "
        r"1,099,511,627,777 actions from the largest `action` code",
        id="action-code-id",
    ),
]


@pytest.mark.parametrize("make, error, match", CASES)
def test_hostile_learning_input_raises_an_ope_error_naming_it(
    make: Callable[[], Any], error: type[Exception], match: str
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=match):
            make()


def test_policy_batches_check_their_arguments_when_called_not_when_iterated() -> None:
    with pytest.raises(ParameterError, match=r"`name` must be a non-blank str"):
        learner_policy_batches(
            _fitted(IPSPolicyLearner), _logs(), context_columns=["x0"], name=""
        )  # not iterated


def test_set_params_keeps_the_scikit_learn_contract() -> None:
    learner = ConservativePolicyLearner()
    assert learner.set_params(l2_penalty=0.5, rng=3) is learner
    assert (learner.l2_penalty, learner.rng) == (0.5, 3)
    with pytest.raises(ValueError, match=r"`nope` is not a parameter"):  # sklearn's type too
        learner.set_params(nope=1)


@pytest.mark.parametrize(
    "cls", [ConservativePolicyLearner, IPSPolicyLearner, DirectMethodPolicyLearner]
)
def test_score_is_the_accuracy_of_the_greedy_policy(cls: type) -> None:
    X, y, _, _ = _arrays()
    learner = _fitted(cls)
    assert learner.score(X, y) == accuracy_score(y, learner.predict(X))
    weights = np.arange(1.0, N + 1.0)
    assert learner.score(X, y, sample_weight=weights) == pytest.approx(
        accuracy_score(y, learner.predict(X), sample_weight=weights)
    )


def test_certificate_round_trips_through_json_unchanged() -> None:
    cert = _certify(name="ips", n_train=10)()
    assert Certificate.from_json(cert.to_json()) == cert
    assert Certificate.from_dict(cert.to_dict()) == cert
    threshold = certify(
        np.full(N, 0.5),
        None,
        _arrays()[1],
        _arrays()[2],
        _arrays()[3],
        reward_range=(0, 1),
        max_weight=3.0,
        baseline=0.1,
    )
    assert threshold.improvement_estimate is None
    assert Certificate.from_json(threshold.to_json()) == threshold


def test_an_action_logged_once_is_estimated_without_a_foreign_error() -> None:
    f = _frame(n=40)
    f.loc[0, "action"] = 7
    for n_folds in (None, 5):
        logs = estimate_propensities(f, context_columns=["x0"], n_folds=n_folds, rng=0)
        p = logs.column("propensity")
        assert np.isfinite(p).all() and (p > 0).all() and (p <= 1).all()
    with pytest.raises(EstimationError, match=r"action\(s\) 7 \(1x\)"):
        estimate_propensities(f, context_columns=["x0"], calibration="isotonic")


def test_mixed_label_kinds_are_refused_by_name() -> None:
    X = _arrays()[0][:6]
    mixed = np.array([1, "a", 2, "b", 1, "a"], dtype=object)
    with pytest.raises(ValidationError, match=r"`y` mixes label kinds"):
        IPSPolicyLearner().fit(X, mixed, np.ones(6), np.full(6, 0.5))
    with pytest.raises(ValidationError, match=r"`action` mixes label kinds"):
        _fitted(IPSPolicyLearner).target_propensity(
            _arrays()[0], np.array([0, "a", *range(N - 2)], dtype=object)
        )


def test_the_reward_model_keeps_its_catalog_under_the_column_limit() -> None:
    X, y, r, _ = _arrays()
    fitted = RewardModel(n_folds=2, rng=0).fit(X, y, r, n_actions=3)
    assert fitted.n_design_columns_ == 1 + 3 + 3 < MAX_DESIGN_COLUMNS
