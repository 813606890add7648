"""The story of ``ope demo`` on the bundled sample: an evaluation against the exact truth,
where the logs cannot answer, a conservatively learned policy, and the HTML report.

The command line's ``demo`` subcommand is an edge over :func:`run_demo` (flags in, text and
JSON out); the narrative lives here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from ope._format import format_number, wrap_text

__all__ = [
    "DEMO_MAX_WEIGHT",
    "DEMO_LEARN_ROWS",
    "DEMO_TARGET_WIDTH",
    "DEMO_NEW_ROWS",
    "run_demo",
]

#: clip level of the demo's clipped IPS: an a priori choice, not read off the data
DEMO_MAX_WEIGHT: Final = 50.0

#: rows of the simulated logs the demo learns a policy from
DEMO_LEARN_ROWS: Final = 20_000

#: the IPS interval width the demo's exploration plan aims at: a twentieth of the sample's
#: reward range (0 to 1), which the current logging reaches for three candidates and not for
#: the two with support gaps
DEMO_TARGET_WIDTH: Final = 0.05

#: the new logged rows the demo's exploration plan may assume: as many as the sample holds
DEMO_NEW_ROWS: Final = 100_000


def run_demo(
    *, seed: int, out: str, seed_line: str, provenance: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """The demo on the bundled sample: (the JSON document, the text).

    One evaluation plan (IPS, clipped IPS at :data:`DEMO_MAX_WEIGHT`, SNIPS; normal intervals
    within the sample's reward range) against the exact truth, the coverage gaps by segment
    and the exploration plan that closes them (:data:`DEMO_TARGET_WIDTH` with
    :data:`DEMO_NEW_ROWS` new rows), a conservative policy learned on simulated logs and its
    certificate, and the HTML report of all of them written to ``out`` (which the caller
    checked before the work). The text is wrapped to :data:`ope._format.TEXT_WIDTH`.
    """
    from ope.evaluation import EvaluationPlan
    from ope.io import read_logs
    from ope.report import write_report
    from ope.simulate import load_sample

    sample = load_sample()
    truth = {str(k): float(v) for k, v in sample.truth["policies"].items()}
    low, high = (float(v) for v in sample.truth["reward_range"])
    reward_range = (low, high)
    logs = read_logs(sample.table)
    source = f"ope.load_sample() ({sample.path.name})"
    logs.report = replace(logs.report, source=source)  # the rows' origin, not "<Table>"
    plan = EvaluationPlan.build(
        estimators=("ips", "clipped_ips", "snips"),
        ci="normal",
        reward_range=reward_range,
        max_weight=DEMO_MAX_WEIGHT,
        rng=seed,
    )
    with warnings.catch_warnings():  # every warning is one of the numbered notes below
        warnings.simplefilter("ignore")
        ev = plan.run(logs)
        summary = ev.summary(truth=truth)
        coverage, coverage_doc, d = _coverage_gaps(logs, plan, ev)
        exploration, exploration_doc = _exploration_plan(d)
        learning, learning_doc, certificate = _learning(seed)
        report = str(
            write_report(
                out,
                evaluation=ev,
                diagnostics=d,
                certificate=certificate,
                truth=sample.truth,
                provenance={
                    **provenance,
                    "input": source,
                    "rows": logs.report.rows_read,
                },
                overwrite=True,
            )
        )  # checked before the work: absent, ope's own, or --force
    table = ev.table()
    table["true_value"] = table["policy"].map(truth)
    document = {
        "sample": sample.path.name,
        "truth": {"logging": sample.truth["logging"], "policies": truth},
        "evaluation": ev.to_dict(),
        "table": table.to_dict(orient="records"),
        "coverage": coverage_doc,
        "exploration_plan": exploration_doc,
        "learning": learning_doc,
        "report": report,
    }
    text = "\n".join(
        [
            *wrap_text(
                f"ope demo: bundled sample {sample.path.name} (exact truth from "
                f"{sample.path.name.removesuffix('.parquet')}.truth.json beside it)",
                subsequent="  ",
            ),
            str(logs.report),
            "",
            summary,
            f"\ntrue value of the logging policy: {sample.truth['logging']:.4f}",
            "",
            coverage,
            "",
            exploration,
            "",
            learning,
            "",
            seed_line,
            "",
            *wrap_text(
                f"report written to {report} \u2014 open it in a browser: the estimates against "
                "the truth, the gaps, the exploration plan and the certificate above, with "
                "figures",
                subsequent="  ",
            ),
            "next, on your own logs (LOGS: a parquet file or folder):",
            "  ope report LOGS --by segment --reward-range 0 1 --out logs-report.html",
            "  ope evaluate LOGS --reward-range 0 1 --report logs-report.html --force",
            "  ope diagnose LOGS --by segment --max-weight 50",
        ]
    )
    return document, text


@dataclass
class _Notes:
    """Numbered notes of the demo: each warning stated once, referenced by number elsewhere."""

    items: list[str] = field(default_factory=list)

    def add(self, text: str) -> int:
        if text in self.items:
            return self.items.index(text) + 1
        self.items.append(text)
        return len(self.items)

    def refs(self, numbers: Sequence[int]) -> str:
        return f"  [see {', '.join(map(str, numbers))}]" if numbers else ""


def _coverage_gaps(logs: Any, plan: Any, ev: Any) -> tuple[str, list[dict[str, Any]], Any]:
    """Where the sample's logs cannot answer: a verdict per candidate, its weight warnings
    referenced by the numbers they have in the evaluation's ``summary`` (not repeated), and
    each segment gap once, numbered on from there; and the diagnostics (for the report)."""
    from ope.diagnostics import diagnose

    clip = plan.clipped.max_weight  # the plan's clipped IPS: the outer/inner split's level
    d = diagnose(
        logs,
        by=["segment"],
        max_weight=clip,
        reward_range=plan.settings.reward_range,
        target_width=DEMO_TARGET_WIDTH,
        new_rows=DEMO_NEW_ROWS,
    )
    stated, row_refs = ev.numbered_notes()  # the numbers the evaluation's summary shows
    by_policy: dict[str, list[int]] = {}
    for policy, ref in zip(ev.table()["policy"], row_refs):  # P x estimators table rows
        for number in ref.strip("[]").split(","):
            if number.strip():
                by_policy.setdefault(policy, []).append(int(number))
    notes = _Notes(list(stated))
    lines = [f"coverage gaps (ope diagnose --by segment --max-weight {clip:g}):"]
    table = d.table()
    segments = d.segments()
    width = max(len(p) for p in table["policy"]) + 2
    rows = []
    gap_lines = []
    for row in table.itertuples(index=False):
        refs = sorted(set(by_policy.get(row.policy, [])))
        gaps = segments[(segments.policy == row.policy) & segments.gap]
        for gap in gaps.itertuples(index=False):
            number = notes.add(f"{row.policy}: gap: {gap.reason}")
            refs.append(number)
            gap_lines.append(number)
        lines += wrap_text(
            f"{row.policy:<{width}}ESS/n {row.ess_ratio:6.3f}   "
            f"{row.verdict_coverage_share:4.0%} of its narrowest interval (clip "
            f"{format_number(row.verdict_max_weight, trim=True)}) is coverage, not sampling -> "
            f"{row.verdict}{notes.refs(refs)}",
            initial="  ",
            subsequent=" " * (2 + width),
        )
        rows.append(
            {
                "policy": row.policy,
                "ess_ratio": row.ess_ratio,
                "verdict": row.verdict,
                "coverage_share": row.verdict_coverage_share,
                "gaps": [g.reason for g in gaps.itertuples(index=False)],
            }
        )
    # the diagnostics' own caveats (not about one policy's weights, which the notes above state)
    policies = set(d.policies)
    for note in d.notes:
        head = note.split(":", 1)[0].strip()
        if head not in policies and not head.startswith("policy '"):
            gap_lines.append(notes.add(note))
    for i in sorted(set(gap_lines)):  # numbered on from the evaluation's notes
        label = f"  [{i}] "
        lines += wrap_text(notes.items[i - 1], initial=label, subsequent=" " * len(label))
    return "\n".join(lines), rows, d


def _exploration_plan(d: Any) -> tuple[str, list[dict[str, Any]]]:
    """The exploration plan of the diagnostics (:meth:`ope.Diagnostics.plan`): how much traffic
    to give each candidate's own choice so that new logs answer where these cannot; the
    candidates that need none on one line."""
    plan = d.plan()
    low, high = d.reward_range
    lines = wrap_text(
        "exploration plan: the share of traffic on which to play a candidate's own choice so "
        f"that {DEMO_NEW_ROWS:,} new rows give its IPS interval a width of "
        f"{DEMO_TARGET_WIDTH:g}; ope diagnose prints it with --by segment --reward-range "
        f"{low:g} {high:g} --target-width {DEMO_TARGET_WIDTH:g} --new-rows {DEMO_NEW_ROWS}",
        subsequent="  ",
    )
    needed = plan[plan["exploration_share"] > 0]
    for reason in needed["reason"]:  # one row per candidate and scope that needs exploring
        lines += wrap_text(reason, initial="  ", subsequent="    ")
    enough = [p for p in dict.fromkeys(plan["policy"]) if p not in set(needed["policy"])]
    if enough:
        lines += wrap_text(
            f"no exploration needed: {', '.join(enough)} (the current logging reaches the width)",
            initial="  ",
            subsequent="    ",
        )
    return "\n".join(lines), plan.to_dict(orient="records")


def _learning(seed: int) -> tuple[str, dict[str, Any], Any]:
    """Learn a policy conservatively on simulated logs and certify it; show its exact value.
    Returns the text, the JSON and the certificate for the report (with a note that its rows
    are the simulated logs, not the sample's)."""
    import numpy as np

    from ope.io import read_logs
    from ope.learning import learn_from_logs
    from ope.simulate import ContextualBandit

    env = ContextualBandit(n_actions=5, seed=3)
    logs = read_logs(env.sample(DEMO_LEARN_ROWS, rng=1))
    columns = [c for c in logs.columns if c.startswith("x")]
    learner, cert = learn_from_logs(logs, context_columns=columns, rng=seed)
    true_value = env.true_value(learner.predict_proba(np.asarray(env.context_features)))
    logging_value = env.true_value("logging")
    where = (
        f"{DEMO_LEARN_ROWS:,} simulated bandit logs (ope.simulate.ContextualBandit), certified "
        "on held-out rows"
    )
    text = "\n".join(
        [
            *wrap_text(
                f"policy learning: a conservative policy learned on {where}", subsequent="  "
            ),
            str(cert),
            f"  exact value of the learned policy: {true_value:.4f}; "
            f"of the logging policy: {logging_value:.4f}",
        ]
    )
    shown = replace(
        cert,
        notes=(
            *cert.notes,
            f"the demo's learned policy: learned on {where}, not on the bundled sample this "
            f"report evaluates; its exact value is {true_value:.4f}, the logging policy's "
            f"{logging_value:.4f}",
        ),
    )
    return (
        text,
        {
            "certificate": cert.to_dict(),
            "true_value": float(true_value),
            "true_logging_value": float(logging_value),
        },
        shown,
    )
