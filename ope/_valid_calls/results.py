"""Minimal valid calls of the entry points of one area: the drivers (``evaluate``, ``diagnose``,
``evaluate_distributed``, loggers), the result objects' methods (Estimate, Evaluation,
Diagnostics, ...), the report.

``VALID`` maps each registered name to a factory ``valid(tmp) -> Call``; ``KNOWN_BROKEN`` maps
``"<entry>::<argument>"`` to what breaks the hostile-input contract today (each a bug to fix at
its root; the contract test marks it a strict xfail so that the fix asks for its removal).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final


from ope._entrypoints import Call
from ope._valid_calls._base import (
    arrays, call, estimate, evaluation, frame,
)

#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.evaluate": lambda tmp: call(
        "ope.evaluate", logs=frame(), policies=["greedy"], estimators=("ips", "snips"),
        ci="normal", confidence_level=0.95, reward_range=(0.0, 1.0), max_weight=None,
        n_resamples=None, rng=0, by=None, weight_column=None),
    "ope.diagnose": lambda tmp: call(
        "ope.diagnose", logs=frame(), policies=["greedy"], max_weight=None,
        reward_range=(0.0, 1.0), confidence_level=0.95),
    "ope.diagnose_arrays": lambda tmp: call(
        "ope.diagnose_arrays", **arrays(), policy_names=["greedy"], confidence_level=0.95,
        reward_range=(0.0, 1.0)),
    "ope.Estimate.ci": lambda tmp: Call(estimate().ci, {
        "confidence_level": 0.9, "method": "normal"}),
    "ope.Estimate.with_ci": lambda tmp: Call(estimate().with_ci, {
        "confidence_level": 0.9, "method": "normal"}),
    "ope.Evaluation.table": lambda tmp: Call(evaluation().table, {"by": None}),
    "ope.Evaluation.compare": lambda tmp: Call(evaluation().compare, {
        "policy": "greedy", "estimator": "ips"}),
    "ope.Evaluation.write_report": lambda tmp: Call(evaluation().write_report, {
        "path": tmp / "report.html", "title": "t", "overwrite": True}),
    "ope.report.check_report_destination": lambda tmp: call(
        "ope.report.check_report_destination", path=tmp / "r.html", overwrite=True),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {
    'ope.Estimate.ci::max_weight': (
        'ope.Estimate.ci(max_weight=nan) raised ParameterError not naming `max_weight`: `'
        'weight_bound` is an a priori weight bound for the bounded methods (hoeffding, be'
        "rnstein, empirical_likelihood); method 'normal' does not use it."
    ),
    'ope.Estimate.with_ci::max_weight': (
        'ope.Estimate.with_ci(max_weight=nan) raised ParameterError not naming `max_weigh'
        't`: `weight_bound` is an a priori weight bound for the bounded methods (hoeffdin'
        "g, bernstein, empirical_likelihood); method 'normal' does not use it."
    ),
    'ope.Evaluation.compare::policy': (
        "ope.Evaluation.compare(policy='') raised KeyError (not from ope's exception tree"
        '): "no estimate for (\'\', \'ips\'); policies: [\'greedy\'], estimators: [\'ips\', \'snip'
        's\']"'
    ),
    'ope.Evaluation.compare::baseline': (
        'ope.Evaluation.compare(baseline=<object object at 0x…>) raised KeyError (not fro'
        'm ope\'s exception tree): "no estimate for (<object object at 0x…>, \'ips\'); polic'
        'ies: [\'greedy\'], estimators: [\'ips\', \'snips\']"'
    ),
    'ope.Evaluation.compare::estimator': (
        "ope.Evaluation.compare(estimator='\\x00') raised KeyError (not from ope's excepti"
        'on tree): "no estimate for (\'greedy\', \'\\\\x00\'); policies: [\'greedy\'], estimators'
        ': [\'ips\', \'snips\']"'
    ),
    'ope.Evaluation.write_report::certificate': (
        'ope.Evaluation.write_report(certificate=<object object at 0x…>) raised Attribute'
        "Error (not from ope's exception tree): 'object' object has no attribute 'verdict"
        "'"
    ),
    'ope.diagnose_arrays::logging_propensity': (
        'ope.diagnose_arrays(logging_propensity=<empty>) raised ValidationError not namin'
        'g `logging_propensity`: diagnostics need at least 2 logged rows; got 0. Pass the'
        ' whole log, not a row.'
    ),
    'ope.diagnose_arrays::policy_names': (
        "ope.diagnose_arrays(policy_names=3.5) raised TypeError (not from ope's exception"
        " tree): 'float' object is not iterable"
    ),
    'ope.diagnose_arrays::segments': (
        'ope.diagnose_arrays(segments=<object object at 0x…>) raised AttributeError (not '
        "from ope's exception tree): 'object' object has no attribute 'items'"
    ),
    'ope.evaluate::estimators': (
        "ope.evaluate(estimators=3.5) raised TypeError (not from ope's exception tree): '"
        "float' object is not iterable"
    ),
    'ope.report.check_report_destination::inputs': (
        'ope.report.check_report_destination(inputs=<object object at 0x…>) raised TypeEr'
        "ror (not from ope's exception tree): 'object' object is not iterable"
    ),
}
