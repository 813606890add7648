"""``ope.evaluate``: many candidate policies × many estimators on one set of logs.

The entry point ties the parts together, in a few steps:

1. :meth:`EvaluationSettings.checked` and :func:`resolve_estimators` validate every argument
   once (``ope.ParameterError`` for a bad one);
2. the target propensities of P candidates (``ope.policies``), and for DM/DR a cross-fitted
   reward model (``ope.reward_models``) on the context matrix (``ope.context``);
3. IPS, clipped IPS, SNIPS and the logging value come from one pass of the compiled moment
   kernel (``ope._kernel`` through ``ope.streaming.MomentStats``) whatever else is asked for; it
   reads the logs' ``target__`` columns as zero-copy views (no (n, P) copy) and also
   accumulates the cross-moments with the reward, so the paired comparisons with the logging
   policy need no second pass (``Evaluation.statistics`` keeps them, and
   ``ope.diagnose(..., statistics=...)`` reuses them); the other estimators make one chunked
   pass each over an (n, P) block (``ope.estimators.estimate_many``);
4. an :class:`Evaluation` holding one :class:`~ope.results.Estimate` per policy × estimator,
   the logging policy's own value, paired comparisons, and the validation report of the logs.

The same driver runs over batches: eager logs are one batch; a lazy :func:`ope.scan_logs` source
is its record batches and ``ope.distributed.evaluate_distributed`` its Dask partitions, whose
statistics merge exactly (:meth:`ope.streaming.MomentStats.merge`) and become an Evaluation by
:meth:`Evaluation.from_statistics`: the same numbers as the eager path in bounded memory.
"""

from __future__ import annotations

from ope.evaluation._driver import EmbeddingStatistics, batch_statistics, merged_marginal_notes
from ope.evaluation._settings import (
    MARGINAL_STREAMING_ESTIMATORS,
    STREAMING_ESTIMATORS,
    WEIGHT_BOUND_ESTIMATORS,
    WEIGHT_BOUND_METHODS,
    EvaluationSettings,
    check_embedding,
    resolve_estimators,
)
from ope.evaluation.auto import (
    AUTO_SPLITS,
    AUTO_TRAIN_SHARE,
    EstimatorChoice,
    auto_candidates,
    evaluate,
    select_estimators,
)
from ope.evaluation.plan import DEFAULT_ESTIMATORS, EvaluationPlan
from ope.evaluation.tuning import (
    EmbeddingChoice,
    SettingChoice,
    slope_index,
    tune_embedding,
    tune_setting,
)
from ope.evaluation.result import SEGMENT_TABLE_COLUMNS, TABLE_COLUMNS, Evaluation

__all__ = [
    "evaluate",
    "select_estimators",
    "tune_setting",
    "slope_index",
    "SettingChoice",
    "tune_embedding",
    "EmbeddingChoice",
    "auto_candidates",
    "EstimatorChoice",
    "AUTO_SPLITS",
    "AUTO_TRAIN_SHARE",
    "Evaluation",
    "TABLE_COLUMNS",
    "SEGMENT_TABLE_COLUMNS",
    "DEFAULT_ESTIMATORS",
    "EvaluationPlan",
    "EvaluationSettings",
    "STREAMING_ESTIMATORS",
    "MARGINAL_STREAMING_ESTIMATORS",
    "EmbeddingStatistics",
    "merged_marginal_notes",
    "WEIGHT_BOUND_ESTIMATORS",
    "WEIGHT_BOUND_METHODS",
    "batch_statistics",
    "resolve_estimators",
    "check_embedding",
]
