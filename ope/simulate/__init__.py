"""Synthetic environments with exact ground truth, and the bundled sample dataset.

Every environment has a finite context (or state) distribution and known reward means, so the
value of any policy is an exact expectation rather than a Monte Carlo average. They share one
interface:

- a constructor with the settings (and a ``seed`` fixing the model);
- ``sample(n, *, rng=None, ...)`` returning a ``pyarrow.Table`` in the canonical log schema
  (docs/guide/logs.md), with one ``target__<name>`` column per candidate policy;
- ``candidate_policies`` (names) and ``true_value(name_or_table)``, exact, with ``"logging"``
  the logging policy's own value;
- oracle accessors (``expected_reward``, ``policy_expected_reward``, ``oracle=True`` columns)
  for tests of reward models and doubly robust estimators.

Environments: :class:`ContextualBandit`, :class:`Recommendation` (long-tail catalog with
candidate sets), :class:`CatalogBandit` (large catalog with categorical item embeddings, for
marginalized estimators), :class:`ConfoundedBandit` (a logger that reads a hidden input: logged
propensities wrong by a known factor, for the sensitivity analysis), :class:`TabularMDP` (trajectories that terminate or are truncated),
:class:`PairedReplaySimulator` (paired counterfactual replays), :class:`TokenModel` (an
autoregressive model over a small vocabulary: responses with token log-probabilities, for
:mod:`ope.sequences`), :class:`ContinuousBandit` (a real-valued action with exact values of
every candidate and of its kernel-smoothed version, for :mod:`ope.continuous`).
:func:`load_sample` reads the
bundled sample (package data ``ope/data/sample_recommendation.parquet``) with its exact truth.

Sizes are bounded so that every call stays near a second of work: a model table holds at most
``MAX_MODEL_CELLS`` (2**20) cells, one ``sample`` call draws at most ``MAX_SAMPLE_SIZE`` (2**20)
rows, episodes, pairs or slates (draw more as several samples with different ``rng``), an
episode lasts at most ``MAX_HORIZON`` (10,000) steps. Larger sizes raise
:class:`ope.ParameterError` naming them, before anything is allocated.
"""

from __future__ import annotations

from ope.simulate._sample import BundledSample, load_sample
from ope.simulate.bandit import ContextualBandit
from ope.simulate.catalog import CatalogBandit
from ope.simulate.continuous import ContinuousBandit
from ope.simulate.confounded import ConfoundedBandit
from ope.simulate.mdp import TabularMDP
from ope.simulate.paired import PairedReplaySimulator
from ope.simulate.recommendation import Recommendation
from ope.simulate.slate import SlateEnvironment
from ope.simulate.tokens import TokenModel

__all__ = [
    "BundledSample",
    "CatalogBandit",
    "ConfoundedBandit",
    "ContinuousBandit",
    "ContextualBandit",
    "PairedReplaySimulator",
    "Recommendation",
    "SlateEnvironment",
    "TabularMDP",
    "TokenModel",
    "load_sample",
]
