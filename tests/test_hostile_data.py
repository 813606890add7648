"""Hostile input on the data entry points (readers, importers, the log objects' methods, the
sequential estimators): an ope error naming the argument, the column or the file, never a raw
foreign exception or a silent non-finite result."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest

import ope
from ope.exceptions import (
    OutputError,
    ParameterError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.importers import (
    from_bandit_feedback,
    import_dsjson,
    iter_dsjson,
    read_dsjson,
    read_obd,
    to_bandit_feedback,
)
from ope.importers.dsjson import MAX_CHUNK_BYTES
from ope.io import read_logs, read_trajectories, scan_logs
from ope.paired import paired_effect
from ope.sequential import fitted_q_evaluation, sequential_estimate
from ope.slates import slate_logs


@pytest.fixture(autouse=True)
def _few_episodes_are_the_point():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        yield


def _frame(n: int = 8) -> pd.DataFrame:
    return pd.DataFrame(
        {"action": np.arange(n) % 2, "propensity": 0.5, "reward": np.arange(n, dtype=float) % 3}
    )


def _steps(reward: float | list[float] = 1.0) -> pd.DataFrame:
    """Three terminated episodes of two steps over two states; candidate ``pi``."""
    return pd.DataFrame(
        {
            "episode_id": [0, 0, 1, 1, 2, 2],
            "step": [0, 1] * 3,
            "action": [0, 1, 1, 0, 0, 1],
            "propensity": 0.5,
            "reward": reward,
            "done": [False, True] * 3,
            "state": [0, 1, 1, 0, 0, 1],
            "x0": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
            "target__pi": 0.5,
        }
    )


def _dsjson(tmp_path, n: int = 3):
    path = tmp_path / "events.json"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "EventId": f"e{i}",
                    "_label_cost": -1.0,
                    "_label_probability": 0.5,
                    "_labelIndex": 0,
                    "a": [1, 2],
                    "p": [0.5, 0.5],
                    "c": {"_multi": [{}, {}]},
                }
            )
            + "\n"
            for i in range(n)
        )
    )
    return path


def _bandit_feedback() -> dict:
    return {
        "n_rounds": 4,
        "n_actions": 2,
        "action": np.array([0, 1, 0, 1]),
        "reward": np.array([1, 0, 1, 1]),
        "pscore": np.full(4, 0.5),
    }


# ------------------------------------------------------------------------- paths name their argument
@pytest.mark.parametrize(
    ("reader", "argument"),
    [
        (read_logs, "source"),
        (scan_logs, "source"),
        (read_trajectories, "source"),
        (ope.read_paired, "source"),
        (read_obd, "src"),
        (read_dsjson, "path"),
    ],
)
@pytest.mark.parametrize("value", ["", "   ", 3, "logs\x00.parquet"])
def test_a_path_that_is_no_path_names_the_argument(reader, argument, value):
    # the table readers take objects other than paths, and say which
    named = (
        "^source must be a parquet path"
        if value == 3 and argument == "source"
        else rf"^`{argument}`: .*path"
    )
    with pytest.raises(ParameterError, match=named):
        reader(value)


def test_import_dsjson_checks_out_before_reading(tmp_path):
    src = _dsjson(tmp_path)
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo.parquet")
    cases = [
        ("", "needs a file name"),
        (3, "must be a file name"),
        (tmp_path / "folder", "is a directory"),
        (tmp_path / "fifo.parquet", "not a regular file"),
        (src, "is the input path"),
        (tmp_path / "no" / "x.parquet", "does not exist"),
    ]
    for out, match in cases:
        with pytest.raises(ParameterError, match=rf"argument out: .*{match}"):
            import_dsjson(src, out, workers=1)
    n, _ = import_dsjson(src, tmp_path / "x.parquet", workers=1)  # the right one works
    assert n == 3


def test_import_dsjson_write_failure_is_an_output_error(tmp_path, monkeypatch):
    import errno

    import pyarrow.parquet as pq

    def full(self, table, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    with pytest.raises(OutputError, match=r"argument out: cannot write .*No space left"):
        import_dsjson(_dsjson(tmp_path), tmp_path / "x.parquet", workers=1)


@pytest.mark.parametrize(
    "reader",
    [
        read_dsjson,
        lambda path, **kw: list(iter_dsjson(path, **kw)),
    ],
)
def test_chunk_bytes_is_bounded_not_a_memory_error(tmp_path, reader):
    path = _dsjson(tmp_path)
    for chunk_bytes in (MAX_CHUNK_BYTES + 1, 2**40, 10**30):
        with pytest.raises(ParameterError, match=r"`chunk_bytes` must be .* at most 1,073,741,824"):
            reader(path, chunk_bytes=chunk_bytes, workers=1)
    assert len(reader(path, chunk_bytes=MAX_CHUNK_BYTES, workers=1)) >= 1


# ------------------------------------------------------------------------- methods of the logs
@pytest.mark.parametrize(
    "logs",
    [
        lambda: read_logs(_frame()),
        lambda: read_trajectories(_steps()),
        lambda: ope.read_paired(
            pd.DataFrame({"pair_id": [0, 0], "arm": ["a", "b"], "outcome": [1.0, 0.0]})
        ),
    ],
)
@pytest.mark.parametrize("name", ["nope", "", 3, b"reward", "\udcff"])
def test_column_of_a_missing_name_is_a_schema_error_naming_it(logs, name):
    with pytest.raises(SchemaError, match=r"^`name`: column .* is not in these logs; they have"):
        logs().column(name)


def test_validation_report_methods_check_their_arguments():
    report = read_logs(_frame()).report
    for kwargs, match in [
        ({"caveats": 3.0}, "`caveats` must be a sequence of lines"),
        ({"caveats": [1]}, "`caveats` must be a sequence of lines"),
        ({"what": None}, "`what` must be a str"),
        ({"tail": 1}, "`tail` must be a str"),
    ]:
        with pytest.raises(ParameterError, match=match):
            report.failure_message(**kwargs)
    for width in (0, "88", 88.0, object()):
        with pytest.raises(ParameterError, match="`width` must be a positive integer"):
            report.format(width=width)
    for stacklevel in (0, 2.0, "2", None, 10**30):
        with pytest.raises(ParameterError, match="`stacklevel` must be a positive integer"):
            report.warn_dropped(stacklevel=stacklevel)
    assert report.format(width=40).startswith("validation report for <DataFrame>")


def test_log_scan_describe_needs_a_report(tmp_path):
    path = tmp_path / "logs.parquet"
    _frame().to_parquet(path)
    scan = scan_logs(path)
    with pytest.raises(ParameterError, match="`report` must be an ope.ValidationReport"):
        scan.describe(3.0)
    assert scan.describe(read_logs(_frame()).report).columns == tuple(scan.columns)


def test_with_provenance_names_an_unknown_field():
    effect = paired_effect(
        pd.DataFrame(
            {
                "pair_id": np.repeat(np.arange(4), 2),
                "arm": ["a", "b"] * 4,
                "outcome": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0],
            }
        ),
        treated="a",
        control="b",
    )
    with pytest.raises(ParameterError, match=r"got `provenance`, not a field .*positional"):
        effect.with_provenance(provenance=object())
    with pytest.raises(ParameterError, match=r"got `sede`, not a field .* seed"):
        effect.with_provenance(seed=1, sede=2)
    assert effect.with_provenance(seed=4).provenance.seed == 4


# ------------------------------------------------------------------------- importers
def test_from_bandit_feedback_checks_the_name_and_the_counts():
    bf = _bandit_feedback()
    for name in ("", " ", "\x00", "\udcff", 3):
        with pytest.raises(ParameterError, match="`policy_name` must be a non-blank str"):
            from_bandit_feedback(bf, policy_name=name)
    for key, value in (("n_rounds", "x"), ("n_rounds", float("nan")), ("n_actions", -1)):
        with pytest.raises(ParameterError, match=rf"`bandit_feedback\['{key}'\]` must be"):
            from_bandit_feedback({**bf, key: value})
    for key in ("reward", "pscore"):
        with pytest.raises(ValidationError, match=rf"`bandit_feedback\['{key}'\]` must be numeric"):
            from_bandit_feedback({**bf, key: np.array(["a"] * 4)})
    with pytest.raises(ParameterError, match="`d` must be obp's bandit_feedback dict"):
        from_bandit_feedback([1, 2])
    with pytest.raises(ValidationError, match=r"`bandit_feedback\['position'\]` .* row 0: -1"):
        from_bandit_feedback(
            {**bf, "position": np.array([-1, 0, 1, 0]), "action_dist": np.full((4, 2, 2), 0.5)}
        )
    logs = from_bandit_feedback(bf)
    assert logs.column("reward").tolist() == [1.0, 0.0, 1.0, 1.0] and logs.n_actions == 2


def test_to_bandit_feedback_needs_bandit_logs():
    for logs in (_frame(), 3, None):
        with pytest.raises(ParameterError, match="`logs` must be ope.BanditLogs"):
            to_bandit_feedback(logs)


def test_a_column_type_error_of_an_import_names_the_file(tmp_path):
    folder = tmp_path / "obd"
    folder.mkdir()
    (folder / "all.csv").write_text(
        ",timestamp,item_id,position,click,propensity_score\n"
        "0,2019-11-24 00:00:02+00:00,1,3,1,high\n"
    )
    with pytest.raises(
        SchemaError,
        match=r"(?s)all\.csv \(its columns as imported under ope's "
        r"names\) does not match.*'propensity' has type string",
    ):
        read_obd(folder)


# ------------------------------------------------------------------------- slates and arms
def _slates_frame(**renamed: str) -> pd.DataFrame:
    data = pd.DataFrame(
        {
            "slate_id": [7, 7, 3, 3],
            "position": [1, 0, 0, 1],
            "item": [2, 0, 1, 2],
            "reward": [0.0, 1.0, 0.0, 1.0],
            "propensity": [0.5, 0.5, 0.25, 0.5],
        }
    )
    return data.rename(columns={v: k for k, v in renamed.items()})


@pytest.mark.parametrize(
    "mapping",
    [
        3,
        ["slate_id"],
        {"slate_id": 3},
        {3: "slate_id"},
        {"slate_id": np.ones(4)},
        {"slate_id": object()},
    ],
)
def test_slate_mapping_is_checked_as_read_logs_mapping(mapping):
    with pytest.raises(ParameterError, match=r"^mapping must (be a dict|map ope's column)"):
        slate_logs(_slates_frame(), mapping=mapping)


def test_slate_mapping_renames_columns_and_names_its_mistakes():
    theirs = _slates_frame(sid="slate_id", pos="position", click="reward")
    got = slate_logs(theirs, mapping={"slate_id": "sid", "position": "pos", "reward": "click"})
    assert got.item.tolist() == slate_logs(_slates_frame()).item.tolist()
    with pytest.raises(
        ParameterError,
        match=r"mapping key 'slate' is not one of the slate log "
        r"columns .*did you mean 'slate_id'\?",
    ):
        slate_logs(theirs, mapping={"slate": "sid"})
    with pytest.raises(ParameterError, match=r"you probably meant \{'slate_id': 'sid'\}"):
        slate_logs(theirs, mapping={"sid": "slate_id"})
    with pytest.raises(
        SchemaError,
        match=r"mapping 'reward': 'clicks' names a column that is "
        r"not in the slate logs \(available: click, item",
    ):
        slate_logs(theirs, mapping={"slate_id": "sid", "position": "pos", "reward": "clicks"})
    with pytest.raises(
        SchemaError,
        match=r"mapping reads 'item' from 'sid', but the slate "
        r"logs also have a column 'item'",
    ):
        slate_logs(theirs, mapping={"slate_id": "sid", "item": "sid"})
    with pytest.raises(SchemaError, match=r"mapping sends column 'sid' to both"):
        slate_logs(theirs, mapping={"slate_id": "sid", "context": "sid"})
    with pytest.raises(
        SchemaError,
        match=r"slate logs are missing columns: 'slate_id', "
        r"'reward'.*mapping=\{'slate_id': 'session'\}",
    ):
        slate_logs(theirs, mapping={"position": "pos"})


def test_a_long_layout_without_its_position_column_says_so():
    data = pd.DataFrame(
        {
            "slate_id": [7, 7],
            "pos": [0, 1],
            "item": [2, 0],
            "reward": [0.0, 1.0],
            "propensity": [0.5, 0.5],
        }
    )
    with pytest.raises(
        ValidationError,
        match=r"list column `item` must hold one list per slate; "
        r"row 0 holds 2\. Without a column 'position'.*"
        r"mapping=\{'position': \.\.\.\}",
    ):
        slate_logs(data)
    assert slate_logs(data, mapping={"position": "pos"}).item.tolist() == [[2, 0]]


def test_an_unknown_arm_names_treated_or_control():
    replays = pd.DataFrame(
        {
            "pair_id": np.repeat(np.arange(3), 2),
            "arm": ["a", "b"] * 3,
            "outcome": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0],
        }
    )
    with pytest.raises(ParameterError, match=r"^`treated`: arm 'c' is not in the replays"):
        paired_effect(replays, treated="c", control="b")
    with pytest.raises(ParameterError, match=r"^`control`: arm nan is not in the replays"):
        paired_effect(replays, treated="a", control=float("nan"))


def test_load_sample_names_columns():
    with pytest.raises(ParameterError, match="columns must be a list of column names"):
        ope.load_sample(columns=3.5)
    with pytest.raises(SchemaError, match=r"^`columns`: the bundled sample has no column"):
        ope.load_sample(columns=["no_such_column"])


# ------------------------------------------------------------------------- numeric range
@pytest.mark.parametrize("estimator", ["is", "wis", "pdis", "wpdis", "dr", "wdr"])
def test_sequential_estimates_refuse_overflow(estimator):
    traj = read_trajectories(_steps(reward=1e308))
    model = {"q_hat": np.zeros(6), "v_hat": np.zeros(6)} if "dr" in estimator else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no numpy overflow warning on the way
        with pytest.raises(
            ValidationError,
            match=rf"the '{estimator}' estimate .* overflow "
            r"float64: `reward` reaches \|value\| 1e\+308",
        ):
            sequential_estimate(traj, "pi", estimator=estimator, gamma=1.0, **model)
    scaled = sequential_estimate(
        read_trajectories(_steps(reward=1.0)), "pi", estimator=estimator, gamma=1.0, **model
    )
    assert np.isfinite(scaled.value) and np.isfinite(scaled.std_error)


def test_sequential_estimate_names_an_overflowing_model():
    traj = read_trajectories(_steps())
    with pytest.raises(ValidationError, match=r"`q_hat` reaches \|value\| 1e\+308"):
        sequential_estimate(
            traj, "pi", estimator="dr", gamma=1.0, q_hat=np.full(6, 1e308), v_hat=np.full(6, -1e308)
        )


def test_sequential_estimate_tail_value_of_a_wrong_type():
    traj = read_trajectories(_steps().assign(done=False))
    for tail in (object(), True, [[1.0]]):
        with pytest.raises((ParameterError, ValidationError), match="`tail_value`"):
            sequential_estimate(traj, "pi", gamma=0.9, tail_value=tail)


@pytest.mark.parametrize("how", ["tabular", "features"])
def test_fitted_q_refuses_overflow(how):
    if how == "tabular":
        traj, kwargs = read_trajectories(_steps(reward=1e308)), {"state_column": "state"}
        policy, name = [[0.5, 0.5], [0.5, 0.5]], "reward"
    else:
        traj = read_trajectories(_steps().assign(x0=1e200))
        kwargs, name = {"feature_columns": ["x0"]}, "x0"

        def policy(x):
            return np.full((len(x), 2), 0.5)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValidationError, match=rf"overflow float64: `{name}` reaches"):
            fitted_q_evaluation(traj, policy, gamma=1.0, **kwargs)
