"""Valid calls of one area (the conventions are in :mod:`ope._valid_calls`): the simulators of
``ope.simulate`` and their methods."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final


import numpy as np

from ope._entrypoints import Call, resolve
from ope._valid_calls._base import (
    call,
)

#: The simulators at small sizes (every method call well under 50 ms), by registered name; a
#: two-step horizon and one replicate keep the largest sample a hostile `n` may ask for
#: (MAX_SAMPLE_SIZE episodes or pairs) near a second.
_SMALL: Final[dict[str, dict[str, Any]]] = {
    "ope.simulate.ContextualBandit": dict(
        n_actions=3, n_features=2, n_contexts=8, n_segments=2, seed=0
    ),
    "ope.simulate.Recommendation": dict(
        n_items=20, n_candidates=3, n_requests=8, n_features=2, segments=("a", "b"), seed=0
    ),
    "ope.simulate.CatalogBandit": dict(
        n_items=20,
        n_candidates=4,
        n_requests=8,
        n_features=2,
        n_embedding_dims=2,
        n_categories=2,
        n_candidate_clusters=2,
        direct_effect=0.5,
        stochastic_embeddings=True,
        seed=0,
    ),
    "ope.simulate.ConfoundedBandit": dict(n_contexts=4, confounding=0.5, seed=0),
    "ope.simulate.SlateEnvironment": dict(n_items=4, slate_size=2, n_contexts=2, seed=0),
    "ope.simulate.TabularMDP": dict(n_states=3, n_actions=2, horizon=2, seed=0),
    "ope.simulate.TokenModel": dict(n_prompts=2, vocab_size=3, max_length=3, seed=0),
    "ope.simulate.ContinuousBandit": dict(n_features=1, seed=0),
    "ope.simulate.PairedReplaySimulator": dict(n_tasks=4, n_items=5, n_replicates=1, seed=0),
}


def _method(cls: str, method: str, **kwargs: Any) -> Callable[[Path], Call]:
    """The bound ``method`` of a small simulator ``cls`` called with ``kwargs``."""

    def build(tmp: Path) -> Call:
        env = resolve(cls)(**_SMALL[cls])
        return Call(getattr(env, method), dict(kwargs))

    return build


def _ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


_CB, _REC = "ope.simulate.ContextualBandit", "ope.simulate.Recommendation"
_SLATE, _MDP = "ope.simulate.SlateEnvironment", "ope.simulate.TabularMDP"
_PAIRED, _CAT = "ope.simulate.PairedReplaySimulator", "ope.simulate.CatalogBandit"
_TOKENS = "ope.simulate.TokenModel"
_CONT = "ope.simulate.ContinuousBandit"

#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
#: The simulators' ``reward`` (the reward distribution, a choice) is left at its default: the
#: glossary reads the name as the reward array, so the harness derives its hostile arrays from
#: a stand-in and would fail on the string "bernoulli"; it is still varied.
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.simulate.ContextualBandit": lambda tmp: call(
        "ope.simulate.ContextualBandit",
        n_actions=3,
        n_features=2,
        n_contexts=8,
        n_segments=2,
        n_noise_features=0,
        reward_noise=0.1,
        logging_temperature=1.0,
        logging_epsilon=0.05,
        unsupported_actions=0,
        policies={"mine": np.full((8, 3), 1 / 3)},
        seed=0,
    ),
    "ope.simulate.Recommendation": lambda tmp: call(
        "ope.simulate.Recommendation",
        n_items=20,
        n_candidates=3,
        n_requests=8,
        n_features=2,
        segments=("a", "b"),
        zipf_exponent=1.0,
        logging_temperature=1.0,
        logging_epsilon=0.05,
        logging_top_k=None,
        restricted_segments=None,
        policies={"mine": np.full((8, 3), 1 / 3)},
        seed=0,
    ),
    "ope.simulate.CatalogBandit": lambda tmp: call(
        "ope.simulate.CatalogBandit",
        n_items=20,
        n_candidates=4,
        n_requests=8,
        n_features=2,
        n_embedding_dims=2,
        n_categories=2,
        n_candidate_clusters=2,
        direct_effect=0.5,
        embedding_effects=(1.0, 0.5),
        stochastic_embeddings=True,
        embedding_noise=0.2,
        logging_temperature=1.0,
        logging_epsilon=0.05,
        policies={"mine": np.full((8, 4), 1 / 4)},
        seed=0,
    ),
    "ope.simulate.SlateEnvironment": lambda tmp: call(
        "ope.simulate.SlateEnvironment",
        n_items=4,
        slate_size=2,
        n_contexts=2,
        click_model="additive",
        seed=0,
    ),
    "ope.simulate.TabularMDP": lambda tmp: call(
        "ope.simulate.TabularMDP",
        n_states=3,
        n_actions=2,
        horizon=4,
        gamma=0.9,
        termination_probability=0.1,
        reward_noise=0.1,
        n_features=None,
        logging_temperature=1.0,
        logging_epsilon=0.1,
        policies={"mine": np.full((3, 2), 0.5)},
        seed=0,
    ),
    "ope.simulate.PairedReplaySimulator": lambda tmp: call(
        "ope.simulate.PairedReplaySimulator",
        n_tasks=4,
        n_items=5,
        n_replicates=2,
        effect_mean=0.3,
        effect_sd=0.6,
        arms=("with_memory", "no_memory"),
        price_per_token=1e-5,
        tool_fee=1e-3,
        latency_sd=0.4,
        seed=0,
    ),
    "ope.simulate.ConfoundedBandit": lambda tmp: call(
        "ope.simulate.ConfoundedBandit",
        n_contexts=4,
        confounding=0.5,
        reward_shift=0.2,
        seed=0,
    ),
    "ope.simulate.ConfoundedBandit.sample": _method(
        "ope.simulate.ConfoundedBandit", "sample", n=20, rng=0, oracle=True
    ),
    "ope.simulate.ContextualBandit.outcome_cdf": _method(
        _CB, "outcome_cdf", policy="logging", t=np.array([0.0, 0.5])
    ),
    "ope.simulate.ConfoundedBandit.true_value": _method(
        "ope.simulate.ConfoundedBandit", "true_value", policy="always_1"
    ),
    **{
        f"{cls}.{method}": _method(cls, method, **kwargs)
        for cls in (_CB, _REC, _CAT)
        for method, kwargs in (
            ("policy_expected_reward", dict(policy="uniform", context_ids=_ids(0, 1, 2))),
            ("policy_table", dict(name="uniform")),
            (
                "sample",
                dict(n=20, rng=0, logging_policy="logging", oracle=True, distributions=True),
            ),
            ("supported_value", dict(policy="uniform")),
            ("true_value", dict(policy="uniform")),
            ("true_value_by_segment", dict(policy="uniform")),
            ("unsupported_mass", dict(policy="uniform")),
        )
    },
    f"{_CB}.expected_reward": _method(
        _CB, "expected_reward", context_ids=_ids(0, 1, 2), actions=_ids(2, 1, 0)
    ),
    f"{_REC}.expected_reward": _method(
        _REC, "expected_reward", context_ids=_ids(0, 1, 2), items=_ids(2, 1, 0)
    ),
    f"{_CAT}.expected_reward": _method(
        _CAT, "expected_reward", context_ids=_ids(0, 1, 2), items=_ids(19, 1, 0)
    ),
    f"{_CAT}.action_features": _method(_CAT, "action_features"),
    f"{_CAT}.embedding_distribution": _method(_CAT, "embedding_distribution"),
    f"{_SLATE}.click_probability": _method(
        _SLATE, "click_probability", context=_ids(0, 1), item=np.array([[0, 1], [3, 2]])
    ),
    f"{_SLATE}.expected_estimate": _method(
        _SLATE, "expected_estimate", estimator="iips", name="greedy"
    ),
    f"{_SLATE}.policy": _method(_SLATE, "policy", name="greedy"),
    f"{_SLATE}.sample": _method(_SLATE, "sample", n=20, rng=0),
    f"{_SLATE}.sample_logs": _method(_SLATE, "sample_logs", n=20, rng=0),
    f"{_SLATE}.true_value": _method(_SLATE, "true_value", name="greedy"),
    f"{_MDP}.discounted_q_function": _method(_MDP, "discounted_q_function", policy="uniform"),
    f"{_MDP}.expected_reward": _method(
        _MDP, "expected_reward", states=_ids(0, 1, 2), actions=_ids(1, 0, 1)
    ),
    f"{_MDP}.policy_table": _method(_MDP, "policy_table", name="uniform"),
    f"{_MDP}.q_function": _method(_MDP, "q_function", policy="uniform"),
    f"{_MDP}.sample": _method(_MDP, "sample", n=10, rng=0, logging_policy="logging", oracle=True),
    f"{_MDP}.true_value": _method(_MDP, "true_value", policy="uniform", horizon=2),
    _TOKENS: lambda tmp: call(
        _TOKENS,
        n_prompts=2,
        vocab_size=3,
        max_length=3,
        temperature=0.8,
        top_p=0.9,
        reported="sampled",
        logprob_noise=0.01,
        reward_noise=0.5,
        end_shift=0.0,
        seed=0,
    ),
    _CONT: lambda tmp: call(
        _CONT,
        n_features=1,
        logger_scale=1.0,
        curvature=1.0,
        reward_noise=0.5,
        candidates={"up": {"coef": [0.5], "intercept": 0.1, "scale": 0.0}},
        seed=0,
    ),
    f"{_CONT}.expected_reward": _method(
        _CONT, "expected_reward", context=np.zeros((3, 1)), action=np.array([0.0, 0.5, 1.0])
    ),
    f"{_CONT}.sample": _method(_CONT, "sample", n=10, rng=0, samples=2),
    f"{_CONT}.true_value": _method(_CONT, "true_value", policy="optimal"),
    f"{_CONT}.smoothed_value": _method(
        _CONT, "smoothed_value", policy="optimal", kernel="cosine", bandwidth=0.1
    ),
    f"{_TOKENS}.kl": _method(_TOKENS, "kl", policy="tuned", reference="sampler"),
    f"{_TOKENS}.policy_table": _method(_TOKENS, "policy_table", policy="cooler"),
    f"{_TOKENS}.prompt_values": _method(_TOKENS, "prompt_values", policy="tuned"),
    f"{_TOKENS}.sample": _method(_TOKENS, "sample", n=10, rng=0, oracle=True),
    f"{_TOKENS}.true_value": _method(_TOKENS, "true_value", policy="tuned"),
    f"{_PAIRED}.expected_outcome": _method(
        _PAIRED,
        "expected_outcome",
        task_ids=_ids(0, 3),
        item_ids=_ids(4, 1),
        treated=np.array([True, False]),
        outcome="cost",
    ),
    f"{_PAIRED}.sample": _method(_PAIRED, "sample", n=10, rng=0, oracle=True),
    f"{_PAIRED}.true_effect": _method(_PAIRED, "true_effect", outcome="outcome", item=2),
    f"{_PAIRED}.true_item_effects": _method(_PAIRED, "true_item_effects", outcome="tokens"),
    f"{_PAIRED}.true_value": _method(
        _PAIRED, "true_value", arm="with_memory", outcome="latency_ms"
    ),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {}
