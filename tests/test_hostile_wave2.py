"""Hostile input on the wave-2 entry points: a specific ope error naming what, where and how to
fix, never a raw foreign exception, a silent wrong answer or a non-finite result."""

from __future__ import annotations

import contextlib
import re
import io
import json
import math
import warnings
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet
import pytest

import ope
from ope.cli import main
from ope.exceptions import (
    DataFileError,
    EstimationError,
    OPEError,
    ParameterError,
    PolicyError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.learning import Certificate
from ope.policies import read_policy_table
from ope.propensity import estimate_propensities
from ope.returns import discounted_returns, gae, lambda_returns, td_errors
from ope.slates import IndependentIPS, slate_logs, slate_probabilities_from_table

_DONE4 = [False, False, False, True]


def _paired(outcome: list[float]) -> pa.Table:
    return pa.table(
        {
            "pair_id": [0, 0, 1, 1, 2, 2],
            "arm": ["a", "b"] * 3,
            "replicate": [0] * 6,
            "outcome": outcome,
        }
    )


def _gate_with_unseen_action() -> Any:
    """A learner fit on actions {0, 1}; half the certification rows log action 7 with reward 0,
    which read as probability 0 would let the gate approve."""
    from ope.learning import IPSPolicyLearner, SafetyGate

    rng = np.random.default_rng(0)
    n = 4000
    x = rng.standard_normal((n, 2))
    action = rng.integers(0, 2, n)
    reward = (action == 1).astype(float)
    propensity = np.full(n, 0.5)
    policy = IPSPolicyLearner(reward_range=(0, 1)).fit(x, action, reward, propensity)
    action, reward = action.copy(), reward.copy()
    action[: n // 2], reward[: n // 2] = 7, 0.0
    return SafetyGate(reward_range=(0, 1), max_weight=10.0).certify(
        policy, x, action, reward, propensity
    )


def _rare_action_logs() -> pa.Table:
    """100 rows, action 2 logged once."""
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "action": np.r_[np.zeros(50, int), np.ones(49, int), [2]],
            "reward": rng.random(100),
            "x0": rng.random(100),
        }
    )


def _fit_mixed_labels() -> Any:
    from ope.learning import IPSPolicyLearner

    rng = np.random.default_rng(0)
    labels = np.array([1, "a"] * 50, dtype=object)
    return IPSPolicyLearner(reward_range=(0, 1)).fit(
        rng.standard_normal((100, 2)), labels, rng.random(100), np.full(100, 0.5)
    )


def _feedback(**changes: Any) -> Any:
    from ope.importers import from_bandit_feedback

    d = {
        "n_rounds": 2,
        "n_actions": 2,
        "action": np.array([0, 1]),
        "reward": np.array([1.0, 0.0]),
        "pscore": np.array([0.5, 0.5]),
    }
    return from_bandit_feedback({**d, **changes})


def _two_slates() -> Any:
    return slate_logs(
        {
            "slate_id": [5, 6],
            "item": [[1, 0], [0, 1]],
            "reward": [[1.0, 0.0], [0.0, 1.0]],
            "propensity": [[0.5, 0.5]] * 2,
        }
    )


def _candidate_table(**changes: list[Any]) -> Any:
    table = {
        "slate_id": [5, 5, 6, 6],
        "position": [0, 1, 0, 1],
        "item": [1, 0, 0, 1],
        "probability": [0.9] * 4,
    }
    return slate_probabilities_from_table({**table, **changes}, _two_slates())


class _RepeatedClasses:
    """A fitted classifier whose classes_ name action 1 twice (two probability columns)."""

    classes_ = np.array([0, 1, 1])

    def predict_proba(self, x: Any) -> np.ndarray:
        return np.tile([0.2, 0.4, 0.4], (len(x), 1))


def _classifier_policy_with_repeated_classes() -> Any:
    from ope.policies import ClassifierPolicy

    logs = ope.read_logs(
        pa.table(
            {
                "action": [0, 1, 1],
                "propensity": [0.5] * 3,
                "reward": [1.0, 0.0, 1.0],
                "x": [0.1, 0.2, 0.3],
            }
        )
    )
    return ClassifierPolicy(_RepeatedClasses(), ["x"]).propensity(logs)


def _paired_effect(outcome: list[float]) -> Any:
    return ope.paired_effect(_paired(outcome), treated="b", control="a").table()


#: hostile files, written once per session under a temporary folder (name -> bytes)
HOSTILE_FILES: dict[str, bytes] = {
    # a PNG-like head: a header line that is no UTF-8 text, with NUL and control bytes
    "binary.csv": b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\xfa\xc3\x28garbage\x00\x01\n\xff\xff",
    "blank-name.csv": b"event_id,policy,action,probability\n0,p,0,1\n1,,0,1\n",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    for name, content in HOSTILE_FILES.items():
        (folder / name).write_bytes(content)
    rng = np.random.default_rng(0)
    pa.parquet.write_table(
        pa.table(
            {
                "event_id": np.arange(40),
                "action": rng.integers(0, 2, 40),
                "propensity": np.full(40, 0.5),
                "reward": rng.random(40),
            }
        ),
        folder / "logs.parquet",
    )
    pa.parquet.write_table(
        pa.table(
            {
                "event_id": np.arange(200),
                "action": rng.integers(0, 2, 200),
                "propensity": np.full(200, 0.5),
                "reward": 1e300 * rng.choice([-1.0, 1.0], 200),
                "target__p": rng.integers(0, 2, 200).astype(float),
                "seg": rng.integers(0, 3, 200),
            }
        ),
        folder / "huge-rewards.parquet",
    )
    pa.parquet.write_table(
        _paired([1e308, -1e308, -1e308, 1e308, 1.0, 2.0]), folder / "huge-paired.parquet"
    )
    return folder


#: (entry point, hostile input) -> expected ope exception type and message regex
CASES: list[Any] = [
    # A. sums of finite values that overflow float64
    pytest.param(
        lambda: discounted_returns([1e308] * 4, gamma=1.0, done=_DONE4, episode_starts=[0]),
        ValidationError,
        r"discounted returns overflow float64 \(3 rows .* first at row 0\): `reward` reaches "
        r"\|value\| 1e\+308.*Rescale `reward`",
        id="returns-1e308",
    ),
    pytest.param(
        lambda: gae(
            [1e308] * 4, values=[0.0] * 4, gamma=1.0, lam=1.0, done=_DONE4, episode_starts=[0]
        ),
        ValidationError,
        r"advantages \(GAE\) overflow float64 .*`reward` reaches",
        id="gae-1e308",
    ),
    pytest.param(
        lambda: lambda_returns(
            [1e308] * 4, values=[1e308] * 4, gamma=1.0, lam=0.0, done=_DONE4, episode_starts=[0]
        ),
        ValidationError,
        r"overflow float64 .*reaches \|value\| 1e\+308",
        id="lambda-returns-1e308",
    ),
    pytest.param(
        lambda: td_errors(
            [1e308] * 4, values=[-1e308] * 4, gamma=1.0, done=_DONE4, episode_starts=[0]
        ),
        ValidationError,
        r"TD errors overflow float64 \(1 rows .* first at row 3\)",
        id="td-errors-1e308",
    ),
    pytest.param(
        lambda: _paired_effect([1e308, -1e308, -1e308, 1e308, 1.0, 2.0]),
        ValidationError,
        r"'b' vs 'a' effect on 'outcome': the pair differences overflow float64 \(2 pairs .* "
        r"first at pair 0\): `outcome` reaches \|value\| 1e\+308",
        id="paired-1e308",
    ),
    # D. a certificate on actions the policy never saw
    pytest.param(
        _gate_with_unseen_action,
        ValidationError,
        r"`action` has 1 label\(s\) the policy never saw in fit \(7\) in 2000 rows \(first at "
        r"rows 0, 1, 2, 3, 4, \.\.\.\).*cannot be certified",
        id="gate-unseen-action",
    ),
    # B. raw foreign exceptions
    pytest.param(
        lambda: slate_logs({"slate_id": [], "item": [], "reward": [], "slate_propensity": []}),
        ValidationError,
        r"slate logs have no rows \(column 'slate_id' is empty\)",
        id="slates-empty",
    ),
    pytest.param(
        lambda: IndependentIPS(positions=()),
        ParameterError,
        r"`positions` is empty: .* e\.g\. positions=\[0\]",
        id="iips-positions-empty",
    ),
    pytest.param(
        lambda: IndependentIPS(positions="01"),
        ParameterError,
        r"`positions` must be a sequence of slot indices",
        id="iips-positions-str",
    ),
    pytest.param(
        lambda: estimate_propensities(
            _rare_action_logs(), context_columns=["x0"], calibration="isotonic"
        ),
        EstimationError,
        r"calibration='isotonic' .* at least 3 rows .* the data logs action\(s\) 2 \(1x\)",
        id="propensity-action-logged-once",
    ),
    pytest.param(
        lambda: estimate_propensities(
            _rare_action_logs(), context_columns=["x0"], calibration="sigmoid", n_folds=2, rng=0
        ),
        EstimationError,
        r"the training set of fold \d \(of 2\) logs action\(s\) 2 \(1x\)",
        id="propensity-action-logged-once-folds",
    ),
    pytest.param(
        _fit_mixed_labels,
        ValidationError,
        r"`y` mixes label kinds: 50 rows hold numbers and 50 rows text \(first text at row 1: "
        r"'a'\)",
        id="learner-labels-int-and-str",
    ),
    # C. invalid or contradictory input accepted silently
    pytest.param(
        lambda: _feedback(position=np.array([-1, 0])),
        ValidationError,
        r"`bandit_feedback\['position'\]` must be whole numbers >= 0; 1 rows are not \(first "
        r"at row 0: -1\)",
        id="feedback-position-negative",
    ),
    pytest.param(
        lambda: _feedback(position=np.array([0.0, 0.5])),
        ValidationError,
        r"`bandit_feedback\['position'\]` must be whole numbers >= 0; .*first at row 1: 0\.5",
        id="feedback-position-fractional",
    ),
    pytest.param(
        lambda: _feedback(position=np.array([0, 2]), action_dist=np.full((2, 2, 2), 0.5)),
        ValidationError,
        r"`bandit_feedback\['position'\]` must be whole numbers >= 0 and < 2",
        id="feedback-position-beyond-len-list",
    ),
    pytest.param(
        lambda: _feedback(action_dist=np.full((2, 3, 1), 0.9)),
        ValidationError,
        r"`bandit_feedback\['action_dist'\]` must hold probability distributions: .* summing to "
        r"1 over axis 1; 2 rows do not \(first at row 0, which sums to 2\.7\)",
        id="feedback-action-dist-sums-2.7",
    ),
    pytest.param(
        lambda: _feedback(action=np.array([0, 5]), action_dist=np.full((2, 2, 1), 0.5)),
        ValidationError,
        r"`bandit_feedback\['action'\]` must be whole numbers >= 0 and < 2; .*"
        r"first at row 1: 5",
        id="feedback-action-beyond-action-dist",
    ),
    pytest.param(
        lambda: _candidate_table(slate_id=["5", "5", "6", "6"]),
        ValidationError,
        r"`slate_id` holds text \(row 0: '5'\) but the logs' `slate_id` holds numbers \(e\.g\. "
        r"5\)",
        id="slate-table-text-slate-ids",
    ),
    pytest.param(
        lambda: _candidate_table(item=["1", "0", "0", "1"]),
        ValidationError,
        r"`item` must hold integer ids; it holds text \(row 0: '1'\)",
        id="slate-table-text-items",
    ),
    pytest.param(
        lambda: _candidate_table(slate_id=[7, 7, 8, 8]),
        ValidationError,
        r"none of the candidate table's 4 rows has a `slate_id` of the logs",
        id="slate-table-no-logged-slate",
    ),
    pytest.param(
        lambda: slate_logs(
            {
                "slate_id": [0],
                "item": [["a", "b"]],
                "reward": [[1.0, 0.0]],
                "propensity": [[0.5, 0.5]],
            }
        ),
        ValidationError,
        r"`item` must hold integer ids; it holds text \(row 0: 'a'\)",
        id="slate-logs-text-items",
    ),
    pytest.param(
        lambda: slate_logs(
            {"slate_id": [0], "item": [[0, 1]], "reward": [[1.0, "x"]], "propensity": [[0.5, 0.5]]}
        ),
        ValidationError,
        r"`reward` must hold numbers in every list",
        id="slate-logs-text-reward",
    ),
    pytest.param(
        lambda: slate_logs(
            {
                "slate_id": [3, 4],
                "item": [[0, 1]] * 2,
                "reward": [[1.0, 0.0]] * 2,
                "slate_propensity": [0.5, 0.5],
                "prefix_propensity": [[0.9, 0.5], [0.9, 0.2]],
            }
        ),
        ValidationError,
        r"`prefix_propensity` at the last position \(the whole slate\) contradicts "
        r"`slate_propensity` in 1 slates \(first at row 1: 0\.2 vs 0\.5\)",
        id="slate-prefix-contradicts-slate",
    ),
    pytest.param(
        _classifier_policy_with_repeated_classes,
        PolicyError,
        r"classes_ of _RepeatedClasses repeats the label\(s\) 1 \(first at columns 1, 2\)",
        id="classifier-policy-repeated-classes",
    ),
    pytest.param(
        lambda: Certificate.from_json('{"policy": '),
        ValidationError,
        r"certificate is not valid JSON: Expecting value at line 1, column 12",
        id="cert-json",
    ),
    pytest.param(
        lambda: Certificate.from_json("[1, 2]"),
        ValidationError,
        r"certificate must be a JSON object .* got a list",
        id="cert-json-list",
    ),
]


#: hostile files through their reader: file name -> expected ope exception type, message regex
FILE_CASES: list[Any] = [
    pytest.param(
        "binary.csv",
        DataFileError,
        r"binary\.csv is not a text file \(a NUL or control byte at byte 6\); a CSV policy "
        r"table is UTF-8 text",
        id="policy-csv-binary",
    ),
    pytest.param(
        "blank-name.csv",
        SchemaError,
        r"`policy` is empty \(or only whitespace\) in 1 rows \(first at row 1\)",
        id="policy-csv-blank-name",
    ),
]


@pytest.mark.parametrize(("name", "error", "pattern"), FILE_CASES)
def test_hostile_policy_file_raises_a_specific_ope_error(
    files: Path, name: str, error: type[OPEError], pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        read_policy_table(files / name)


def _cli(*argv: str) -> tuple[int, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--json", "--quiet"])
    document = json.loads(out.getvalue())  # exactly one JSON document (extra data would fail)
    assert document["exit_code"] == code
    return code, document


@pytest.mark.parametrize(("name", "error", "pattern"), FILE_CASES)
def test_hostile_policy_file_on_the_cli_exits_65_with_one_json_document(
    files: Path, name: str, error: type[OPEError], pattern: str
) -> None:
    code, document = _cli("evaluate", str(files / "logs.parquet"), "--policies", str(files / name))
    assert code == 65
    assert document["ok"] is False
    assert document["error"]["type"] == error.__name__
    assert re.search(pattern, document["error"]["message"])


HUGE_REWARDS = (
    r"the diagnostics of policy 'p' \(variance of w \(r - 0\)\) overflow float64: `reward` "
    r"reaches \|value\| 1e\+300.*Rescale `reward`"
)


@pytest.mark.parametrize("extra", [(), ("--by", "seg")], ids=["report", "report-by-segment"])
def test_report_of_rewards_near_1e300_exits_65_with_one_json_document(
    files: Path, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    code, document = _cli(
        "report", str(files / "huge-rewards.parquet"), "--out", str(tmp_path / "r.html"), *extra
    )
    assert code == 65
    assert document["error"]["type"] == "ValidationError"
    assert re.search(HUGE_REWARDS, document["error"]["message"])


def test_paired_effect_of_1e308_outcomes_on_the_cli_exits_65_with_one_json_document(
    files: Path,
) -> None:
    code, document = _cli(
        "paired", str(files / "huge-paired.parquet"), "--treated", "b", "--control", "a"
    )
    assert code == 65
    assert document["error"]["type"] == "ValidationError"
    assert re.search(
        r"the pair differences overflow float64 \(2 pairs .*1e\+308", document["error"]["message"]
    )


def test_diagnose_of_rewards_near_1e300_names_the_reward_magnitude(files: Path) -> None:
    logs = ope.read_logs(files / "huge-rewards.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValidationError, match=HUGE_REWARDS):
            ope.diagnose(logs, by="seg")


@pytest.mark.parametrize(("call", "error", "pattern"), CASES)
def test_hostile_input_raises_a_specific_ope_error(
    call: Callable[[], Any], error: type[OPEError], pattern: str
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=pattern) as info:
            call()
    assert isinstance(info.value, OPEError)
    assert type(info.value).__module__ == "ope.exceptions"


def test_overflow_guard_keeps_finite_results_unchanged() -> None:
    r = discounted_returns(
        [1e300, 1e300, 0.0], gamma=0.5, done=[False, False, True], episode_starts=[0]
    )
    np.testing.assert_allclose(r, [1.5e300, 1e300, 0.0], rtol=1e-12)
    with pytest.warns(SmallSampleWarning, match="too few pairs"):  # 3 pairs
        table = _paired_effect([1.0, 0.0, 0.0, 1.0, 1.0, 2.0])
    np.testing.assert_allclose(table["value"], [1 / 3], rtol=1e-12)


def test_a_wide_schema_plans_every_column_and_names_its_one_repeat() -> None:
    from ope.schema import BANDIT, plan_columns

    names = ["action", "propensity", "reward", *(f"x{j}" for j in range(10_000))]
    plan = plan_columns(pa.schema([pa.field(n, pa.float64()) for n in names]), BANDIT)
    assert plan.output_columns == names
    repeated = pa.schema([pa.field(n, pa.float64()) for n in [*names, "x9999"]])
    with pytest.raises(SchemaError, match=r"column name\(s\) 'x9999' appear more than once"):
        plan_columns(repeated, BANDIT)


def test_repeated_names_counts_once_per_name() -> None:
    from ope._validation import repeated_names

    assert repeated_names(["b", "a", "b", "c", "a", "b"]) == ["a", "b"]
    assert repeated_names(["a", "a", "b", "b"], among={"b"}) == ["b"]
    assert repeated_names([f"x{j}" for j in range(10_000)]) == []


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_paired_differences_near_1e200_have_their_standard_error():
    """Differences of +-2e200 and 1: their variance (about 1e400) is past float64, but the
    standard error (about 1.15e200) is not, and is given (taken in units of a power of two);
    it was refused as an overflow before."""
    table = _paired_effect([1e200, -1e200, -1e200, 1e200, 1.0, 2.0])
    row = table.iloc[0]
    assert row["value"] == pytest.approx(1.0 / 3.0)
    # the differences -2e200, 2e200, 1: sample sd sqrt((2 (2e200)^2) / 2) up to 1/3 terms
    assert row["std_error"] == pytest.approx(2e200 / math.sqrt(3.0), rel=1e-12)
