"""Entry points that pass ``**options`` on (select_estimators, tune_setting, run_monitor):
a misspelt or missing option is a ParameterError naming the function called and the nearest
accepted name, not a TypeError naming an inner function."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ope
from ope.exceptions import ParameterError


@pytest.fixture(scope="module")
def frame():
    g = np.random.default_rng(0)
    a = g.integers(0, 3, 300)
    return pd.DataFrame(
        {
            "action": a,
            "propensity": 1 / 3,
            "reward": g.binomial(1, 0.4, 300).astype(float),
            "target__greedy": np.where(a == 1, 0.8, 0.1),
        }
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda f: ope.select_estimators(f, ["greedy"], candidtes=["ips"]),
            r"select_estimators\(\) got an unknown option 'candidtes' \(did you mean 'candidates'",
        ),
        (
            lambda f: ope.tune_setting(f, "clipped_ips", ["greedy"], estimatrs=["ips"]),
            r"tune_setting\(\) got an unknown option 'estimatrs' \(did you mean 'estimators'",
        ),
        (
            lambda f: ope.run_monitor([f], reward_rnge=(0, 1)),
            r"run_monitor\(\) got an unknown option 'reward_rnge' \(did you mean 'reward_range'",
        ),
        (
            lambda f: ope.run_monitor([f]),
            r"run_monitor\(\) needs the option reward_range=",
        ),
    ],
)
def test_a_misspelt_or_missing_option_names_the_function_called(frame, call, message):
    with pytest.raises(ParameterError, match=message):
        call(frame)


def test_options_the_target_takes_still_pass(frame):
    result = ope.run_monitor([frame], reward_range=(0.0, 1.0), confidence_level=0.9)
    assert result.looks == 1
