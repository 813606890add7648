"""The ``ope`` command line: a thin edge over the public API.

It parses arguments, calls public functions, prints, and sets exit codes (docs/guide/cli.md). It
does no statistics of its own.

Commands: ``validate``, ``evaluate`` (bandit logs, or trajectory logs -- one row per step with
``episode_id, step, done`` -- through :func:`ope.sequential.sequential_estimate`), ``diagnose``,
``learn``, ``paired`` (effects on paired replays through :func:`ope.paired.paired_effect`),
``import`` (an Open Bandit Dataset campaign or a DSJSON file to parquet logs, through
:mod:`ope.importers`), ``action-table`` (the per-(action, position) table of a logger that
does not depend on the context, read off its logs: a candidate for other logs), ``report``
(the self-contained HTML report of :mod:`ope.report`: evaluation and diagnostics of bandit
logs; ``evaluate --report FILE.html`` writes it too) and ``demo`` (which ends by writing ``report.html``). ``validate``, ``evaluate``, ``diagnose`` and
``report`` also read the raw formats directly with ``--format obd|dsjson``.

The contract (README, *Command line*):

- Exit codes: 0 ok, 1 runtime failure, 2 usage (a bad flag, a bad flag value, an empty output
  name, an output that exists without ``--force`` -- also one another process created during
  the work -- or is an input: the message names the flag), 65 invalid data (sysexits
  ``EX_DATAERR``: schema, validation, policy and data-file errors, with the rejection report),
  73 an output cannot be written (sysexits ``EX_CANTCREAT``: no space, quota, permission,
  read-only file system; checked before the work where it can be), 130 interrupted (SIGINT),
  143 terminated (SIGTERM). Interrupted or terminated, a run removes its temporary files and
  still prints its one JSON document under ``--json``.
- One error is one line on stderr (a message's line breaks are folded at this edge).
- ``--json``: every run, failed or not (argparse's usage errors too), prints exactly one JSON
  document on stdout and nothing else there (anything a library prints goes to stderr). Every
  document records ``ok``, ``exit_code``, ``ope_version``, ``command``, ``options`` (every
  parsed flag, defaults filled in) and ``seed``; a failure has ``error: {type, message}``.
- Reproducible: everything random takes ``--seed`` (default :data:`DEFAULT_SEED`), and the
  same command gives byte-identical JSON (no timings, no temporary paths in it).
- Messages name the CLI's flags (``--on-invalid drop``), not the Python keywords of the API
  (:data:`FLAGS`, :data:`FLAG_VALUES` and :data:`CLI_PHRASES` translate them at this edge).
- Candidates: ``--policy NAME`` selects one the inputs hold, ``--policy NAME=KIND[:ARGS]``
  builds one (:mod:`ope.policies.specs`); a malformed spec is a usage error of ``--policy``.
- Files are written through :mod:`ope._output`: checked before the work starts, never over an
  input, not over an existing file without ``--force``, atomically.
- Progress bars (``ope._progress``) go to stderr, only on a terminal; ``--quiet`` turns them off.
- Lean: a command imports only what it needs (``ope --help`` and ``--version`` import no
  numerical library).
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import dataclasses
import functools
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn

from ope._thresholds import MAX_FIGURE_CANDIDATES, MAX_REPORT_SEGMENTS
from ope.exceptions import (
    DataFileError,
    EstimationError,
    MissingBoundsError,
    OPEError,
    OPEWarning,
    OutputError,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)

__all__ = ["main", "run", "build_parser"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_DATAERR: Final = 65  # sysexits EX_DATAERR: the input data were incorrect
EXIT_CANTCREAT: Final = 73  # sysexits EX_CANTCREAT: an output file cannot be created or written
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, as shells report an interrupted command
EXIT_TERMINATED: Final = 143  # 128 + SIGTERM (kill, a container stop, a job scheduler)

#: The seed of every random choice when ``--seed`` is not given (printed and recorded).
DEFAULT_SEED: Final = 0

#: ``ope evaluate`` streams a parquet source batch by batch (bounded memory) from this many rows
#: on, when its estimators and interval method can be computed from merged statistics
#: (``--streaming auto``). Below it the logs are read whole: the overlap diagnostics and the
#: paired comparisons need every row, and at 1M rows x 8 candidates the whole read stays
#: under about 1 GB.
STREAM_MIN_ROWS: Final = 1_000_000

#: Interval methods a streamed evaluation offers for every estimator it runs (the bounded ones
#: depend on the estimator; ``--streaming on`` with those falls back per estimator).
STREAM_CI_METHODS: Final = ("normal", "t")

#: Bandit estimators of ``ope evaluate`` when ``--estimator`` is not given.
DEFAULT_BANDIT_ESTIMATORS: Final = ("ips", "snips")

#: The interval of an estimator to which the requested ``--ci`` method does not apply.
FALLBACK_CI: Final = "normal"

#: The help of ``--reward-range`` and ``--confidence-level`` wherever a command takes them.
REWARD_RANGE_HELP: Final = (
    "a priori range of the rewards, e.g. 0 1 for clicks (never read off the data): the bounded "
    "and betting intervals, clipped IPS's origin and the diagnostics' verdict need it"
)
CONFIDENCE_LEVEL_HELP: Final = "level of the intervals, in (0, 1) (default 0.95)"

#: The help of ``--ci`` of the commands that evaluate with :func:`ope.evaluate`.
CI_HELP: Final = (
    "interval method: normal t bootstrap hoeffding bernstein bottou empirical_likelihood "
    f"betting (default normal); an estimator it does not apply to gets a {FALLBACK_CI} "
    "interval and a note"
)


class _UsageError(Exception):
    """A command-line usage problem (exit code 2), with the flag it concerns when known."""

    def __init__(
        self,
        message: str,
        *,
        flag: str | None = None,
        parser: argparse.ArgumentParser | None = None,
    ) -> None:
        super().__init__(message)
        self.flag = flag
        self.parser = parser


#: The command-line flag of each argument of the public functions: messages of the API that
#: name a Python keyword (```max_weight```, ``on_invalid='drop'``) are shown with the flag.
FLAGS: Final = {
    "position_base": "--position-base",
    "cascade_model": "--cascade-model",
    "ci": "--ci",
    "confidence_level": "--confidence-level",
    "reward_range": "--reward-range",
    "max_weight": "--max-weight",
    "weight_bound": "--weight-bound",
    "tau": "--tau",
    "shrinkage": "--shrinkage",
    "n_resamples": "--n-resamples",
    "estimators": "--estimator",
    "estimator": "--estimator",
    "context_columns": "--context-columns",
    "on_invalid": "--on-invalid",
    "mapping": "--mapping",
    "target_width": "--target-width",
    "new_rows": "--new-rows",
    "certify_fraction": "--certify-fraction",
    "rng": "--seed",
    "delta": "--delta",
    "grid": "--grid",
    "gamma": "--gamma",
    "horizon": "--horizon",
    "tail_value": "--tail-value",
    "q_hat": "--q-column",
    "state": "--state-column",
    "v_hat": "--v-column",
    "treated": "--treated",
    "control": "--control",
    "outcomes": "--outcome",
    "by": "--by",
    "embedding": "--cluster-column, --embedding-columns or --estimated-embedding",
    "clusters": "--cluster-column",
    "columns": "--embedding-columns",
    "estimated": "--estimated-embedding",
    "metrics": "--metric",
    "guardrails": "--guardrail",
    "primary": "--primary",
    "outcome": "--outcome",
    "outcome_range": "--outcome-range",
    "select": "--select-embedding",
    "search": "--embedding-search",
    "min_dims": "--min-embedding-dims",
    "correction": "--correction",
    "ratio": "--ratio",
    "context": "--obd-context",
    "chunk_lines": "--chunk-lines",
    "workers": "--workers",
    "force": "--force",
    "policies": "--policy",
    "names": "--policy",  # ope.policies.candidates_with_specs: the candidates' names
    # ope.monitor.Monitor
    "method": "--method",
    "planned_rows": "--planned-rows",
    "simultaneous": "--simultaneous",
    "every": "--every",
    "settle": "--settle",
    # ope.sequences
    "weighting": "--weighting",
    "on_policy": "--on-policy",
    "reward_column": "--reward-column",
    "behavior_column": "--behavior-column",
    "q_column": "--q-column",
    "v_column": "--v-column",
    "source": "LOGS",
    # ope continuous (ope.evaluate_continuous)
    "action_column": "--action-column",
    "density_column": "--density-column",
}

#: Names of :data:`FLAGS` that are common words or another function's keyword too (``columns``
#: of ``ope.read_logs`` and of ``ope.ActionEmbedding``, ``method`` of ``ci()`` and of
#: ``ope.Monitor``, ``state`` of a monitor and of the trajectories, ``context`` of an OBD
#: campaign and of slate logs): spelled as their flag in a message, but a message is about
#: that flag (the ``flag`` of its error) only when it quotes the name as the argument at
#: fault (```state` must ...``, ``... in `names` ...``) or opens with its value
#: (``search='exact' takes ...``); ``name=`` further on is advice, often about another
#: function's keyword (``leave it out of columns=[...]`` of ``ope.read_logs``).
GENERIC_NAMES: Final = frozenset(
    {
        "columns",
        "method",
        "state",
        "context",
        "names",
        "source",
        "embedding",
        "clusters",
        "estimated",
        "select",
        "search",
        "grid",
        "ratio",
        "correction",
        "primary",
        "every",
        "settle",
    }
)

#: What an elided value of the API (``context_columns=[...]``, ``policies=...``) reads as on the
#: command line, by flag.
FLAG_VALUES: Final = {
    "--context-columns": "COLUMN ...",
    "--by": "COLUMN ...",
    "--policy": "NAME=KIND:ARGS",
    "--mapping": "OURS=THEIRS",
    "--estimator": "NAME ...",
    "--seed": "N",
    "--max-weight": "W",
    "--weight-bound": "M",
    "--reward-range": "LO HI",
    "--horizon": "H",
    "--tail-value": "V",
}

#: Phrases of API messages that have no keyword-for-flag spelling on the command line, and what
#: they read as there (applied before the keywords are translated).
CLI_PHRASES: Final = (
    (r"ope\.read_logs\(\.\.\., on_invalid='drop'\)", "--on-invalid drop"),
    # ope.read_logs(columns=[...]) chooses the columns read; the commands read every column
    (r", or leave (?:'[^']*'|\"[^\"]*\") out of columns=\[\.\.\.\] to read the others", ""),
    # ope continuous: a candidate comes from the logs' columns or --constant
    (
        r"and none was given \(`candidates`, `densities`\)\.",
        "and none was given: pass --constant NAME=VALUE (a candidate that always takes the "
        "action VALUE), or give the logs a target__<name> column (the candidate's action per "
        "row) or density__<name> (its density at the logged action).",
    ),
    (
        r"with_distributions=True needs",
        "the estimators asked for need",
    ),
    (
        r"and `policies` is None\. Pass policies=\.\.\. \(names, a long-format table, or "
        r"objects\)\.",
        "and neither --policy nor --policies was given: pass --policy "
        "NAME=KIND:ARGS (e.g. u=uniform) or --policies FILE (a long-format policy table).",
    ),
    (
        r"pass policies= \(a list of names, a policy table, or a dict of policy objects\)",
        "pass --policy NAME=KIND:ARGS (e.g. u=uniform) or --policies FILE (a long-format policy "
        "table)",
    ),
    (
        r"action_features=\.\.\.",
        "action features (--format obd reads an OBD campaign's item table)",
    ),
    (
        r"or pass the policies as a long-format policy table or as policy objects",
        "or give the candidates with --policies FILE or --policy NAME=KIND:ARGS (their whole "
        "distributions are then known)",
    ),
    (r"Rename yours with mapping=\{'event_id': \.\.\.\}", "Rename the table's columns"),
    (r"ope\.diagnostics\.", "`ope diagnose`."),
    (r", or an estimator object that holds it instead of the name", ""),
    # the safety gate's bound method is ``ci=`` in Python and ``--gate`` on ``ope learn``
    (r"the gate's ci='(\w+)'", r"--gate \1"),
    (r"Use ci='t' \(the asymptotic", "Use --gate t (the asymptotic"),
    (r"ci='auto' cho", "--gate auto cho"),
    # ope slates: the pseudoinverse's closed form, and the candidates given as --scores
    (r"product_logging=True", "--product-logging"),
    # an estimate's interval method is ``ci(method=...)`` in Python and ``--ci`` on the
    # command line (not ``ci(--method ...)``, the keyword translated alone)
    (r"ci\(method='(\w+)' or '(\w+)'\)", r"--ci \1 or --ci \2"),
    (r"ci\(method=['\"](\w+)['\"]\)", r"--ci \1"),
    # a paired effect's interval method is ``ci=`` in Python and ``--ci`` on ``ope paired``
    # (its skew note's advice), the outcomes' a priori bounds ``reward_range`` there
    (r"ci='(\w+)' corrects", r"--ci \1 corrects"),
    (r"ci='(\w+)' or ci='(\w+)'", r"--ci \1 or --ci \2"),
    (r"the outcomes' reward_range\b", "the outcomes' --reward-range"),
    (r"bounded by reward_range\b", "bounded by --reward-range"),
    # two estimators offered as alternatives (the trajectory advice)
    (r"estimator='(\w+)' or '(\w+)'", r"--estimator \1 or \2"),
    (r"an a priori reward_range\b", "an a priori --reward-range"),
    # the a priori range asked for, with its example
    (
        r"reward_range=\(low, high\) (?:when estimating )?\(e\.g\. \(0, 1\) for clicks\)",
        "--reward-range LO HI (e.g. --reward-range 0 1 for clicks)",
    ),
    (r"pass reward_range for\b", "pass --reward-range for"),
    # the exploration plan is ``Diagnostics.plan()`` in Python and --target-width /
    # --new-rows (with --reward-range, which the plan needs) on ``ope diagnose``, whichever
    # command shows the gap; its per-action breakdown is Python's only (not in --json)
    (
        r"\(see Diagnostics\.plan\(\)\)",
        "(see the exploration plan of "
        "`ope diagnose --reward-range LO HI --target-width W --new-rows N`)",
    ),
    (
        r"\(Diagnostics\.plan_actions\(\)\)",
        "(all of them: Diagnostics.plan_actions() in Python)",
    ),
    # an unknown estimator's message offers auto (alone)
    (r"or estimators='auto' alone \(", "or auto alone (--estimator auto: "),
    # the marginalized estimators without an embedding: the flags that give one, and the
    # flag of the estimators that need it (the message is about --estimator)
    (
        r"^estimator\(s\) ([\w, ]+) need embedding=ope\.ActionEmbedding\(\.\.\.\): how the "
        r"actions map to embeddings \(clusters=COLUMN, columns=\[\.\.\.\] of the item table, a "
        r"known distribution=, or estimated=\[\.\.\.\] observed columns\)\.",
        r"argument --estimator: estimator(s) \1 need an embedding of the actions: pass "
        "--cluster-column "
        "COLUMN (a cluster per item) or --embedding-columns COLUMN ... (of the item table: "
        "--items FILE, or the one embedded in the logs), or --estimated-embedding COLUMN ... "
        "(embedding columns observed on each row).",
    ),
    # dropped rows: a result's validation report is ``.report`` in Python; a command prints
    # the counts by reason, and `ope validate` the first rows of each
    (
        r"; see \.report for the first row numbers of each reason",
        "; `ope validate --on-invalid drop` lists the first row numbers of each reason",
    ),
    (r" \(they stay counted in the \.report of the result\)", " (the output still counts them)"),
    # an API message's own pointer to the flag: on the command line the keyword before it
    # reads as that flag already
    (r" \(CLI: --[\w-]+(?: [\w-]+)?\)", ""),
)

#: ``--policy`` of evaluate / diagnose / report: a candidate's name, or a spec that builds one.
POLICY_HELP: Final = (
    "a candidate: NAME selects the target__NAME column of the logs (or policy NAME of "
    "--policies); NAME=KIND[:ARGS] builds one: NAME=uniform, NAME=logging, "
    "NAME=epsilon-greedy:COLUMN:EPS, NAME=softmax:COLUMN[:TEMPERATURE], NAME=npy:FILE.npy "
    "((n, K) or (n, K, positions), rows aligned with the logs), NAME=table:FILE.csv "
    "(action[,position],probability), NAME=classifier:FILE.skops[:COLUMN,...] (needs skops; "
    "pickles are refused). Repeat the flag or list several"
)

#: ``--format`` of validate / evaluate / diagnose: parquet logs, or a raw source an importer reads.
FORMATS: Final = ("parquet", "obd", "dsjson")

#: Sources ``ope import`` reads.
IMPORT_FORMATS: Final = ("obd", "dsjson")

#: ``ope tune``: the estimators with a setting, the rules and the default level, as
#: :mod:`ope.evaluation.tuning` defines them (``TUNABLE``, ``RULES``, ``SLOPE_DELTA``; restated
#: here so that the parser needs no numpy; tests/test_tuning.py checks they agree).
TUNABLE_ESTIMATORS: Final = ("clipped_ips", "switch_dr", "dros")
TUNING_RULES: Final = ("slope", "mse")
TUNING_DELTA: Final = 0.1

#: ``ope slates``: the slate estimators, as :data:`ope.slate_evaluation.SLATE_ESTIMATOR_NAMES`
#: names them (restated so that the parser needs no numpy; tests/test_slate_evaluation.py
#: checks they agree).
SLATE_ESTIMATOR_CHOICES: Final = (
    "sips",
    "iips",
    "rips",
    "pi",
    "cdr",
    "snsips",
    "sniips",
    "snrips",
    "snpi",
)

#: Columns that mark trajectory logs (one row per step): ``ope evaluate`` then runs the
#: sequential estimators (docs/guide/logs.md, the step schema).
TRAJECTORY_MARKERS: Final = ("episode_id", "step", "done")

#: The placeholder a --q-column/--v-column/--tail-column template replaces by the policy name.
POLICY_PLACEHOLDER: Final = "{policy}"

#: Suffixes ``ope action-table --out`` writes (the suffix chooses the format).
ACTION_TABLE_SUFFIXES: Final = (".csv", ".parquet", ".pq")

#: Suffixes ``ope learn --out`` writes (the suffix chooses the format of the policy table).
POLICY_TABLE_SUFFIXES: Final = (".parquet", ".pq", ".csv")

#: Suffixes ``ope import --out`` writes (always parquet).
IMPORT_SUFFIXES: Final = (".parquet", ".pq")

#: Flags of ``ope evaluate`` that only trajectory logs use (dest, flag).
_TRAJECTORY_ONLY: Final = (
    ("trajectories", "--trajectories"),
    ("gamma", "--gamma"),
    ("horizon", "--horizon"),
    ("tail_value", "--tail-value"),
    ("tail_column", "--tail-column"),
    ("q_column", "--q-column"),
    ("v_column", "--v-column"),
    ("state_column", "--state-column"),
)


# ---------------------------------------------------------------------------------------------
# messages: Python keywords -> flags
# ---------------------------------------------------------------------------------------------
_NAMES = "|".join(sorted(map(re.escape, FLAGS), key=len, reverse=True))
_ASSIGNED = re.compile(
    rf"(?<![\w.\-`])({_NAMES})="
    r"(\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}|'[^']*'|\"[^\"]*\"|\.\.\.|-?[\w.]*\w)"
)
#: The phrases as patterns in which a space also matches a line break and the indent after it
#: (a result's ``summary()`` wraps its notes).
_PHRASES = tuple((re.compile(pattern.replace(" ", r"\s+")), text) for pattern, text in CLI_PHRASES)
_QUOTED = re.compile(rf"`({_NAMES})`")

#: API names that are not spelled as a flag in a command's messages: there they name the data's
#: own column (``ope slates`` reads a ``context`` column; ``--obd-context`` is ``ope import``'s).
UNTRANSLATED: Final[dict[str, frozenset[str]]] = {"slates": frozenset({"context"})}

#: The command being run (:func:`_run` sets it), for :data:`UNTRANSLATED`.
_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("ope_command", default=None)


#: What the user typed that the API's messages show as Python values (an arm ``control`` of
#: ``ope paired`` reads ``'control'`` there): each value's repr and the text it reads as on the
#: command line, and the pattern that finds them (:func:`_typed`; :func:`_run` clears it).
_TYPED: contextvars.ContextVar[tuple[re.Pattern[str], dict[str, str]] | None] = (
    contextvars.ContextVar("ope_typed", default=None)
)


def _typed(names: Iterable[Any]) -> None:
    """Show ``names`` (arms, columns: what the running command's user typed) as typed in the
    command's messages (:func:`_cli_phrases`), not as the API quotes a str (``'control'``)."""
    shown = {repr(n): n for n in names if isinstance(n, str) and repr(n) != n}
    pattern = "|".join(map(re.escape, sorted(shown, key=len, reverse=True)))
    _TYPED.set((re.compile(pattern), shown) if shown else None)


#: API names a command spells with another flag than :data:`FLAGS`'s (``ope continuous`` takes
#: one context column per ``--context-column``).
COMMAND_FLAGS: Final[dict[str, dict[str, str]]] = {
    "continuous": {"context_columns": "--context-column"},
}


def _flag(name: str) -> str:
    """The running command's flag of the API name ``name``."""
    return COMMAND_FLAGS.get(_COMMAND.get() or "", {}).get(name, FLAGS[name])


def _kept(name: str) -> bool:
    """Whether the running command keeps the API name ``name`` as it is in its messages: it
    names the data's own column there, or the command has no such flag (the advice is then
    the Python API's, e.g. ``ci(method='betting')`` in ``ope continuous``)."""
    command = _COMMAND.get() or ""
    return name in UNTRANSLATED.get(command, frozenset()) or not _has_flags(command, _flag(name))


#: A command line quoted in a message (```ope diagnose --target-width W```): its flags are
#: that command's, whichever command shows the message.
_QUOTED_COMMAND: Final = re.compile(r"`ope ([a-z][\w-]*)([^`]*)`")
_FLAG_NAME: Final = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def _has_flags(command: str, text: str) -> bool:
    """Whether the running command (any, when unknown) has every flag ``text`` names, and a
    command line quoted in it (```ope diagnose --new-rows N```) every flag it names."""
    if not command:
        return True
    flags = _command_flags()
    for quoted in _QUOTED_COMMAND.finditer(text):  # loop over the quoted command lines
        other = flags.get(quoted.group(1))
        if other is not None and not all(f in other for f in _FLAG_NAME.findall(quoted.group(2))):
            return False
    known = flags.get(command)
    if known is None:
        return True
    return all(flag in known for flag in _FLAG_NAME.findall(_QUOTED_COMMAND.sub("", text)))


@functools.lru_cache(maxsize=1)
def _command_flags() -> dict[str, frozenset[str]]:
    """Each command's flags (and the global ones), read from the parser once."""
    parser = build_parser()
    top = {o for a in parser._actions for o in a.option_strings}
    out: dict[str, frozenset[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = frozenset(top | {o for a in sub._actions for o in a.option_strings})
    return out


def _shown(text: str) -> str:
    """``text`` as the terminal may show it: names from the data with control and bidi
    characters escaped (:func:`ope._format.safe_text`), line breaks kept."""
    from ope._format import safe_text  # imports numpy: not at ``ope --help``

    return safe_text(text, keep_newlines=True)


def _cli_text(text: str) -> str:
    """``text`` with the API's keywords spelled as flags: ```reward_range``` becomes
    ```--reward-range```, ``on_invalid='drop'`` becomes ``--on-invalid drop``,
    ``reward_range=(0, 1)`` becomes ``--reward-range 0 1``, ``context_columns=[...]`` becomes
    ``--context-columns COLUMN ...`` (:data:`FLAG_VALUES`), ``mapping={'event_id': ...}``
    becomes ``--mapping event_id=THEIRS``; the phrases of :data:`CLI_PHRASES` first."""

    def assigned(match: re.Match[str]) -> str:
        if _kept(match.group(1)):
            return match.group(0)
        flag, value = _flag(match.group(1)), match.group(2)
        if value in ("...", "[...]", "(...)"):
            return f"{flag} {FLAG_VALUES.get(flag, '...')}"
        if value.startswith("{"):  # a mapping: its keys, each =THEIRS
            keys = re.findall(r"['\"]([^'\"]+)['\"]\s*:", value)
            return f"{flag} {' '.join(f'{k}=THEIRS' for k in keys) or FLAG_VALUES.get(flag, '...')}"
        if value[:1] in ("(", "[", "'", '"'):
            value = value[1:-1] if value[:1] in ("(", "[") else value
            value = " ".join(v.strip().strip("'\"") for v in value.split(",") if v.strip())
        return f"{flag} {value}"

    text = _cli_phrases(text)
    return _QUOTED.sub(
        lambda m: m.group(0) if _kept(m.group(1)) else f"`{_flag(m.group(1))}`",
        _ASSIGNED.sub(assigned, text),
    )


def _cli_phrases(text: str) -> str:
    """``text`` with the phrases of :data:`CLI_PHRASES` spelled as on the command line, then
    the names the user typed as typed (:func:`_typed`), and nothing else: for texts that also
    show data (column names, a Python hint such as ``table(by='segment')``), where keywords
    are not translated. A phrase that a summary wrapped keeps its line break (after as many
    words as before it)."""
    command = _COMMAND.get() or ""
    for pattern, phrase in _PHRASES:
        if _has_flags(command, phrase):  # a flag the command lacks: the API's words stay
            text = pattern.sub(functools.partial(_rewrapped, phrase=phrase), text)
    typed = _TYPED.get()
    if typed is not None:
        names, shown = typed
        text = names.sub(lambda match: shown[match.group(0)], text)
    return text


def _cli_summary(text: str) -> str:
    """A result's rendered text with the phrases of :data:`CLI_PHRASES` spelled as on the
    command line (:func:`_cli_phrases`), each paragraph they change wrapped again to the text
    width (:func:`ope._format.edit_wrapped`): a longer spelling never widens a line."""
    from ope._format import edit_wrapped

    return edit_wrapped(text, _cli_phrases)


def _joined(*texts: str) -> str:
    """The texts of a command's output, one after another, with one numbered sequence of
    notes (:func:`ope._format.continue_notes`): a ``[k]`` anywhere names one note."""
    from ope._format import continue_notes

    return "\n\n".join(continue_notes([t for t in texts if t]))


def _rewrapped(match: re.Match[str], phrase: str) -> str:
    """``phrase`` (a replacement template) for ``match``, with the match's first line break and
    indent put back after the same number of words."""
    out = match.expand(phrase)
    for k, gap in enumerate(re.findall(r"\s+", match.group(0))):
        if "\n" in gap:
            words = out.split(" ")
            if k + 1 < len(words):
                out = " ".join(words[: k + 1]) + gap + " ".join(words[k + 1 :])
            break
    return out


def _flag_of(message: str) -> str | None:
    """The flag of the argument an API message is about: the first argument it names
    (```name``` or ``name=``) in the words the user reads (after :data:`CLI_PHRASES`, which
    drop or respell advice about arguments the command line does not have), when the running
    command has that one flag; a name of :data:`GENERIC_NAMES` assigned (``name=``) only
    when the message opens with it. None when no argument qualifies."""
    text = _cli_phrases(message).lstrip()
    for pattern in (_QUOTED, _ASSIGNED):
        for match in pattern.finditer(text):
            name = match.group(1)
            advice = pattern is _ASSIGNED and match.start() > 0
            if _kept(name) or (name in GENERIC_NAMES and advice):
                continue
            flag = _flag(name)
            if _FLAG_NAME.fullmatch(flag):  # one flag (not LOGS, nor "--a, --b or --c")
                return flag
    return None


def _flag_named(message: str) -> str | None:
    """The flag an error message concerns: ``argument --flag: ...`` (the CLI's and
    :mod:`ope._output`'s messages, or a phrase of :data:`CLI_PHRASES` that says it), else the
    argument it is about (:func:`_flag_of`)."""
    named = re.match(r"argument (\S+): ", _cli_phrases(message).lstrip())
    if named:  # a positional (``argument logs:``) names no flag
        return named.group(1) if named.group(1).startswith("--") else None
    return _flag_of(message)


#: The a priori bounds a MissingBoundsError asks for, by keyword: the flag to pass.
_BOUNDS: Final = ("reward_range", "weight_bound", "horizon")


def _bound_flag(message: str) -> str | None:
    """The flag of the bound a MissingBoundsError asks for (the first one it names)."""
    found = [(message.find(name), name) for name in _BOUNDS if name in message]
    return _flag(min(found)[1]) if found else _flag_of(message)


# ---------------------------------------------------------------------------------------------
# the parser
# ---------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors raise (so ``--json`` can still print its one document) and
    whose scalar flags refuse to be given twice (list flags accumulate: ``action="extend"``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # --confidence is not --confidence-level
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def error(self, message: str) -> Any:  # argparse's hook for every usage error
        match = re.match(r"argument (--\S+?)(?:/\S+)?: ", message)  # positionals: no flag
        raise _UsageError(message, flag=match.group(1) if match else None, parser=self)


class _Once(argparse.Action):
    """Store a flag's value; the same flag twice is a usage error, not a silent override."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        given: set[str] = namespace.__dict__.setdefault("_given", set())
        if self.dest in given:
            shown = " ".join(values) if isinstance(values, list) else values
            raise argparse.ArgumentError(
                self,
                f"given twice (last: {shown}); pass it once (list flags such as "
                "--estimator and --mapping accumulate)",
            )
        given.add(self.dest)
        setattr(namespace, self.dest, values)


def _add_output_flags(p: argparse.ArgumentParser, *, seed: bool = True) -> None:
    """``--json``, ``--quiet`` and ``--seed``: on every subcommand (called last, so the
    parser it records for usage messages is complete)."""
    p.set_defaults(_parser=p)
    p.add_argument(
        "--json",
        action="store_true",
        help="print exactly one JSON document on stdout (also on failure)",
    )
    p.add_argument(
        "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars on stderr"
    )
    if seed:
        p.add_argument(
            "--seed",
            type=int,
            default=DEFAULT_SEED,
            metavar="N",
            help=f"seed of every random choice: bootstrap resamples, cross-fitting "
            f"folds, train/certify splits (default {DEFAULT_SEED}; recorded in the "
            "output)",
        )


#: What LOGS is for the commands that read parquet logs (:func:`ope.read_logs`,
#: :func:`ope.io.read_paired`, :func:`ope.io.read_trajectories`).
LOGS_HELP: Final = (
    "a parquet file or a directory of parquet files (hive partitions become columns), as a "
    "local path or a file://, s3://, gs://, hdfs:// or abfs:// URI"
)

#: ... and for the commands with ``--format``: also the raw sources its importers read.
FORMAT_LOGS_HELP: Final = (
    f"{LOGS_HELP}; with --format obd an Open Bandit Dataset campaign folder (random/all) or "
    "its CSV, with --format dsjson a DSJSON file (gzipped or not)"
)

#: What LOGS is for ``ope monitor`` (:func:`ope.monitor.new_log_files` lists a local folder).
MONITOR_LOGS_HELP: Final = (
    "a local parquet file (read once), or a local directory whose new .parquet files are read "
    "as they land, one look each"
)


def _add_common(p: argparse.ArgumentParser, logs_help: str = LOGS_HELP) -> None:
    p.add_argument("logs", help=logs_help)
    p.add_argument(
        "--mapping",
        action="extend",
        nargs="+",
        metavar="OURS=THEIRS",
        help="rename your columns to ope's names, e.g. --mapping propensity=pscore reward=click "
        "(repeat the flag to add more)",
    )
    p.add_argument(
        "--on-invalid",
        choices=("raise", "drop"),
        default="raise",
        help="invalid rows: fail with the report (default), or drop them and say so",
    )


def _add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="parquet",
        help="what LOGS is: parquet logs (default), an OBD campaign folder/CSV, or a DSJSON file",
    )
    _add_import_options(p)


def _add_import_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--obd-context",
        choices=("user", "user+affinity", "none"),
        default=None,
        help="OBD only: the reward model's context: one-hot user_feature_0..3 and position "
        "(user, the default), also the 80 affinity columns (user+affinity), or the position "
        "alone (none)",
    )
    p.add_argument(
        "--chunk-lines",
        type=int,
        metavar="N",
        help="DSJSON: lines parsed per chunk (bounds memory; default "
        "ope.importers.dsjson.DEFAULT_CHUNK_LINES)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="DSJSON: processes that parse blocks (default "
        "ope.importers.dsjson.DEFAULT_WORKERS, at most the CPUs; 1 on a busy machine)",
    )


def _add_force(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--force", action="store_true", help=f"overwrite {what} if it exists (never an input)"
    )


def _add_truth(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument(
        "--truth",
        metavar="FILE.json",
        help=f"{prefix}known true values to draw beside the estimates (simulations): a JSON "
        "object {policy: value} (the key 'logging' for the logging policy), or the bundled "
        "sample's truth file (keys policies, logging, by_segment); every name must be a "
        "candidate, every value finite",
    )


def _report_cap(text: str) -> int | None:
    """``--max-candidates`` / ``--max-segments``: a positive integer, or ``all`` (no cap)."""
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all'; got {text!r}")
    return value


def _add_report_caps(p: argparse.ArgumentParser, prefix: str = "") -> None:
    # an absent flag leaves the report's default
    p.add_argument(
        "--max-candidates",
        type=_report_cap,
        default=argparse.SUPPRESS,
        metavar="K",
        help=f"{prefix}draw at most K candidates in full (default {MAX_FIGURE_CANDIDATES}: those "
        "with the highest lower bound of their gain over logging); the others are summarized "
        "in tables; 'all' draws every candidate",
    )
    p.add_argument(
        "--max-segments",
        type=_report_cap,
        default=argparse.SUPPRESS,
        metavar="K",
        help=f"{prefix}show at most K segments of a column in the charts and tables (default "
        + f"{MAX_REPORT_SEGMENTS}: the largest; one line summarizes the others); 'all' shows all",
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``ope``: every subcommand with its flags (a new one each call).

    :func:`main` parses with it; the registry of entry points reads the subcommands and their
    flags from it. Usage errors raise instead of exiting (:func:`main` turns them into exit 2
    and, under ``--json``, the one document).

    Examples
    --------
    >>> from ope.cli import build_parser
    >>> args = build_parser().parse_args(["validate", "logs.parquet", "--json"])
    >>> args.command, args.logs, args.json
    ('validate', 'logs.parquet', True)
    """
    from ope import __version__

    parser = _Parser(
        prog="ope",
        description="Off-policy evaluation of logged policies.",
        epilog=f"Exit codes: {EXIT_OK} ok, {EXIT_FAILURE} runtime failure, {EXIT_USAGE} usage "
        f"error (the flag is named), {EXIT_DATAERR} invalid data, {EXIT_CANTCREAT} an output "
        f"that cannot be written, {EXIT_INTERRUPTED}/{EXIT_TERMINATED} interrupted. With --json "
        "every run prints exactly one JSON document on stdout.",
    )
    parser.add_argument("--version", action="version", version=f"ope {__version__}")
    parser.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("validate", help="validate logs against the schema and print the report")
    _add_common(p, FORMAT_LOGS_HELP)
    _add_format(p)
    _add_output_flags(p, seed=False)

    p = sub.add_parser("evaluate", help="estimate candidate policies' values with intervals")
    _add_common(p, FORMAT_LOGS_HELP)
    _add_format(p)
    _add_evaluate_options(p)
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write the HTML report (estimates and overlap diagnostics); the "
        "diagnostics need every row, so the run is never streamed (--streaming on "
        "with --report is a usage error)",
    )
    _add_force(p, "--report")
    _add_truth(p, "with --report: ")
    _add_report_caps(p, "with --report: ")
    _add_output_flags(p)

    p = sub.add_parser(
        "diagnose", help="overlap diagnostics: ESS, weight tails, support and segment gaps, plan"
    )
    _add_common(p, FORMAT_LOGS_HELP)
    _add_format(p)
    _add_diagnose_options(p)
    _add_output_flags(p)

    p = sub.add_parser(
        "learn", help="learn a policy by maximizing a lower bound, and certify it on held-out rows"
    )
    _add_common(p)
    p.add_argument(
        "--context-columns",
        action="extend",
        nargs="+",
        required=True,
        metavar="COLUMN",
        help="context features",
    )
    p.add_argument(
        "--out",
        metavar="POLICY.parquet",
        help="write the learned policy (long format; .parquet or .csv), atomically",
    )
    _add_force(p, "--out")
    p.add_argument("--name", default="learned", help="policy name in the table and certificate")
    p.add_argument("--confidence-level", type=float, default=0.95, help=CONFIDENCE_LEVEL_HELP)
    p.add_argument(
        "--reward-range",
        nargs=2,
        type=float,
        metavar=("LO", "HI"),
        default=(0.0, 1.0),
        help="a priori range of the rewards (default 0 1): the bound the gate's lower bound is "
        "built on, never read off the data",
    )
    p.add_argument("--certify-fraction", type=float, default=0.5)
    p.add_argument(
        "--gate",
        choices=("auto", "betting", "bernstein", "t"),
        default="auto",
        help="bound of the safety gate: 'auto' (default) is betting, or t when the rows carry "
        "sampling weights and --max-sampling-weight is not given (bernstein refuses them)",
    )
    p.add_argument(
        "--weight-column",
        metavar="COLUMN",
        help="column of each row's sampling weight, 1 / P(row kept) (default: 'weight' when "
        "the logs have it, e.g. 1/(1-pdrop) from --format dsjson): the learner and the "
        "certificate are then Horvitz-Thompson weighted",
    )
    p.add_argument(
        "--max-sampling-weight",
        type=float,
        metavar="S",
        help="a priori bound of the sampling weights (1/(1-p) for the largest drop rate p): "
        "the gate then certifies weighted rows with the finite-sample weighted betting bound",
    )
    _add_output_flags(p)

    p = sub.add_parser(
        "monitor",
        help="anytime-valid confidence sequences over log files as they land (a rollout)",
    )
    _add_common(p, MONITOR_LOGS_HELP)
    _add_policy_flags(p)
    p.add_argument(
        "--reward-range",
        nargs=2,
        type=float,
        metavar=("LO", "HI"),
        help="a priori range of the rewards (required)",
    )
    p.add_argument(
        "--estimator",
        choices=("ips", "dr"),
        default="ips",
        help="ips (default) or dr (a reward model refitted after each look on earlier rows)",
    )
    p.add_argument(
        "--method",
        choices=("betting", "asymptotic"),
        help="betting: finite-sample, ips only (the default for ips); asymptotic: Gaussian "
        "mixture (the default for dr)",
    )
    p.add_argument("--confidence-level", type=float, default=0.95, help=CONFIDENCE_LEVEL_HELP)
    p.add_argument(
        "--simultaneous",
        action="store_true",
        help="split the level over every sequence (each candidate's value and difference) so "
        "that all hold at once",
    )
    p.add_argument(
        "--planned-rows",
        type=int,
        metavar="N",
        help="asymptotic: the row count at which the sequence is tightest (default 10000)",
    )
    p.add_argument(
        "--context-columns",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="dr: the reward model's context features (default: chosen on the first file)",
    )
    p.add_argument(
        "--every",
        metavar="DURATION",
        help="keep watching LOGS: look for new files every DURATION (30s, 10m, 1h); without "
        "it, read the files there now and stop",
    )
    p.add_argument(
        "--settle",
        metavar="DURATION",
        help="read a file only once it is unchanged for DURATION (default 5s with --every, "
        "else 0): a file still being written waits for the next poll",
    )
    p.add_argument(
        "--max-looks", type=int, metavar="N", help="stop after N looks (files) in this run"
    )
    p.add_argument(
        "--until-decided",
        action="store_true",
        help="stop at the first look after which every candidate is better or worse",
    )
    p.add_argument(
        "--state",
        metavar="FILE.json",
        help="the monitor's state, rewritten atomically after each look; an existing one is "
        "resumed (its files are not read again)",
    )
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="the HTML report of the sequences, rewritten after each look (an existing file "
        "ope wrote is replaced; another needs --force)",
    )
    _add_force(p, "--report")
    _add_output_flags(p)

    p = sub.add_parser(
        "paired", help="effects of treated arms against a control arm on paired replays"
    )
    _add_common(p)
    _add_paired_options(p)
    _add_output_flags(p)

    p = sub.add_parser(
        "import", help="import an Open Bandit Dataset campaign or a DSJSON file to parquet logs"
    )
    p.add_argument("format", choices=IMPORT_FORMATS, help="the source format")
    p.add_argument("src", help="OBD: a campaign folder (random/all) or its CSV; dsjson: the file")
    p.add_argument(
        "--out",
        required=True,
        metavar="LOGS.parquet",
        help="the parquet file to write (atomically)",
    )
    _add_force(p, "--out")
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")
    _add_import_options(p)
    _add_output_flags(p, seed=False)

    p = sub.add_parser(
        "tune",
        help="choose an estimator's setting per candidate (clip level, Switch-DR's tau, DRos's "
        "shrinkage) by SLOPE++ or the smallest MSE bound, over a stated grid",
        description="Evaluate the estimator at every value of the grid and choose one per "
        "candidate policy: SLOPE++ (Lepski's principle, no bias estimate; --rule slope) or the "
        "smallest bound on the mean squared error, the bias read from the paired difference "
        "with the unmodified estimator (--rule mse). Prints the choice, the grid, the rule and "
        "each value's estimate; pass the chosen value to ope evaluate (--max-weight, --tau, "
        "--shrinkage).",
    )
    _add_common(p, FORMAT_LOGS_HELP)
    _add_format(p)
    p.add_argument(
        "--estimator",
        required=True,
        choices=TUNABLE_ESTIMATORS,
        help="the estimator whose setting is chosen",
    )
    p.add_argument(
        "--rule", choices=TUNING_RULES, default="slope", help="SLOPE++ (default) or the MSE bound"
    )
    p.add_argument(
        "--grid",
        nargs="+",
        type=float,
        metavar="VALUE",
        help="the values to choose from (default: powers of about 2 over four decades; see "
        "ope.evaluation.tuning.DEFAULT_GRIDS)",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=TUNING_DELTA,
        help=f"one-sided level of the widths (slope) or of the bias bound (mse), in (0, 0.5) "
        f"(default {TUNING_DELTA:g})",
    )
    _add_policy_flags(p)
    p.add_argument(
        "--reward-range", nargs=2, type=float, metavar=("LO", "HI"), help=REWARD_RANGE_HELP
    )
    p.add_argument(
        "--context-columns",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="context features of the reward model of switch_dr and dros (default: as ope "
        "evaluate)",
    )
    _add_output_flags(p)

    p = sub.add_parser(
        "action-table",
        help="write the logging policy of logs that do not depend on the "
        "context (e.g. an OBD Bernoulli TS campaign) as a per-(action, position) table: a "
        "candidate for other logs (--policy NAME=table:FILE)",
        description="Read the logged propensity of each (action, position) -- of each action "
        "when the logs have no position column -- and write the table action[, position], "
        "probability. Fails (exit 65) when a pair's logged propensity varies (the logger "
        "depends on the context or changed over time) or a position's probabilities do not sum "
        "to 1 (an action was never logged there).",
    )
    _add_common(p, FORMAT_LOGS_HELP)
    _add_format(p)
    p.add_argument(
        "--out",
        required=True,
        metavar="TABLE.csv",
        help="the table to write (.csv or .parquet; atomically)",
    )
    _add_force(p, "--out")
    _add_output_flags(p, seed=False)

    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report: the answer, estimates, paired "
        "differences, weights, per-segment gaps, exploration plan (bandit logs)",
        description="Evaluate and diagnose every row of bandit logs and write one HTML file. "
        "--max-weight without --estimator evaluates ips clipped_ips snips. --out is checked "
        "before any row is read: an existing file needs --force, a missing folder or a "
        "non-.html name is a usage error (exit 2); the logs are never overwritten.",
    )
    _add_common(p, FORMAT_LOGS_HELP)
    _add_format(p)
    _add_evaluate_options(p)
    p.add_argument(
        "--target-width",
        type=float,
        help="interval width the exploration plan should reach (with --new-rows)",
    )
    p.add_argument(
        "--new-rows", type=int, help="volume of new logs the plan may assume (with --target-width)"
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE.html",
        help="the HTML file to write (atomically; checked before any row is read)",
    )
    _add_force(p, "--out")
    p.add_argument("--title", help="the report's title (default: Off-policy evaluation of LOGS)")
    _add_truth(p)
    _add_report_caps(p)
    _add_output_flags(p)

    p = sub.add_parser(
        "sequences",
        help="evaluate language-model or agent policies from logged responses and their token "
        "log-probabilities (JSON lines or parquet), or say why the logs cannot",
        description="One row per response: behavior_logprobs (a list, one per token, or their "
        "sum), target_logprobs__<name> per candidate (the same tokens scored by the candidate) "
        "and reward. Weights are kept in log space; the logged log-probabilities are audited "
        "(--on-policy names a candidate that is the logger itself: the evaluation is refused, "
        "exit 65, when they cannot be the sampling distribution); each candidate is marked "
        "evaluable or not, with the reason.",
    )
    p.add_argument("logs", help="a JSON-lines (.jsonl) or parquet file of responses")
    p.add_argument(
        "--policy",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="candidates by name (default: every target_logprobs__<name> column)",
    )
    p.add_argument(
        "--estimator",
        action="extend",
        nargs="+",
        choices=("ips", "snips", "clipped_ips"),
        help="estimators (default ips snips)",
    )
    p.add_argument("--max-weight", type=float, help="the clip level of clipped_ips")
    p.add_argument("--ci", default="normal", metavar="METHOD", help=CI_HELP)
    p.add_argument(
        "--reward-range", nargs=2, type=float, metavar=("LO", "HI"), help=REWARD_RANGE_HELP
    )
    p.add_argument(
        "--weight-bound",
        type=float,
        help="a priori bound on a response's weight (its probability under the candidate over "
        "the logger's) for the hoeffding, bernstein and empirical_likelihood intervals of "
        "ips/snips",
    )
    p.add_argument(
        "--weighting",
        choices=("sequence", "length_normalized"),
        default="sequence",
        help="sequence (default: unbiased) or length_normalized (per-token geometric mean: "
        "biased, for comparison)",
    )
    p.add_argument(
        "--on-policy",
        metavar="NAME",
        help="a candidate that is the logger itself (e.g. the trainer's recomputation of the "
        "serving model): its token ratios must be 1",
    )
    p.add_argument("--reward-column", default="reward", metavar="COLUMN")
    p.add_argument("--behavior-column", default="behavior_logprobs", metavar="COLUMN")
    p.add_argument(
        "--q-column",
        metavar="COLUMN",
        help="with --v-column, DR: a reward model's (e.g. a calibrated judge's) expected reward "
        "of each logged response",
    )
    p.add_argument(
        "--v-column",
        metavar="TEMPLATE",
        help="with --q-column, DR: the column of each candidate's expected reward at the row's "
        "prompt, with {policy} in its name (e.g. 'v_target__{policy}')",
    )
    _add_side_report_flags(p)

    p = sub.add_parser(
        "continuous",
        help="evaluate candidates of a real-valued action (price, bid, dose) by kernel-smoothed "
        "weights, with the bandwidth chosen and its trade-off shown",
        description="One row per decision: action (real), density (the logger's density at the "
        "action, > 0), reward, numeric context columns; per candidate target__<name> (its "
        "action, or a list of sampled actions) or density__<name> (its density at the logged "
        "action). Vowpal Wabbit's continuous-action DSJSON (_label_ca) reads directly.",
    )
    p.add_argument(
        "logs",
        help="a parquet, CSV or continuous-action DSJSON file (recognized by its first bytes: "
        ".json, .dsjson, gzipped or not)",
    )
    p.add_argument(
        "--policy",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="candidates by name (default: every target__<name>/density__<name> column)",
    )
    p.add_argument(
        "--on-invalid",
        choices=("raise", "drop"),
        default="raise",
        help="DSJSON lines that break a rule: fail with the report (default), or drop them "
        "and say so (lines Vowpal Wabbit skips are counted, never fail)",
    )
    p.add_argument(
        "--estimator",
        action="extend",
        nargs="+",
        choices=("ips", "snips", "clipped_ips", "dr"),
        help="estimators (default ips snips, and dr when the logs have context columns)",
    )
    p.add_argument(
        "--constant",
        action="append",
        metavar="NAME=VALUE",
        help="a candidate that always takes the action VALUE (repeatable), evaluated beside "
        "the logs' own candidates (those of --policy when given)",
    )
    p.add_argument(
        "--kernel", choices=("gaussian", "epanechnikov", "triangular", "cosine"), default="gaussian"
    )
    p.add_argument(
        "--bandwidth",
        default="slope",
        metavar="slope|H",
        help="slope (default: SLOPE++ over a grid, then undersmoothed) or a positive number in "
        "the actions' units",
    )
    p.add_argument("--max-weight", type=float, help="the clip level of clipped_ips")
    p.add_argument("--action-column", default="action", metavar="COLUMN")
    p.add_argument("--density-column", default="density", metavar="COLUMN")
    p.add_argument("--reward-column", default="reward", metavar="COLUMN")
    p.add_argument(
        "--context-column",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="the reward model's features (default: every other numeric column)",
    )
    p.add_argument(
        "--q-column",
        metavar="COLUMN",
        help="with --v-column, DR with your model: its prediction at the logged action",
    )
    p.add_argument(
        "--v-column",
        metavar="TEMPLATE",
        help="with --q-column: its prediction at each candidate's action, with {policy} in the "
        "name (e.g. 'v__{policy}')",
    )
    _add_side_report_flags(p)

    p = sub.add_parser(
        "slates",
        help="evaluate candidate rankings from slate logs (slate, cascade and independent IPS, "
        "Cascade-DR, the pseudoinverse), with per-slot overlap",
        description="One row per slot (slate_id, position, item, reward and the logger's "
        "propensity, prefix_propensity or slate_propensity; context for a ranking given by "
        "scores) or one row per slate with list columns. Candidates: the logs' columns "
        "target__<name> (marginal of the shown item at its slot), target_prefix__<name> and "
        "target_slate__<name>, and Plackett-Luce rankings from --scores.",
    )
    p.add_argument("logs", help="a parquet file or directory, or a CSV file, of slate logs")
    p.add_argument(
        "--policy",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="candidates by name (default: every one of the logs' columns and of --scores)",
    )
    p.add_argument(
        "--scores",
        action="append",
        metavar="NAME=FILE",
        help="a Plackett-Luce candidate from a table of scores (columns context, item, score: "
        "every item in every context); exact slate and prefix probabilities at any catalog "
        "size (repeatable)",
    )
    p.add_argument(
        "--estimator",
        action="extend",
        nargs="+",
        choices=SLATE_ESTIMATOR_CHOICES,
        metavar="NAME",
        help=f"estimators among {', '.join(SLATE_ESTIMATOR_CHOICES)} (default: sips, rips, cdr "
        "and iips where the probabilities serve them)",
    )
    p.add_argument(
        "--cascade-model",
        choices=("table", "zero"),
        default="table",
        help="Cascade-DR's reward model (default: per (context, slot, item) means)",
    )
    p.add_argument(
        "--product-logging",
        action="store_true",
        help="the pseudoinverse's closed form for a logger that fills slots independently",
    )
    p.add_argument(
        "--position-base",
        type=int,
        default=0,
        metavar="N",
        help="the first position in the logs (1 for 1-based positions)",
    )
    p.add_argument(
        "--mapping",
        action="extend",
        nargs="+",
        metavar="OURS=THEIRS",
        help="rename your columns to ope's names, e.g. --mapping slate_id=session reward=click",
    )
    p.add_argument("--ci", choices=("normal", "t", "bootstrap"), default="normal")
    _add_side_report_flags(p)

    p = sub.add_parser(
        "demo",
        help=f"evaluate the bundled sample, show the true values beside, and write {DEMO_REPORT}",
    )
    p.add_argument(
        "--out",
        default=DEMO_REPORT,
        metavar="FILE.html",
        help=f"the HTML report to write (default: {DEMO_REPORT} in the current "
        "folder); checked before the work like ope report --out",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite --out even if it is not a report ope wrote "
        "(one it wrote is replaced without asking)",
    )
    _add_output_flags(p)
    return parser


def _add_side_report_flags(p: argparse.ArgumentParser) -> None:
    """The last flags of a command whose result has its own report section (``ope
    sequences``, ``continuous``, ``slates``): the level, ``--report`` with ``--force``, and the
    output flags."""
    p.add_argument("--confidence-level", type=float, default=0.95, help=CONFIDENCE_LEVEL_HELP)
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write the HTML report (atomically; checked before any row is read)",
    )
    _add_force(p, "--report")
    _add_output_flags(p)


def _add_embedding_options(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group(
        "large catalogs",
        "marginal weights over item embeddings for mips, snmips, mdr and offcem: the logs need "
        "candidates, logging_distribution and each candidate's target_dist__<name>",
    )
    m.add_argument(
        "--cluster-column",
        metavar="COLUMN",
        help="a cluster per item: a column of the item table (--items, or the one embedded in "
        "the logs), or a list column of the logs aligned with candidates (clusters per row)",
    )
    m.add_argument(
        "--embedding-columns",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="categorical embedding columns of the item table; an item's embedding is the "
        "tuple of its values",
    )
    m.add_argument(
        "--estimated-embedding",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="embedding columns observed on each row of the logs, whose p(e|a) is estimated "
        "from the logs (cross-fitted item frequencies; no item table needed)",
    )
    m.add_argument(
        "--select-embedding",
        choices=("slope", "mse"),
        help="choose, per candidate, the subset of the embedding's dimensions (of "
        "--embedding-columns or --estimated-embedding) on the logs: by SLOPE++ or by the "
        "smallest MSE bound (conservative: keeps the full embedding unless a subset's variance "
        "falls by more than its bias can be)",
    )
    m.add_argument(
        "--embedding-search",
        choices=("exact", "greedy"),
        help="with --select-embedding: visit every subset (exact, the default up to 10 "
        "dimensions) or drop one dimension at a time (greedy)",
    )
    m.add_argument(
        "--min-embedding-dims",
        type=int,
        default=1,
        metavar="N",
        help="with --select-embedding: the fewest dimensions a subset keeps (default 1)",
    )
    m.add_argument(
        "--items",
        metavar="FILE",
        help="item table (parquet or UTF-8 CSV): an action column and the item's columns "
        "(default: the item table embedded in the logs, e.g. by --format obd)",
    )


def _add_distribution_options(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group(
        "outcome distributions",
        "each candidate's distribution of an outcome (reward, cost, latency) with bands that "
        "hold over every threshold at once (ope.outcome_distribution)",
    )
    m.add_argument(
        "--metric",
        action="extend",
        nargs="+",
        metavar="SPEC",
        help="cdf (at the logged outcome's deciles), cdf:T, exceed:T (P(Y > T)), quantile:L, "
        "cvar:L (mean of the lowest share L), upper_cvar:L (mean of the highest share L)",
    )
    m.add_argument(
        "--outcome",
        metavar="COLUMN",
        help="with --metric: the numeric column whose distribution is estimated (default reward; "
        "on trajectories the episode's discounted return)",
    )
    m.add_argument(
        "--outcome-range",
        nargs=2,
        type=float,
        metavar=("LO", "HI"),
        help="with --metric: the outcome's a priori range (closes the tails of quantile and CVaR "
        "bounds; default --reward-range for the reward)",
    )
    m.add_argument(
        "--distribution-estimator",
        choices=("ips", "snips", "dr"),
        default="ips",
        help="with --metric: the CDF's estimator (default ips; with --weight-bound its band is "
        "finite-sample, else a multiplier-bootstrap band; dr models the outcome's CDF from "
        "--context-columns and needs the candidates' whole distributions; on trajectories dr "
        "models the return's CDF from the first state, --state-column)",
    )


def _add_guardrail_options(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group(
        "several outcomes",
        "approve a candidate only when its primary outcome improves and no guardrail outcome is "
        "worse than the logging policy's by more than its margin (ope.guardrail_decision)",
    )
    m.add_argument(
        "--guardrail",
        action="extend",
        nargs="+",
        metavar="COLUMN[:higher|lower[:MARGIN]]",
        help="a guardrail outcome, e.g. latency_ms:lower:50 (not worse by more than 50 ms)",
    )
    m.add_argument(
        "--primary",
        metavar="COLUMN[:higher|lower]",
        help="with --guardrail: the outcome that must improve (default reward:higher); every "
        "outcome is estimated by SNIPS on the same weights",
    )


def _guardrail_outcome(args: argparse.Namespace, logs: Any, policies: Any) -> Any:
    """The :class:`ope.guardrails.GuardrailDecision` of ``--guardrail``, or None."""
    if not getattr(args, "guardrail", None):
        return None
    from ope.guardrails import guardrail_decision, parse_guardrail

    named = [("--guardrail", parse_guardrail(g).outcome) for g in args.guardrail]
    if args.primary:
        named.append(("--primary", parse_guardrail(args.primary, primary=True).outcome))
    missing = [f"{flag} {col!r}" for flag, col in named if col not in logs.columns]
    if missing:
        raise SchemaError(
            f"{'; '.join(missing)}: not in the logs. The logs have: {', '.join(logs.columns)}."
        )
    return guardrail_decision(
        logs,
        policies,
        primary=args.primary or "reward",
        guardrails=list(args.guardrail),
        confidence_level=args.confidence_level,
        weight_column=getattr(args, "weight_column", None),
    )


def _distribution_flags(args: argparse.Namespace) -> list[str]:
    """The outcome-distribution flags given without ``--metric`` (a usage error)."""
    return [
        flag
        for dest, flag, given in (
            ("outcome", "--outcome", getattr(args, "outcome", None) is not None),
            ("outcome_range", "--outcome-range", getattr(args, "outcome_range", None) is not None),
            (
                "distribution_estimator",
                "--distribution-estimator",
                getattr(args, "distribution_estimator", "ips") != "ips",
            ),
        )
        if given
    ]


def _dr_distribution_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--context-columns`` for DR's outcome distribution (the other estimators take none)."""
    if args.distribution_estimator != "dr":
        return {}
    return {"context_columns": getattr(args, "context_columns", None)}


def _distribution_outcome(args: argparse.Namespace, logs: Any, policies: Any) -> Any:
    """The :class:`ope.distribution.OutcomeDistributions` of ``--metric``, or None."""
    metrics = getattr(args, "metric", None)
    if not metrics:
        return None
    from ope.distribution import outcome_distribution

    outcome = args.outcome or "reward"
    span = args.outcome_range
    if span is None and outcome == "reward" and args.reward_range:
        span = args.reward_range
    found = outcome_distribution(
        logs,
        policies,
        outcome=outcome,
        estimator=args.distribution_estimator,
        weight_bound=args.weight_bound if args.distribution_estimator == "ips" else None,
        confidence_level=args.confidence_level,
        outcome_range=None if span is None else tuple(span),
        rng=args.seed if args.seed is not None else 0,
        weight_column=getattr(args, "weight_column", None),
        **_dr_distribution_options(args),
    )
    return dataclasses.replace(found, shown=tuple(metrics))


def _add_sensitivity(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sensitivity",
        choices=("auto", "on", "off"),
        default="auto",
        help="bounds on each candidate's value when the propensities may be off by a factor "
        "gamma, and the tipping point gamma* of its decision against logging (marginal "
        "sensitivity model, in the diagnostics); auto (default): when the propensities were "
        "estimated",
    )


def _sensitivity_setting(args: argparse.Namespace) -> bool | str:
    """``--sensitivity`` as :func:`ope.diagnose` takes it."""
    value = getattr(args, "sensitivity", "auto")
    return value if value == "auto" else value == "on"


def _add_policy_flags(p: argparse.ArgumentParser) -> None:
    """``--policies FILE`` and ``--policy NAME|SPEC ...``: the candidates (evaluate, diagnose,
    report, tune)."""
    p.add_argument(
        "--policies",
        metavar="FILE",
        help="long-format policy table (event_id, policy, action, probability); "
        "default: every target__<name> column in the logs",
    )
    p.add_argument(
        "--policy", action="extend", nargs="+", metavar="NAME|NAME=KIND:ARGS", help=POLICY_HELP
    )


def _add_evaluate_options(p: argparse.ArgumentParser) -> None:
    _add_sensitivity(p)
    _add_policy_flags(p)
    p.add_argument(
        "--estimator",
        action="extend",
        nargs="+",
        metavar="NAME|auto",
        help="auto, or estimator names. auto (bandit logs, given alone): every estimator that "
        "applies, one chosen per candidate by off-policy cross-validation. Names: bandit logs: dm "
        "ips clipped_ips snips dr sndr switch_dr dros, and with --cluster-column or "
        "--embedding-columns the marginalized mips snmips mdr offcem (default: ips snips); "
        "trajectories: is pdis wis wpdis dr wdr mis mis_dr magic (default: pdis wpdis); repeat "
        "to add more",
    )
    p.add_argument("--ci", default="normal", metavar="METHOD", help=CI_HELP)
    p.add_argument("--confidence-level", type=float, default=0.95, help=CONFIDENCE_LEVEL_HELP)
    p.add_argument(
        "--reward-range", nargs=2, type=float, metavar=("LO", "HI"), help=REWARD_RANGE_HELP
    )
    p.add_argument(
        "--max-weight",
        type=_setting_value,
        help="clip level for clipped_ips, or slope|mse: one per candidate, tuned on the rows "
        "(as `ope tune`); trajectories: of every cumulative weight, for every estimator (the "
        "estimate is then of the clipped value)",
    )
    p.add_argument(
        "--tau",
        type=_setting_value,
        help="switching threshold of switch_dr (weights above it use the reward model only), "
        "or slope|mse: one per candidate, tuned on the rows",
    )
    p.add_argument(
        "--shrinkage",
        type=_setting_value,
        help="shrinkage lambda > 0 of dros (small: towards dm; large: towards dr), or "
        "slope|mse: one per candidate, tuned on the rows",
    )
    p.add_argument(
        "--n-resamples",
        type=int,
        metavar="B",
        help="bootstrap resamples for --ci bootstrap (default 2000)",
    )
    p.add_argument(
        "--weight-bound",
        type=float,
        help="a priori bound on pi_e/pi_b for hoeffding, bernstein and empirical_likelihood "
        "intervals of ips/snips (e.g. 1 / the smallest logging probability); trajectories: "
        "a bound on every per-step ratio, for the bounded intervals of is/pdis",
    )
    p.add_argument(
        "--context-columns",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="context features for the reward model of dm/dr (default: every numeric column "
        "outside the log schema except outcome-, id- and time-like names: cost, latency_ms, "
        "tokens, click, conversion, revenue, weight, reward*, outcome*, timestamp*, *_id, "
        "*_time, *_at, user-item_affinity_*; a note lists them past 20; action features "
        "attached by --format obd are joined on the action)",
    )
    p.add_argument(
        "--by",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="segment columns for the coverage-gap report (numeric ones are binned)",
    )
    p.add_argument(
        "--weight-column",
        metavar="COLUMN",
        help="column of each row's sampling weight, 1 / P(row kept) (default: 'weight' when "
        "the logs have it, e.g. 1/(1-pdrop) from --format dsjson): every estimate is then "
        "Horvitz-Thompson weighted; bounded --ci methods refuse weighted rows",
    )
    _add_embedding_options(p)
    _add_distribution_options(p)
    _add_guardrail_options(p)
    p.add_argument(
        "--loggers",
        choices=("per_logger", "balanced", "precision"),
        help="logs from several loggers (column logging_policy): weight each row by its own "
        "logger, by the mixture of all loggers (propensity__<logger> columns), or estimate each "
        "logger's stratum alone and combine them by precision (ope.evaluate_loggers)",
    )
    p.add_argument(
        "--streaming",
        choices=("auto", "on", "off"),
        default="auto",
        help=f"read a parquet source batch by batch in bounded memory: 'auto' (default) from "
        f"{STREAM_MIN_ROWS:,} rows on when the estimators are ips/clipped_ips/snips (and "
        f"mips/snmips with a known embedding), the interval {'/'.join(STREAM_CI_METHODS)}, "
        "and neither --policies nor --by is given "
        "(a streamed run has no overlap diagnostics or paired comparisons: they need every row)",
    )
    t = p.add_argument_group(
        "trajectory logs",
        "one row per step (episode_id, step, done, ...): recognised from those columns, or "
        "forced with --trajectories; candidates are the target__<name> columns (per-step "
        "target probabilities of the logged actions)",
    )
    t.add_argument(
        "--trajectories", action="store_true", help="read LOGS as trajectories (one row per step)"
    )
    t.add_argument("--gamma", type=float, help="discount factor in [0, 1] (default 1)")
    t.add_argument(
        "--horizon",
        metavar="H",
        help="a priori maximum episode length (or 'logged') for the bounded intervals of is/pdis",
    )
    tail = t.add_mutually_exclusive_group()
    tail.add_argument(
        "--tail-value",
        type=float,
        metavar="X",
        help="value of the state each truncated episode was left in (0 states that the "
        "return within the logged steps is the target)",
    )
    tail.add_argument(
        "--tail-column",
        metavar="COLUMN",
        help="per-step column of tail values (the last step of each episode is read); "
        "'{policy}' in the name is replaced by the policy",
    )
    t.add_argument(
        "--q-column",
        metavar="COLUMN",
        help="dr/wdr/mis_dr/magic: the model's Q(s_t, a_t) per step, e.g. 'q_target__{policy}'",
    )
    t.add_argument(
        "--v-column",
        metavar="COLUMN",
        help="dr/wdr/mis_dr/magic: the model's V(s_t) under the candidate per step, e.g. "
        "'v_target__{policy}'",
    )
    t.add_argument(
        "--state-column",
        metavar="COLUMN",
        help="mis/mis_dr, and --distribution-estimator dr (its model conditions on the first "
        "state): each step's discrete state (default: the 'state' column)",
    )


def _add_paired_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--treated",
        action="extend",
        nargs="+",
        required=True,
        metavar="ARM",
        help="treated arm(s) (repeat the flag or list several)",
    )
    p.add_argument("--control", required=True, metavar="ARM", help="the control arm")
    p.add_argument("--by", metavar="COLUMN", help="one effect per value (e.g. item_id)")
    outcomes = p.add_mutually_exclusive_group()
    outcomes.add_argument(
        "--outcome",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="outcome column(s) (repeat for several; default: outcome)",
    )
    outcomes.add_argument(
        "--outcomes",
        choices=("all",),
        help="'all': every one of outcome, cost, tokens, latency_ms present",
    )
    p.add_argument("--ratio", action="store_true", help="also the ratio treated/control means")
    p.add_argument(
        "--ci",
        default="normal",
        metavar="METHOD",
        help="normal t hoeffding bernstein betting (default normal)",
    )
    p.add_argument(
        "--reward-range",
        nargs=2,
        type=float,
        metavar=("LO", "HI"),
        help="a priori range of every outcome (needed by the finite-sample methods)",
    )
    p.add_argument(
        "--correction",
        default="holm",
        metavar="METHOD",
        help="multiplicity correction: holm bh none (default holm)",
    )
    p.add_argument("--confidence-level", type=float, default=0.95, help=CONFIDENCE_LEVEL_HELP)


def _add_diagnose_options(p: argparse.ArgumentParser) -> None:
    _add_sensitivity(p)
    p.add_argument("--policies", metavar="FILE", help="long-format policy table")
    p.add_argument(
        "--policy", action="extend", nargs="+", metavar="NAME|NAME=KIND:ARGS", help=POLICY_HELP
    )
    p.add_argument(
        "--by",
        action="extend",
        nargs="+",
        metavar="COLUMN",
        help="segment columns (numeric: binned)",
    )
    p.add_argument("--max-weight", type=float, help="clip level for the outer/inner split")
    p.add_argument(
        "--reward-range", nargs=2, type=float, metavar=("LO", "HI"), help=REWARD_RANGE_HELP
    )
    p.add_argument("--confidence-level", type=float, default=0.95, help=CONFIDENCE_LEVEL_HELP)
    p.add_argument(
        "--target-width",
        type=float,
        help="interval width the exploration plan should reach (with --new-rows)",
    )
    p.add_argument(
        "--new-rows", type=int, help="volume of new logs the plan may assume (with --target-width)"
    )
    p.add_argument(
        "--weight-column",
        metavar="COLUMN",
        help="column of each row's sampling weight, 1 / P(row kept) (default: "
        "'weight' when the logs have it): the diagnostics are then "
        "Horvitz-Thompson weighted",
    )

    # ---------------------------------------------------------------------------------------------
    # flag values, checked before any work (the shared validators of ope._validation)
    # ---------------------------------------------------------------------------------------------
    _add_embedding_options(p)


def _checked(flag: str, check: Callable[[], Any]) -> Any:
    """``check()``, its ParameterError shown as a usage error of ``flag``."""
    try:
        return check()
    except ParameterError as exc:
        raise _UsageError(f"argument {flag}: {_cli_text(str(exc))}", flag=flag) from None


def _check_flags(args: argparse.Namespace) -> None:
    """Every flag value that can be checked without the data, before any is read."""

    def given(dest: str) -> bool:
        return getattr(args, dest, None) is not None

    _check_policy_specs(args)
    _check_format_flags(args)
    _check_path_names(args)
    _check_mapping_keys(args)
    if args.command == "learn":  # the policy's name, checked before the fit
        from ope._validation import check_name

        _checked(
            "--name",
            lambda: check_name(
                args.name, "name", example="--name learned", what="the policy's name in the table"
            ),
        )
    if given("seed") and args.seed < 0:
        raise _UsageError(
            f"argument --seed: must be a whole number >= 0; got {args.seed}.", flag="--seed"
        )
    _check_settings(
        args, _OTHER_SETTINGS if args.command in _PLANNED else (*_PLAN_SETTINGS, *_OTHER_SETTINGS)
    )
    if given("certify_fraction") and not (0.0 < args.certify_fraction < 1.0):
        raise _UsageError(
            "argument --certify-fraction: must be in (0, 1) (the share of rows "
            f"held out to certify the policy); got {args.certify_fraction!r}.",
            flag="--certify-fraction",
        )
    if given("target_width") != given("new_rows"):
        have, lack = (
            ("--target-width", "--new-rows")
            if given("target_width")
            else ("--new-rows", "--target-width")
        )
        raise _UsageError(
            f"argument {lack}: {have} needs {lack} too: the exploration plan "
            "says how much of N new rows to explore to reach width W (pass "
            "--target-width W --new-rows N, or neither).",
            flag=lack,
        )


#: Commands whose interval and estimator flags the evaluation plan checks
#: (:meth:`ope.evaluation.EvaluationPlan.build`) before any row is read; for the others
#: :func:`_check_settings` checks them.
_PLANNED: Final = ("evaluate", "report")


#: Flags the evaluation plan checks (the keywords of ``EvaluationPlan.build``).
_PLAN_SETTINGS: Final = (
    "confidence_level",
    "reward_range",
    "max_weight",
    "weight_bound",
    "n_resamples",
    "tau",
    "shrinkage",
)


#: The other setting flags, checked by :func:`_check_flags` for every command.
_OTHER_SETTINGS: Final = ("target_width", "new_rows", "chunk_lines", "workers")


def _check_settings(args: argparse.Namespace, dests: Sequence[str]) -> None:
    """The setting flags among ``dests``, before any row is read: evaluate and report on bandit
    logs leave :data:`_PLAN_SETTINGS` to their evaluation plan, evaluate on trajectory logs
    checks them here."""

    def given(dest: str) -> bool:
        return dest in dests and getattr(args, dest, None) is not None

    if not any(given(d) for d in dests):
        return
    for dest, flag in (
        ("max_weight", "--max-weight"),
        ("tau", "--tau"),
        ("shrinkage", "--shrinkage"),
    ):
        if given(dest) and isinstance(getattr(args, dest), str):
            raise _UsageError(
                f"argument {flag}: a tuning rule ({getattr(args, dest)}) chooses a setting per "
                "candidate of bandit logs; give a number here.",
                flag=flag,
            )
    from ope import _validation as v

    if given("confidence_level"):
        _checked("--confidence-level", lambda: v.check_confidence_level(args.confidence_level))
    if given("reward_range"):
        _checked("--reward-range", lambda: v.check_reward_range(tuple(args.reward_range)))
    if given("max_weight"):
        _checked("--max-weight", lambda: v.check_max_weight(args.max_weight))
    if given("weight_bound"):
        _checked("--weight-bound", lambda: v.check_weight_bound(args.weight_bound))
    for dest, flag in (
        ("n_resamples", "--n-resamples"),
        ("new_rows", "--new-rows"),
        ("chunk_lines", "--chunk-lines"),
        ("workers", "--workers"),
    ):
        if given(dest):
            _checked(flag, lambda: v.check_positive_int(getattr(args, dest), dest))
    for dest, flag, what in (
        ("tau", "--tau", "the switching threshold of switch_dr"),
        ("shrinkage", "--shrinkage", "the shrinkage of dros"),
        ("target_width", "--target-width", "an interval width"),
    ):
        value = getattr(args, dest) if given(dest) else None
        if value is not None and not (math.isfinite(value) and value > 0):
            raise _UsageError(
                f"argument {flag}: must be a positive finite number ({what}); got {value!r}.",
                flag=flag,
            )


#: Inputs and outputs named on the command line: (dest, how messages name it, is an output).
_PATH_ARGUMENTS: Final = (
    ("logs", "logs", False),
    ("src", "src", False),
    ("policies", "--policies", False),
    ("out", "--out", True),
    ("report", "--report", True),
)


def _check_path_names(args: argparse.Namespace) -> None:
    """File names that name no file: an empty input (it would read the current folder; an
    empty output is refused by :func:`ope._output.check_outputs`) and ``-``, which other tools
    read as standard input or output: ope reads and writes files only (``./-`` names a file
    called ``-``)."""
    for dest, name, output in _PATH_ARGUMENTS:
        value = getattr(args, dest, None)
        if value is None:
            continue
        flag = name if name.startswith("--") else None
        if not output and not value.strip():
            raise _UsageError(
                f"argument {name}: is empty ({value!r}); give a file, a folder or a URI.", flag=flag
            )
        if value.strip() == "-":
            stream, verb = ("output", "write to") if output else ("input", "read")
            raise _UsageError(
                f"argument {name}: '-' (standard {stream}) is not a file; ope "
                f"does not {verb} standard {stream}: give a file name (./- for "
                "a file named '-').",
                flag=flag,
            )


def _check_policy_specs(args: argparse.Namespace) -> None:
    """Split ``--policy`` into candidate names and specs (``NAME=KIND[:ARGS]``), each spec
    parsed before any row is read (a malformed one is a usage error naming the flag)."""
    values = list(getattr(args, "policy", None) or [])
    args._policy_names, args._policy_specs = [], []
    for value in values:
        if not value.strip() or not value.isprintable():
            what = "empty" if not value.strip() else "not printable (control characters)"
            raise _UsageError(
                f"argument --policy: {value!r} is {what}; give a candidate's NAME or a spec "
                "NAME=KIND[:ARGS] (e.g. u=uniform).",
                flag="--policy",
            )
    if not any("=" in v for v in values):
        args._policy_names = values
        return
    from ope.policies import is_policy_spec, parse_policy_spec

    seen: dict[str, str] = {}
    for value in values:
        if not is_policy_spec(value):
            args._policy_names.append(value)
            name = value
        else:
            spec = _checked("--policy", lambda: parse_policy_spec(value))
            if spec.kind == "classifier":
                try:
                    import skops.io  # noqa: F401
                except ImportError:
                    raise _UsageError(
                        f"argument --policy: {value!r}: a .skops classifier needs skops: pip "
                        "install 'ope-toolkit[skops]' (or pip install skops)",
                        flag="--policy",
                    ) from None
            args._policy_specs.append(spec)
            name = spec.name
        if name in seen:
            raise _UsageError(
                f"argument --policy: the name {name!r} is given twice ({seen[name]!r} and "
                f"{value!r}); give each candidate its own name.",
                flag="--policy",
            )
        seen[name] = value


def _mapping_names(command: str) -> tuple[list[str], list[str]]:
    """(ope's column names that ``--mapping OURS=THEIRS`` of ``command`` may name as OURS, the
    prefixes of its per-candidate families): the columns of the command's log schema and
    those read by their ope name (a logger's ``logging_policy``, a slot's ``position``, a
    step's ``state``). The library also takes other keys, to rename a pass-through column;
    on the command line every flag that names a column takes the data's own name, so such a
    key is only a typo that takes a column away (``--mapping bogus=reward``)."""
    if command == "paired":
        from ope.paired import PAIRED_OUTCOMES
        from ope.schema import PAIRED

        return list(dict.fromkeys([c.name for c in PAIRED.columns] + list(PAIRED_OUTCOMES))), []
    if command == "slates":
        from ope.slates import SLATE_COLUMNS

        return list(SLATE_COLUMNS), []
    from ope.loggers import LOGGER_COLUMN, LOGGER_PROPENSITY_PREFIX
    from ope.schema import BANDIT, TRAJECTORY

    names = [c.name for schema in (BANDIT, TRAJECTORY) for c in schema.columns]
    names += [LOGGER_COLUMN, "position", "state"]
    prefixes = [prefix for prefix, _ in BANDIT.prefixed] + [LOGGER_PROPENSITY_PREFIX]
    return list(dict.fromkeys(names)), prefixes


def _check_mapping_keys(args: argparse.Namespace) -> None:
    """``--mapping``, before any row is read: each OURS=THEIRS well formed
    (:func:`_parse_mapping`) and OURS one of ope's names (:func:`_mapping_names`)."""
    mapping = _parse_mapping(getattr(args, "mapping", None))
    if not mapping:
        return
    names, prefixes = _mapping_names(args.command)
    unknown = [
        f"{ours!r} (of {ours}={theirs})"
        for ours, theirs in mapping.items()
        if ours not in names
        and not any(ours.startswith(p) and len(ours) > len(p) for p in prefixes)
    ]
    if unknown:
        known = ", ".join(names + [f"{p}<name>" for p in prefixes])
        raise _UsageError(
            f"argument --mapping: {', '.join(unknown)} {'are' if len(unknown) > 1 else 'is'} "
            "not one of ope's column names (OURS=THEIRS renames your column THEIRS to ope's "
            f"OURS); ope's names: {known}.",
            flag="--mapping",
        )


def _parse_mapping(items: Sequence[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    mapping: dict[str, str] = {}
    for item in items:
        ours, sep, theirs = item.partition("=")
        if not sep or not ours or not theirs:
            raise _UsageError(
                f"argument --mapping: expects OUR_NAME=THEIR_NAME (e.g. propensity=pscore), "
                f"got {item!r}",
                flag="--mapping",
            )
        if ours in mapping and mapping[ours] != theirs:
            raise _UsageError(
                f"argument --mapping: {ours} is mapped twice ({mapping[ours]!r} and {theirs!r})",
                flag="--mapping",
            )
        mapping[ours] = theirs
    return mapping


# ---------------------------------------------------------------------------------------------
# outputs: checked before the work (ope._output)
# ---------------------------------------------------------------------------------------------
def _import_side_file(out: Path) -> Path:
    """``<out stem>.actions.parquet``: where earlier versions of ``ope import obd`` wrote the
    action features (now embedded in ``--out`` itself)."""
    stem = out.name[: -len(".parquet")] if out.name.endswith(".parquet") else out.name
    return out.with_name(stem + ".actions.parquet")


def _is_import_side_table(path: Path) -> bool:
    """Whether ``path`` is a regular parquet file holding an OBD item table as earlier imports
    wrote it beside their logs: an ``action`` column and only ``item_feature_*`` others."""
    import pyarrow.parquet as pq

    try:
        if path.is_symlink() or not path.is_file():
            return False
        names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001 - not parquet, unreadable: not ours to remove
        return False
    return "action" in names and all(c == "action" or c.startswith("item_feature_") for c in names)


def _outputs_of(
    args: argparse.Namespace,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], Sequence[str] | None]:
    """(the files the command will write, the inputs it reads, the accepted suffixes)."""
    inputs = [
        (label, getattr(args, dest))
        for dest, label in (("logs", "LOGS"), ("src", "SRC"), ("policies", "--policies"))
        if getattr(args, dest, None)
    ]
    inputs += [("--policy", spec.path) for spec in getattr(args, "_policy_specs", ()) if spec.path]
    inputs += [
        (flag, getattr(args, dest))
        for dest, flag in (("truth", "--truth"), ("items", "--items"))
        if getattr(args, dest, None)
    ]
    if getattr(args, "format", None) == "obd":  # a campaign's item table, beside its log CSV
        inputs += [
            ("item_context.csv", str(Path(raw).parent / "item_context.csv"))
            for label, raw in list(inputs)
            if label in ("LOGS", "SRC") and Path(raw).suffix.lower() == ".csv"
        ]
    if args.command == "learn" and args.out is not None:
        return [("--out", args.out)], inputs, POLICY_TABLE_SUFFIXES
    if args.command == "report":
        return [("--out", args.out)], inputs, REPORT_SUFFIXES
    if args.command == "action-table":
        return [("--out", args.out)], inputs, ACTION_TABLE_SUFFIXES
    if args.command == "evaluate" and args.report is not None:
        return [("--report", args.report)], inputs, REPORT_SUFFIXES
    if args.command == "demo":
        return [("--out", args.out)], inputs, REPORT_SUFFIXES
    if args.command == "monitor" and args.report is not None:
        return [("--report", args.report)], inputs, REPORT_SUFFIXES
    if args.command == "slates":
        inputs += [("--scores", spec.partition("=")[2]) for spec in args.scores or ()]
    if args.command in ("sequences", "continuous", "slates") and args.report is not None:
        return [("--report", args.report)], inputs, REPORT_SUFFIXES
    if args.command == "import":  # OBD's item features are embedded in --out itself
        return [("--out", args.out)], inputs, IMPORT_SUFFIXES
    return [], inputs, None


def _is_ope_report(path: Path) -> bool:
    """Whether ``path`` is a regular file that ``ope.report`` wrote (its doctype, then the
    generator marker in the head)."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as handle:
            head = handle.read(1024)
    except OSError:
        return False
    return head.startswith(b"<!DOCTYPE html>") and REPORT_MARKER in head


def _report_provenance(args: argparse.Namespace, logs: Any) -> dict[str, Any]:
    """What the report's "Reproduce" section lists: the command, its options, seed, input."""
    return {
        "command": ["ope", *getattr(args, "_argv", [])],
        "options": _options(args),
        "seed": getattr(args, "seed", None),
        "input": args.logs,
        "rows": logs.report.rows_read,
    }


def _read_truth(args: argparse.Namespace) -> Any:
    """The ``--truth`` file read and checked as a document (None without the flag): a usage
    error naming the flag when it cannot be read, is not JSON, or is not the truth of
    :class:`ope.report.views.Truth` with finite values. Read once per run."""
    if getattr(args, "_truth", None) is not None or getattr(args, "truth", None) is None:
        return getattr(args, "_truth", None)
    from ope.report.views import Truth

    path = args.truth
    from ope._paths import check_regular_file

    try:
        check_regular_file(path, "argument --truth:")  # never a FIFO or device: it would block
    except DataFileError as exc:
        raise _UsageError(str(exc), flag="--truth") from None
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, UnicodeDecodeError) as exc:
        raise _UsageError(
            f"argument --truth: cannot read {path!r}: {getattr(exc, 'strerror', None) or exc}.",
            flag="--truth",
        ) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise _UsageError(
            f"argument --truth: {path!r} is not JSON ({reason}); give an object "
            '{"policy": value, ...}.',
            flag="--truth",
        ) from None
    try:
        truth = Truth.of(document)
    except ParameterError as exc:
        raise _UsageError(f"argument --truth: {path!r}: {exc}", flag="--truth") from None
    values = [
        ("logging", truth.logging),
        *truth.policies.items(),
        *((f"{p}[{s}]", v) for p, seg in truth.by_segment.items() for s, v in seg.items()),
    ]
    bad = [name for name, value in values if value is not None and not math.isfinite(value)]
    if bad:
        raise _UsageError(
            f"argument --truth: {path!r}: the true value of {', '.join(bad)} is "
            "not a finite number; give each value as a finite number.",
            flag="--truth",
        )
    args._truth = truth
    return truth


def _write_report(
    args: argparse.Namespace,
    path: str,
    logs: Any,
    evaluation: Any,
    diagnostics: Any,
    title: str | None = None,
    distribution: Any = None,
    guardrails: Any = None,
) -> str:
    """Write the HTML report (destination already checked by :func:`_check_outputs`), with
    the known truth of ``--truth`` when given (its names checked against the candidates)."""
    from ope.report import write_report

    truth = _read_truth(args)
    if truth is not None:
        candidates = set(evaluation.policies if evaluation is not None else diagnostics.policies)
        unknown = sorted((set(truth.policies) | set(truth.by_segment)) - candidates - {"logging"})
        if unknown:
            raise _UsageError(
                f"argument --truth: {args.truth!r} names {', '.join(map(repr, unknown))}, not "
                f"among the candidates ({', '.join(sorted(candidates))}); give true values of "
                "the evaluated candidates only (and 'logging').",
                flag="--truth",
            )
    return str(
        write_report(
            path,
            evaluation=evaluation,
            diagnostics=diagnostics,
            title=title,
            truth=truth,
            distribution=distribution,
            guardrails=guardrails,
            provenance=_report_provenance(args, logs),
            overwrite=args.force,
            max_candidates=getattr(args, "max_candidates", MAX_FIGURE_CANDIDATES),
            max_segments=getattr(args, "max_segments", MAX_REPORT_SEGMENTS),
        )
    )


def _check_outputs(args: argparse.Namespace) -> list[Path]:
    from ope._output import check_outputs

    outputs, inputs, suffixes = _outputs_of(args)
    if not outputs:
        return []
    force = getattr(args, "force", False)
    if args.command == "monitor" and not force and args.report is not None:
        force = _is_ope_report(Path(args.report))  # its own page, rewritten after each look
    if args.command == "demo" and not force:  # `make demo` reruns it: its own report is replaced
        force = _is_ope_report(Path(args.out))
        if not force and os.path.lexists(args.out):
            raise _UsageError(
                f"argument --out: {args.out!r} exists and is not a report ope wrote; move the "
                "file, give the demo another --out, or pass --force to overwrite it.",
                flag="--out",
            )
    try:
        return check_outputs(outputs, inputs=inputs, force=force, suffixes=suffixes)
    except ParameterError as exc:
        message = str(exc)
        match = re.match(r"argument (\S+): ", message)
        raise _UsageError(message, flag=match.group(1) if match else None) from None


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------
def _policies_from_args(args: argparse.Namespace, logs: Any) -> Any:
    """The candidates of ``--policies`` and ``--policy`` (names and specs), built once per run
    (evaluate and diagnose share them)."""
    cached = getattr(args, "_candidates", None)
    if cached is not None:
        return cached[0]
    names = getattr(args, "_policy_names", None)
    if names is None:
        names = list(getattr(args, "policy", None) or [])
    specs = getattr(args, "_policy_specs", None) or []
    if specs:
        from ope.policies import candidates_with_specs

        policies: Any = candidates_with_specs(
            logs,
            specs,
            names=names,
            table=getattr(args, "policies", None),
            labels=[f"--policy {spec.text}" for spec in specs],
        )
    elif getattr(args, "policies", None):
        from ope.policies import read_policy_table

        policies = read_policy_table(args.policies)
        if names:  # --policy NAME selects policies of the table
            import pyarrow as pa
            import pyarrow.compute as pc

            held = sorted(set(pc.unique(policies.column("policy")).cast(pa.string()).to_pylist()))
            unknown = [n for n in names if n not in held]
            if unknown:
                raise PolicyError(
                    f"argument --policy: unknown policies {unknown}: the policy "
                    f"table {args.policies} holds {', '.join(held)}."
                )
            keep = pc.is_in(policies.column("policy").cast(pa.string()), value_set=pa.array(names))
            policies = policies.filter(keep).replace_schema_metadata(policies.schema.metadata)
    else:
        policies = names or None
    args._candidates = (policies,)
    return policies


def _read(args: argparse.Namespace, reader: Any = None) -> Any:
    """Read and validate the logs (with ``reader``, default ``ope.io.read_logs`` or the
    importer of ``--format``); a ValidationError propagates with its report."""
    mapping = _parse_mapping(args.mapping)
    if reader is None:
        reader = _format_reader(args)
    if reader is None:
        from ope.io import read_logs

        reader = read_logs
    return reader(args.logs, mapping=mapping, on_invalid=args.on_invalid)


def _format_reader(args: argparse.Namespace) -> Any:
    """The importer of ``--format obd|dsjson`` as a reader (None for parquet)."""
    fmt = getattr(args, "format", "parquet")
    if fmt == "parquet":
        return None
    if args.mapping:
        raise _UsageError(
            f"argument --mapping: does not apply to --format {fmt}: its field names are fixed",
            flag="--mapping",
        )
    from ope.importers import read_dsjson, read_obd

    if fmt == "obd":
        return lambda src, *, mapping, on_invalid: read_obd(
            src, context=args.obd_context or "user", on_invalid=on_invalid
        )
    return lambda src, *, mapping, on_invalid: read_dsjson(
        src, on_invalid=on_invalid, **_chunk_option(args)
    )


def _check_format_flags(args: argparse.Namespace) -> None:
    """The importers' flags apply to their format only: ``--obd-context`` to OBD sources,
    ``--chunk-lines`` and ``--workers`` to DSJSON; given with another format, a usage error
    (they would be ignored)."""
    fmt = getattr(args, "format", None)
    if fmt is None:
        return
    for dest, flag, applies in (
        ("obd_context", "--obd-context", "obd"),
        ("chunk_lines", "--chunk-lines", "dsjson"),
        ("workers", "--workers", "dsjson"),
    ):
        if fmt != applies and getattr(args, dest, None) is not None:
            what = (
                ("an OBD campaign" if applies == "obd" else "a DSJSON file")
                if args.command == "import"
                else f"--format {applies}"
            )
            raise _UsageError(
                f"argument {flag}: applies only to {what}; it does not "
                f"apply to {fmt} (drop the flag)",
                flag=flag,
            )


def _chunk_option(args: argparse.Namespace) -> dict[str, Any]:
    return {
        k: getattr(args, k)
        for k in ("chunk_lines", "workers")
        if getattr(args, k, None) is not None
    }


def _require_columns(logs: Any, args: argparse.Namespace, *dests: str) -> None:
    """Columns named by ``--by``/``--context-columns`` must be in the logs (a data problem:
    SchemaError, exit 65), checked before the estimation starts."""
    have = set(logs.columns)
    problems = []
    for dest in dests:
        names = getattr(args, dest, None) or []
        missing = [c for c in names if c not in have]
        if missing:
            flag = "--" + dest.replace("_", "-")
            problems.append(f"{flag} {' '.join(missing)}: not in the logs")
    if problems:
        raise SchemaError(f"{'; '.join(problems)}. The logs have: {', '.join(logs.columns)}.")


def _source_schema(args: argparse.Namespace) -> tuple[set[str], int | None]:
    """The column names (after --mapping) and row count of a parquet source, from its metadata
    (no row is read). A source that cannot be opened so is read now, so that the reader's
    error (a missing or damaged file) comes before any advice about the flags that depends on
    what the logs hold; (empty, None) if the reader reads it."""
    if getattr(args, "format", "parquet") != "parquet":
        return set(), None
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset(args.logs, format="parquet")
        names = set(dataset.schema.names)
        rows = dataset.count_rows()
    except Exception:  # noqa: BLE001 - unreadable: the reader reports it with its own message
        _read(args)
        return set(), None
    mapping = _parse_mapping(args.mapping) or {}
    return names | {k for k, v in mapping.items() if v in names}, rows


# ---------------------------------------------------------------------------------------------
# the run: one outcome per command, rendered as text or as one JSON document
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Outcome:
    """What a command produced: its JSON document (without the envelope) and its text."""

    document: dict[str, Any]
    text: str
    code: int = EXIT_OK
    #: the outcome distribution of ``--metric`` (for the report), or None
    distribution: Any = None
    #: the guardrail decision of ``--guardrail`` (for the report), or None
    guardrails: Any = None


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """Every parsed flag and argument, defaults filled in, JSON-ready (the record of the run)."""
    return {
        k: (list(v) if isinstance(v, tuple) else v)
        for k, v in vars(args).items()
        if k != "command" and not k.startswith("_")
    }


def _envelope(args: argparse.Namespace | None, command: str | None, code: int) -> dict[str, Any]:
    """The head of every --json document: status, ope's version, command, options, seed."""
    from ope import __version__

    return {
        "ok": code == EXIT_OK,
        "exit_code": code,
        "ope_version": __version__,
        "command": command,
        "options": None if args is None else _options(args),
        "seed": None if args is None else getattr(args, "seed", None),
    }


def _jsonable(value: Any) -> Any:
    """Make numpy scalars, NaN and infinities JSON-safe (NaN/inf become null)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(_jsonable(document), indent=2, allow_nan=False) + "\n"


def _seed_line(args: argparse.Namespace) -> str:
    return f"seed: {args.seed} (--seed N to change; the same seed gives the same numbers)"


_WHERE = re.compile(r"^((?:policy '[^']*')|\w+(?: \(policy '[^']*'\))?): (.*)$", re.DOTALL)


def _squashed(text: str) -> str:
    """``text`` with every run of white space one space (wrapped text compares equal)."""
    return " ".join(text.split())


@dataclasses.dataclass
class _Warnings:
    """The warnings of a run: shown once each on stderr (grouped by text, naming every
    estimate it concerns), skipped when the text output already states them."""

    caught: list[warnings.WarningMessage] = dataclasses.field(default_factory=list)

    def lines(self, stated: str = "") -> list[str]:
        stated = _squashed(stated)
        grouped: dict[tuple[str, str], list[str]] = {}
        for w in self.caught:
            if not issubclass(w.category, (OPEWarning, UserWarning, RuntimeWarning)):
                continue  # deprecations and the like: Python's default filters hide them too
            message = str(w.message)
            match = _WHERE.match(message)
            where, text = match.groups() if match else ("", message)
            if stated and (_squashed(text) in stated or _squashed(_cli_phrases(text)) in stated):
                continue  # the text output states it (in the API's or the CLI's spelling)
            grouped.setdefault((w.category.__name__, text), []).append(where)
        out = []
        for (category, text), places in grouped.items():
            named = list(dict.fromkeys(p for p in places if p))
            # a policy's bare name (the diagnostics' "name: ...") beside "policy 'name'" (the
            # estimates') is the same place
            where = ", ".join(p for p in named if f"policy {p!r}" not in named)
            out.append(
                _shown(f"warning ({category}): {where + ': ' if where else ''}{_cli_text(text)}")
            )
        return out

    def messages(self) -> list[dict[str, str]]:
        """Each distinct warning once, for the JSON document (in the order raised)."""
        seen = dict.fromkeys(
            (w.category.__name__, str(w.message))
            for w in self.caught
            if issubclass(w.category, (OPEWarning, UserWarning, RuntimeWarning))
        )
        return [{"category": c, "message": m} for c, m in seen]


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (for the error document of a failed parse)."""
    commands = set(_COMMANDS)
    for token in argv:
        if token == "--":
            return None
        if token in commands:
            return token
    return None


def _wants_json(argv: Sequence[str]) -> bool:
    for token in argv:
        if token == "--":
            return False
        if token == "--json":
            return True
    return False


def _failure(
    args: argparse.Namespace | None,
    command: str | None,
    code: int,
    kind: str,
    message: str,
    *,
    flag: str | None = None,
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str]:
    """The error document and the stderr line of a failed run."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if flag:
        error["flag"] = flag
    document = {**_envelope(args, command, code), "error": error, **(extra or {})}
    head = f"ope {command}" if command else "ope"
    text = _one_line(message)
    if kind == "usage":
        line = f"{head}: error: {text}"
    else:
        unexpected = "unexpected " if (extra or {}).get("unexpected") else ""
        line = f"{head}: {unexpected}{kind}: {text}"
    return document, _shown(line)  # the JSON message stays exact


def _one_line(message: str) -> str:
    """``message`` on one line: one error is one line on stderr (the JSON document keeps the
    message as raised). A list's bullets (``- ``) are dropped; each line break becomes ``"; "``
    unless the line ends a sentence or a clause already (``.:;,``), then a space."""
    parts = [re.sub(r"^[-*] ", "", p.strip()) for p in message.splitlines() if p.strip()]
    if not parts:
        return message.strip()
    out = parts[0]
    for part in parts[1:]:
        out += (" " if out[-1] in ".:;," else "; ") + part
    return out


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like SIGINT's ``KeyboardInterrupt`` so that every
    ``finally`` (temporary files, worker pools) runs and the run ends with its document."""


@contextlib.contextmanager
def _signals_as_interrupts() -> Any:
    """While the command runs, SIGINT raises ``KeyboardInterrupt`` and SIGTERM
    :class:`_Terminated` in this process, and both are recorded
    (:func:`ope._output.request_stop`: no output is published after one, even if the exception
    was lost). A signal the parent set to be ignored (``nohup``) stays ignored; forked workers
    keep the default action; the previous handlers are restored after."""
    import signal
    import threading

    from ope._output import clear_stop, request_stop

    clear_stop()
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    pid = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != pid:  # a forked worker: die as the signal says
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        request_stop(signum)
        raise _Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    previous = {}
    for signum, default in (
        (signal.SIGINT, signal.default_int_handler),
        (signal.SIGTERM, signal.SIG_DFL),
    ):
        if signal.getsignal(signum) is default:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        clear_stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ope`` command line; returns the exit code.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``ope`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 ok, 1 runtime failure, 2 usage error (the flag named), 65 invalid data, 73 an
        output cannot be written, 130 interrupted (SIGINT), 143 terminated (SIGTERM).

    Examples
    --------
    >>> import json, os, tempfile, contextlib, io
    >>> import pandas as pd
    >>> from ope.cli import main
    >>> path = os.path.join(tempfile.mkdtemp(), "replays.parquet")
    >>> pd.DataFrame({"pair_id": [0, 0, 1, 1, 2, 2], "arm": ["mem", "none"] * 3,
    ...               "outcome": [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]}).to_parquet(path)
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     code = main(["paired", path, "--treated", "mem", "--control", "none", "--json"])
    >>> code, round(json.loads(out.getvalue())["rows"][0]["value"], 4)
    (0, 0.6667)
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
    ...     code = main(["paired", path, "--treated", "memory", "--control", "none"])
    >>> code, "argument --treated: arm 'memory' is not in the replays" in err.getvalue()
    (2, True)
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout
    as_json = _wants_json(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args._argv = list(argv)  # the report's provenance: the command as typed
    except _UsageError as exc:  # argparse's usage errors (bad flags, missing arguments)
        document, line = _failure(
            None, _command_of(argv), EXIT_USAGE, "usage", str(exc), flag=exc.flag
        )
        (exc.parser or parser).print_usage(sys.stderr)
        print(line, file=sys.stderr)
        if as_json:
            stdout.write(_dump(document))
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version print and exit 0
        return int(exc.code or 0)
    from ope._progress import quiet

    caught = _Warnings()
    with contextlib.ExitStack() as stack:
        if getattr(args, "quiet", False):
            stack.enter_context(quiet())
        if args.json:  # whatever a library prints must not corrupt the one document
            stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        caught.caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        stack.enter_context(_signals_as_interrupts())
        document, text, code, failure = _run(args)
        from ope._output import stop_requested

        stopped = stop_requested()
    if stopped is not None and code not in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        # the signal's exception was lost (raised inside a __del__): the run is still stopped
        code, kind, message, _ = _interrupted(stopped)
        document, line = _failure(args, args.command, code, kind, message)
        text, failure = "", line + "\n"
    if args.json:
        if caught.caught:
            document.setdefault("warnings", caught.messages())
        out = _dump(document)
    else:
        out = text + "\n" if text else ""
    # warnings once each on stderr; in text mode not those the output already states
    shown = caught.lines(stated="" if args.json else out)
    sys.stderr.write("".join(f"{line}\n" for line in shown) + failure)
    try:
        stdout.write(out)
        stdout.flush()
    except BrokenPipeError:  # `ope ... | head`: the reader left; not an error of ope's
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
    return code


def run() -> NoReturn:
    """The ``ope`` console script and ``python -m ope``: :func:`main` on ``sys.argv``, then the
    process ends with its exit code.

    The process ends as soon as the command is done: its output is flushed and the exit
    handlers (:mod:`atexit`) run, then it exits without the interpreter's teardown of its
    modules, which takes 0.3–0.5 s once the compiled kernel is loaded (longer than a small
    command). Every file the command writes is closed before :func:`main` returns; worker
    threads are idle by then. To run a command inside a Python program, call :func:`main`.
    """
    import atexit

    code = main()
    _flush_standard_streams()
    atexit._run_exitfuncs()
    _flush_standard_streams()
    os._exit(code)


def _flush_standard_streams() -> None:
    """Flush stdout and stderr; a reader that left (``ope ... | head``) or a closed stream is
    not an error of ope's."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # BrokenPipeError is an OSError; ValueError: closed
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def _interrupted(signal_or_class: Any) -> tuple[int, str, str, None]:
    """(code, kind, message, flag) of a run stopped by SIGTERM (``_Terminated`` or its
    number) or by anything else (SIGINT, Ctrl-C)."""
    import signal

    if signal_or_class is _Terminated or signal_or_class == signal.SIGTERM:
        return EXIT_TERMINATED, "Terminated", "terminated (SIGTERM)", None
    return EXIT_INTERRUPTED, "KeyboardInterrupt", "interrupted", None


def _run(args: argparse.Namespace) -> tuple[dict[str, Any], str, int, str]:
    """Run the command: (the whole JSON document, the stdout text, the exit code, what to say
    on stderr about a failure: printed after the run's warnings, so it is the last line)."""
    command = args.command
    _COMMAND.set(command)
    _TYPED.set(None)
    extra: dict[str, Any] = {}
    report_text = usage = ""
    try:
        _check_flags(args)
        _check_outputs(args)
        outcome = _COMMANDS[command](args)
        return (
            {**_envelope(args, command, outcome.code), **outcome.document},
            _shown(outcome.text),
            outcome.code,
            "",
        )
    except (_UsageError, ParameterError, MissingBoundsError) as exc:
        # a missing a priori bound is a missing flag (--reward-range, --weight-bound): usage
        raw = str(exc)
        flag = (
            exc.flag
            if isinstance(exc, _UsageError)
            else _bound_flag(raw)
            if isinstance(exc, MissingBoundsError)
            else _flag_named(raw)
        )
        message = _cli_text(raw)
        if flag and not message.startswith("argument "):
            message = f"argument {flag}: {message}"
        code, kind = EXIT_USAGE, "usage"
        usage = getattr(args, "_parser").format_usage()
    except ValidationError as exc:
        code, kind, message, flag = EXIT_DATAERR, type(exc).__name__, _cli_text(str(exc)), None
        if exc.report is not None:  # the report is the output: on stdout, its gist on stderr
            extra = {"valid": False, "report": exc.report.to_dict()}
            report_text = _shown(message)
            document, _ = _failure(args, command, code, kind, message, extra=extra)
            first = report_text.splitlines()[0].rstrip(":")
            return (
                document,
                report_text,
                code,
                f"ope {command}: {kind}: {first} (the report is on stdout)\n",
            )
    except OutputError as exc:  # before DataFileError: both are OSErrors
        code, kind, message = EXIT_CANTCREAT, type(exc).__name__, _cli_text(str(exc))
        flag = _flag_named(str(exc))
    except (SchemaError, DataFileError, PolicyError) as exc:
        code, kind, message = EXIT_DATAERR, type(exc).__name__, _cli_text(str(exc))
        flag = _flag_named(str(exc))
    except OPEError as exc:
        code, kind, message, flag = EXIT_FAILURE, type(exc).__name__, _cli_text(str(exc)), None
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM (ope._output refuses to publish)
        from ope._output import stop_requested

        code, kind, message, flag = _interrupted(
            _Terminated if isinstance(exc, _Terminated) else stop_requested()
        )
    except Exception as exc:  # noqa: BLE001 - the CLI reports every failure as exit code 1
        code, kind, message, flag = EXIT_FAILURE, type(exc).__name__, str(exc), None
        extra = {"unexpected": True}
    document, line = _failure(args, command, code, kind, message, flag=flag, extra=extra)
    return document, report_text, code, usage + line + "\n"


# ---------------------------------------------------------------------------------------------
# validate, diagnose
# ---------------------------------------------------------------------------------------------
def _cmd_validate(args: argparse.Namespace) -> _Outcome:
    from ope._format import format_list, wrap_text
    from ope._provenance import propensity_info, propensity_notes

    from ope.weights import check_sampling_weight, sampling_weight_column

    logs = _read(args)
    report = logs.report
    weight = sampling_weight_column(logs.columns, None)
    if weight is not None:  # the rows' sampling weights, as every estimate will check them
        check_sampling_weight(logs.column(weight), logs.n, name=weight)
    document = {
        "valid": report.ok,
        "report": report.to_dict(),
        "columns": logs.columns,
        "target_policies": logs.target_policies,
        "propensity": propensity_info(logs),  # where the propensities come from
    }
    lines = [str(report)]  # the report lists the columns itself (wrapped, by family past 30)
    if logs.target_policies:
        lines += format_list(
            logs.target_policies,
            subsequent="    ",
            initial="  candidate policies (target__ columns): ",
        )
    for note in propensity_notes(logs, weight, None if weight is None else logs.column(weight)):
        lines += wrap_text(note, initial="  note: ", subsequent="    ")
    return _Outcome(document, "\n".join(lines))


def _diagnose_from_args(
    args: argparse.Namespace, logs: Any, plan: Any = None, statistics: Any = None
) -> Any:
    """The diagnostics of ``ope diagnose``, and of ``ope evaluate`` and ``ope report`` under
    their evaluation ``plan`` (its candidates, clip level, reward range, level, segments and
    sampling weights: :meth:`ope.evaluation.EvaluationPlan.diagnose`)."""
    from ope.diagnostics import diagnose

    policies = _policies_from_args(args, logs)
    names = getattr(args, "_policy_names", None) or []
    lacking = [
        f"target_dist__{n}"
        for n in names
        if not args.policies and f"target_dist__{n}" not in logs.columns
    ]
    if getattr(args, "_policy_specs", None) and lacking and "logging_distribution" in logs.columns:
        # the support check needs every candidate's full distribution: the target__ columns
        # named beside a spec have none, so the check is left out (as diagnose does for them)
        from ope.exceptions import OPEWarning
        from ope.logs import BanditLogs

        warnings.warn(
            "support deficiency not computed: the logs have a logging_distribution but not "
            f"{', '.join(lacking)} (each candidate's distribution over the candidates)",
            OPEWarning,
            stacklevel=2,
        )
        logs = BanditLogs(
            logs.table.drop_columns(["logging_distribution"]),
            logs.report,
            dropped_event_ids=logs.dropped_event_ids,
            unit_roundoff=logs.unit_roundoff,
        )
    if plan is not None:
        return plan.with_policies(policies).diagnose(
            logs,
            target_width=getattr(args, "target_width", None),
            new_rows=getattr(args, "new_rows", None),
            statistics=statistics,
            sensitivity=_sensitivity_setting(args),
        )
    return diagnose(
        logs,
        policies,
        by=args.by,
        max_weight=args.max_weight,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        confidence_level=args.confidence_level,
        target_width=getattr(args, "target_width", None),
        new_rows=getattr(args, "new_rows", None),
        weight_column=getattr(args, "weight_column", None),
        embedding=_embedding(args),
        sensitivity=_sensitivity_setting(args),
    )


def _cmd_diagnose(args: argparse.Namespace) -> _Outcome:
    logs = _read(args)
    _require_columns(logs, args, "by")
    d = _diagnose_from_args(args, logs)
    return _Outcome(
        {"validation": logs.report.to_dict(), "diagnostics": d.to_dict()},
        _joined(str(logs.report), _cli_summary(d.summary()), _seed_line(args)),
    )


# ---------------------------------------------------------------------------------------------
# evaluate (bandit logs)
# ---------------------------------------------------------------------------------------------
def _setting_value(text: str) -> float | str:
    """A ``--max-weight``/``--tau``/``--shrinkage`` value: a number, or the name of a tuning
    rule (:data:`TUNING_RULES`: the setting is then chosen per candidate on the rows)."""
    if text.strip().lower() in TUNING_RULES:
        return text.strip().lower()
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number or a tuning rule ({', '.join(TUNING_RULES)}), got {text!r}"
        ) from None


def _tuned_flags(args: argparse.Namespace) -> list[str]:
    """The setting flags given as a tuning rule's name (``--max-weight slope``)."""
    return [
        flag
        for dest, flag in (
            ("max_weight", "--max-weight"),
            ("tau", "--tau"),
            ("shrinkage", "--shrinkage"),
        )
        if isinstance(getattr(args, dest, None), str)
    ] + (["--select-embedding"] if getattr(args, "select_embedding", None) else [])


def _plan(args: argparse.Namespace) -> Any:
    """The evaluation plan of the flags (:meth:`ope.evaluation.EvaluationPlan.build`): every
    setting is checked there, once, before any row is read, and a bad value's ParameterError
    names its flag (:func:`_run`). An estimator ``--ci`` does not apply to gets the
    :data:`FALLBACK_CI` interval and a note (the library's ``ci_fallback``), not a failed run.
    The candidates are added when the rows are read (``--policy`` specs need them)."""
    from ope.evaluation import EvaluationPlan

    options = _plan_options(args)
    # a setting tuned on the rows (a rule's name) is checked here as any value of its range
    for key in ("max_weight", "tau", "shrinkage"):
        if isinstance(options.get(key), str):
            options[key] = 1.0
    if getattr(options.get("embedding"), "select", None):  # its dimensions: on the rows
        options["embedding"] = options["embedding"].without_selection()
    return EvaluationPlan.build(**options)


def _plan_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :meth:`EvaluationPlan.build` (those of ``ope.evaluate``) the
    flags give; ``--estimator auto`` is checked here and resolved on the rows."""
    estimators = list(args.estimator) if args.estimator else list(DEFAULT_BANDIT_ESTIMATORS)
    if _auto_estimator(args):
        from ope.evaluation.tuning import SETTING_ESTIMATOR

        # the settings are checked now (with the estimators they belong to); the rows choose
        estimators = ["ips", "snips"] + [
            est for key, est in SETTING_ESTIMATOR.items() if getattr(args, key, None) is not None
        ]
    return dict(
        estimators=estimators,
        ci=args.ci,
        confidence_level=args.confidence_level,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        max_weight=args.max_weight,
        weight_bound=args.weight_bound,
        tau=args.tau,
        shrinkage=args.shrinkage,
        context_columns=getattr(args, "context_columns", None),
        n_resamples=args.n_resamples,
        rng=args.seed,
        by=getattr(args, "by", None),
        ci_fallback=None if args.ci == FALLBACK_CI else FALLBACK_CI,
        weight_column=getattr(args, "weight_column", None),
        embedding=_embedding(args),
    )


def _embedding(args: argparse.Namespace) -> Any:
    """The :class:`ope.ActionEmbedding` of ``--cluster-column``/``--embedding-columns``
    (with ``--items``), or None."""
    clusters = getattr(args, "cluster_column", None)
    columns = getattr(args, "embedding_columns", None)
    estimated = getattr(args, "estimated_embedding", None)
    items_path = getattr(args, "items", None)
    if estimated:
        if clusters is not None or columns or items_path is not None:
            raise _UsageError(
                "argument --estimated-embedding: the embedding is the logs' observed columns; "
                "drop --cluster-column, --embedding-columns and --items",
                flag="--estimated-embedding",
            )
        from ope.marginal import ActionEmbedding

        return ActionEmbedding(
            estimated=tuple(estimated), rng=getattr(args, "seed", None) or 0, **_selection(args)
        )
    if clusters is None and not columns:
        if items_path is not None:
            raise _UsageError(
                "argument --items: the item table is read for --cluster-column or "
                "--embedding-columns; give one of them (or drop --items)",
                flag="--items",
            )
        if getattr(args, "select_embedding", None):
            raise _UsageError(
                "argument --select-embedding: it chooses among the dimensions of "
                "--embedding-columns or --estimated-embedding; give one of them",
                flag="--select-embedding",
            )
        return None
    if clusters is not None and columns:
        raise _UsageError(
            "arguments --cluster-column and --embedding-columns: give one of them (a cluster "
            "column is one embedding column)",
            flag="--cluster-column",
        )
    from ope.io import read_item_table
    from ope.marginal import ActionEmbedding

    if clusters is not None and getattr(args, "select_embedding", None):
        raise _UsageError(
            "argument --select-embedding: a cluster column is one dimension; give the "
            "embedding as --embedding-columns or --estimated-embedding",
            flag="--select-embedding",
        )
    items = None if items_path is None else read_item_table(items_path)
    return ActionEmbedding(
        clusters=clusters, columns=tuple(columns or ()), items=items, **_selection(args)
    )


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    """``select``/``search``/``min_dims`` of the embedding (``--select-embedding``,
    ``--embedding-search``, ``--min-embedding-dims``)."""
    select = getattr(args, "select_embedding", None)
    search = getattr(args, "embedding_search", None)
    dims = getattr(args, "min_embedding_dims", 1)
    if not select:
        for flag, given in (
            ("--embedding-search", search is not None),
            ("--min-embedding-dims", dims != 1),
        ):
            if given:
                raise _UsageError(
                    f"argument {flag}: it applies to --select-embedding; give it too",
                    flag=flag,
                )
        return {}
    return {"select": select, "search": search, "min_dims": dims}


def _streaming_plan(
    args: argparse.Namespace, plan: Any, names: set[str], rows: int | None
) -> str | None:
    """Why the evaluation cannot stream (None: it can), given ``--streaming``: the plan's own
    obstacles (:meth:`ope.evaluation.EvaluationPlan.stream_obstacles`) under their flags, and
    those of the command line's inputs."""
    blockers = []
    if args.format != "parquet":
        blockers.append(f"--format {args.format}")
    for argument, reason in plan.stream_obstacles():  # loop over the plan's obstacles
        if argument == "ci" and args.streaming == "on":
            continue  # streamed anyway: the fallback interval, with a note
        blockers.append(f"{FLAGS.get(argument, argument)} ({reason})")
    if args.policies:
        blockers.append("--policies (a policy table is joined on every event)")
    if getattr(args, "_policy_specs", None):
        blockers.append("--policy NAME=KIND:ARGS (a candidate computed on every row)")
    if getattr(args, "report", None):
        blockers.append("--report (the report's overlap diagnostics need every row)")
    if _auto_estimator(args):
        blockers.append("--estimator auto (cross-validation splits the rows in memory)")
    tuned = _tuned_flags(args)
    if tuned:
        blockers.append(f"{', '.join(tuned)} tuned per candidate (the rows in memory)")
    if getattr(args, "metric", None):
        blockers.append("--metric (an outcome distribution sorts every row by outcome)")
    if getattr(args, "guardrail", None):
        blockers.append("--guardrail (each outcome is compared on the same rows in memory)")
    if getattr(args, "loggers", None):
        blockers.append("--loggers (each logger's rows are weighed in memory)")
    if getattr(args, "sensitivity", "auto") == "on":
        blockers.append("--sensitivity on (the analysis sorts every row by reward)")
    if any(c.startswith("propensity__") for c in names):
        blockers.append("candidates given by factor (propensity__<factor> columns)")
    if not names:
        blockers.append("a source whose parquet metadata cannot be read")
    if args.streaming == "off":
        return "--streaming off"
    if blockers:
        return ", ".join(blockers)
    if args.streaming == "auto" and (rows is None or rows < STREAM_MIN_ROWS):
        return f"fewer than {STREAM_MIN_ROWS:,} rows"
    return None


def _with_cli_provenance(result: Any, args: argparse.Namespace, rows: int) -> Any:
    """``result`` whose provenance also holds the command as typed, the input and the rows read
    from it (what the CLI records beside the options and the seed)."""
    import shlex

    return result.with_provenance(
        result.provenance,
        command=shlex.join(["ope", *getattr(args, "_argv", [])]),
        input=str(args.logs),
        rows=int(rows),
    )


def _evaluation_document(evaluation: Any) -> dict[str, Any]:
    """The evaluation's JSON, with ``ci_fallback``: the estimators whose intervals are the
    fallback method, each to that method."""
    document = evaluation.to_dict()
    document["ci_fallback"] = {e: evaluation.ci_fallback for e in evaluation.fallback_estimators}
    return document


def _check_outcome_flags(args: argparse.Namespace) -> None:
    """The flags of outcome distributions (``--metric`` and its companions) and guardrail
    decisions (``--guardrail``, ``--primary``), checked before any row is read (``ope evaluate``
    and ``ope report``)."""
    stray = _distribution_flags(args) if not getattr(args, "metric", None) else []
    if stray:
        raise _UsageError(
            f"argument {stray[0]}: it applies to the outcome distribution of --metric; give "
            "--metric too (e.g. --metric quantile:0.95), or drop it.",
            flag=stray[0],
        )
    if getattr(args, "primary", None) and not getattr(args, "guardrail", None):
        raise _UsageError(
            "argument --primary: it names the outcome that must improve beside --guardrail; "
            "give --guardrail too, or drop it.",
            flag="--primary",
        )
    if getattr(args, "guardrail", None):  # malformed guardrails fail before any row is read
        from ope.guardrails import parse_guardrail

        rails: list[str] = list(args.guardrail)
        _checked("--guardrail", lambda: [parse_guardrail(r, name="--guardrail") for r in rails])
        outcomes = [parse_guardrail(r).outcome for r in rails]
        if args.primary:
            primary: str = args.primary
            _checked("--primary", lambda: parse_guardrail(primary, primary=True, name="--primary"))
        first = parse_guardrail(args.primary or "reward", primary=True).outcome
        twice = sorted({o for o in [first, *outcomes] if [first, *outcomes].count(o) > 1})
        if twice:
            raise _UsageError(
                f"argument --guardrail: {', '.join(map(repr, twice))} named twice among the "
                f"primary ({first!r}) and the guardrails; name each outcome once.",
                flag="--guardrail",
            )
    if getattr(args, "metric", None):  # a malformed --metric fails before any row is read
        from ope.distribution import parse_metric

        metrics: list[str] = list(args.metric)
        _checked("--metric", lambda: [parse_metric(spec) for spec in metrics])


def _cmd_evaluate(args: argparse.Namespace) -> _Outcome:
    if getattr(args, "truth", None) and not args.report:
        raise _UsageError(
            "argument --truth: the known true values are drawn in the report; "
            "pass --report FILE.html too, or drop --truth.",
            flag="--truth",
        )
    for dest, flag in (("max_candidates", "--max-candidates"), ("max_segments", "--max-segments")):
        if hasattr(args, dest) and not args.report:
            raise _UsageError(
                f"argument {flag}: it bounds what the report draws; pass --report FILE.html "
                f"too, or drop {flag}.",
                flag=flag,
            )
    _read_truth(args)  # a malformed --truth fails before any row is read
    _check_outcome_flags(args)
    names, rows = _source_schema(args)
    if args.trajectories or (names and all(c in names for c in TRAJECTORY_MARKERS)):
        if getattr(args, "weight_column", None):
            raise _UsageError(
                "argument --weight-column: the sequential estimators of trajectories do not "
                "take sampling weights; evaluate bandit logs, or drop the flag to estimate the "
                "value on the episodes as logged.",
                flag="--weight-column",
            )
        if getattr(args, "guardrail", None):
            raise _UsageError(
                "argument --guardrail: guardrail decisions compare outcome columns of bandit "
                "logs; the logs hold trajectories.",
                flag="--guardrail",
            )
        if getattr(args, "metric", None) and args.tail_column:
            raise _UsageError(
                "argument --metric: the return distribution takes one --tail-value for every "
                "truncated episode, not --tail-column.",
                flag="--metric",
            )
        return _evaluate_trajectories(args)
    given = [flag for dest, flag in _TRAJECTORY_ONLY if getattr(args, dest) not in (None, False)]
    if given:
        raise _UsageError(
            f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to trajectory logs "
            f"only (columns {', '.join(TRAJECTORY_MARKERS)}), and {args.logs} holds bandit "
            "logs; pass --trajectories if it holds steps.",
            flag=given[0],
        )
    plan = _plan(args)
    why_not = _streaming_plan(args, plan, names, rows)
    if args.streaming == "on" and why_not:
        raise _UsageError(
            f"argument --streaming: cannot stream with {why_not}; use --streaming auto or off.",
            flag="--streaming",
        )
    if why_not is None:
        return _evaluate_streamed(args, plan, names)
    logs, evaluation, d, outcome = _evaluate_in_memory(args, plan)
    if args.report:
        path = _write_report(
            args,
            args.report,
            logs,
            evaluation,
            d,
            distribution=outcome.distribution,
            guardrails=outcome.guardrails,
        )
        outcome.document["report"] = path
        outcome.text += f"\n\nreport written to {path}"
    return outcome


def _auto_estimator(args: argparse.Namespace) -> bool:
    """``--estimator auto`` (alone: with other names it is a usage error)."""
    names = list(getattr(args, "estimator", None) or ())
    if "auto" not in names:
        return False
    if len(names) > 1:
        raise _UsageError(
            "argument --estimator: auto chooses among the estimators that apply; give it "
            f"alone, or name the estimators (got {' '.join(names)}).",
            flag="--estimator",
        )
    return True


def _evaluate_loggers(args: argparse.Namespace, logs: Any, policies: Any) -> Any:
    """``--loggers``: :func:`ope.evaluate_loggers` with the flags it takes (the others are
    refused: they belong to one pooled evaluation)."""
    from ope.loggers import evaluate_loggers

    options = _plan_options(args)
    for dest, flag in (
        ("by", "--by"),
        ("weight_column", "--weight-column"),
        ("embedding", "--cluster-column/--embedding-columns"),
        ("weight_bound", "--weight-bound"),
        ("tau", "--tau"),
        ("shrinkage", "--shrinkage"),
    ):  # a loop over the options evaluate_loggers does not take
        if options.get(dest) is not None:
            raise _UsageError(
                f"argument --loggers: {flag} does not combine with pooling several loggers; "
                f"drop {flag}, or --loggers.",
                flag="--loggers",
            )
    if _auto_estimator(args) or _tuned_flags(args):
        raise _UsageError(
            "argument --loggers: --estimator auto and tuned settings choose on one pooled "
            "evaluation; name the estimators with --estimator.",
            flag="--loggers",
        )
    try:
        return evaluate_loggers(
            logs,
            policies,
            weighting=args.loggers,
            estimators=options["estimators"],
            ci=options["ci"],
            confidence_level=options["confidence_level"],
            reward_range=options["reward_range"],
            max_weight=options["max_weight"],
            context_columns=options["context_columns"],
            rng=options["rng"],
        )
    except (SchemaError, ValidationError, EstimationError) as exc:
        # the library's weighting='...' is this command's --loggers
        text = re.sub(r"weighting=['\"](\w+)['\"]", r"--loggers \1", str(exc))
        if text == str(exc):
            raise
        raise type(exc)(text) from None


def _evaluate_in_memory(args: argparse.Namespace, plan: Any) -> tuple[Any, Any, Any, _Outcome]:
    """Read every row, evaluate and diagnose under ``plan``: (logs, evaluation, diagnostics,
    outcome)."""
    logs = _read(args)
    _require_columns(logs, args, "by", "context_columns")
    policies = _policies_from_args(args, logs)
    if getattr(args, "loggers", None):
        evaluation = _evaluate_loggers(args, logs, policies)
        plan = plan.with_policies(policies)
    elif _auto_estimator(args) or _tuned_flags(args):
        # the cross-validated choice, or settings tuned per candidate; then a plan of the
        # estimators for the diagnostics
        from ope.evaluation import EvaluationPlan
        from ope.evaluation.auto import evaluate_auto
        from ope.evaluation.tuning import evaluate_with_settings, setting_estimators, settings_for

        options = _plan_options(args)
        if _auto_estimator(args):
            del options["estimators"]
            evaluation = evaluate_auto(logs, policies, options)
            named = list(evaluation.selection.candidates)
        else:
            evaluation = evaluate_with_settings(logs, policies, **options)
            named = list(evaluation.estimators)
        # the diagnostics' plan: the estimators whose setting is one number (a clip level
        # tuned per candidate is in the evaluation, not in the diagnostics' clip level)
        per_candidate = {e for key in evaluation.settings for e in setting_estimators(key)}
        kept = [e for e in named if e not in per_candidate]
        plan = EvaluationPlan.build(
            **{
                k: v
                for k, v in settings_for(options, kept).items()
                if k != "estimators"
                and (k != "embedding" or "embedding" not in evaluation.settings)
            },
            estimators=kept or ["ips"],  # the diagnostics read no estimate
        ).with_policies(policies)
    else:
        plan = plan.with_policies(policies)
        evaluation = plan.run(logs)
    # weighted as the estimates when rows carry weights; the moments come from the evaluation
    # when its statistics cover every candidate (not factored ones, computed apart)
    stats = evaluation.statistics
    covered = stats is not None and list(stats.names or ()) == list(evaluation.policies)
    evaluation = _with_cli_provenance(evaluation, args, logs.report.rows_read)
    d = _diagnose_from_args(args, logs, plan, stats if covered else None)
    texts = [_cli_summary(evaluation.summary())]
    if evaluation.by:
        texts.append(evaluation.segment_summary())
    model = evaluation.model_columns
    if model is not None:
        texts.append(
            f"reward model columns: context {', '.join(model['context']) or 'none'}; "
            f"action features {', '.join(model['action_features']) or 'none'}"
        )
    distribution = _distribution_outcome(args, logs, policies)
    if distribution is not None:
        texts.append(distribution.summary())
    guardrails = _guardrail_outcome(args, logs, policies)
    if guardrails is not None:
        texts.append(guardrails.summary())
    texts += [_cli_summary(d.summary()), _seed_line(args)]
    document = {**_evaluation_document(evaluation), "diagnostics": d.to_dict()}
    if distribution is not None:
        document["distribution"] = distribution.to_dict()
    if guardrails is not None:
        document["guardrails"] = guardrails.to_dict()
    return (
        logs,
        evaluation,
        d,
        _Outcome(document, _joined(*texts), distribution=distribution, guardrails=guardrails),
    )


# ---------------------------------------------------------------------------------------------
# report (bandit logs)
# ---------------------------------------------------------------------------------------------
def _cmd_report(args: argparse.Namespace) -> _Outcome:
    """Evaluate and diagnose every row, then write the HTML report to ``--out`` (checked, like
    every destination, before any row is read)."""
    _check_outcome_flags(args)
    _read_truth(args)  # a malformed --truth fails before any row is read
    names, _ = _source_schema(args)
    if args.trajectories or (names and all(c in names for c in TRAJECTORY_MARKERS)):
        return _report_trajectories(args)
    if args.streaming == "on":
        raise _UsageError(
            "argument --streaming: the report's overlap diagnostics need every "
            "row; drop --streaming on.",
            flag="--streaming",
        )
    if args.estimator is None and args.max_weight is not None:  # --max-weight clips too
        args.estimator = list(REPORT_CLIPPED_ESTIMATORS)
    logs, evaluation, d, outcome = _evaluate_in_memory(args, _plan(args))
    path = _write_report(
        args,
        args.out,
        logs,
        evaluation,
        d,
        title=args.title,
        distribution=outcome.distribution,
        guardrails=outcome.guardrails,
    )
    return _Outcome({**outcome.document, "report": path}, f"report written to {path}")


def _evaluate_streamed(args: argparse.Namespace, plan: Any, names: set[str]) -> _Outcome:
    """``ope evaluate`` over ``ope.scan_logs``: only the columns the estimators need, batch by
    batch, merged statistics (the numbers of the whole read, in bounded memory)."""
    from ope.io import scan_logs

    policies = list(args.policy) if args.policy else None
    targets = (
        [f"target__{p}" for p in policies]
        if policies
        else sorted(c for c in names if c.startswith("target__"))
    )
    weight = args.weight_column or ("weight" if "weight" in names else None)
    columns = [
        *(["event_id"] if "event_id" in names else []),
        *targets,
        *([weight] if weight else []),
    ]
    if plan.marginal_weighting:  # each batch's embedding propensities come from its own rows
        wanted = [
            "candidates",
            "logging_distribution",
            *(f"target_dist__{t.removeprefix('target__')}" for t in targets),
            *plan.embedding.names,
        ]
        columns += [c for c in wanted if c in names and c not in columns]
    # io's default batch size: at 10M rows x 8 candidates the pass peaks at about 0.55 GB
    # (batches of 1M rows: 0.83 GB; 64k rows: 0.46 GB), about as fast
    scan = scan_logs(
        args.logs, mapping=_parse_mapping(args.mapping), on_invalid=args.on_invalid, columns=columns
    )
    evaluation = _with_cli_provenance(
        plan.with_policies(policies).run(scan), args, scan.report.rows_read
    )
    document = {**_evaluation_document(evaluation), "diagnostics": None}
    streamed = (
        f"streamed batch by batch in bounded memory (--streaming "
        f"{args.streaming}): the overlap diagnostics and the paired comparisons need "
        f"every row; run `ope diagnose {args.logs}`, or pass --streaming off"
    )
    document["notes"] = [*document["notes"], streamed]
    if args.json:  # the text is not printed: not rendered either
        return _Outcome(document, "")
    texts = [evaluation.summary(), f"note: {streamed}", _seed_line(args)]
    return _Outcome(document, "\n\n".join(texts))


# ---------------------------------------------------------------------------------------------
# evaluate (trajectory logs)
# ---------------------------------------------------------------------------------------------
def _horizon_arg(value: str | None) -> int | str | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value  # "logged", or a bad value that sequential_estimate names


def _trajectory_usage(args: argparse.Namespace) -> None:
    """Refuse the flags of bandit logs on trajectory logs (exit 2, naming the flag); the
    settings themselves are checked by :func:`ope.sequential.evaluate_trajectories`."""
    if getattr(args, "_policy_specs", None):
        raise _UsageError(
            f"argument --policy: {args._policy_specs[0].text!r}: a spec (NAME=KIND:ARGS) "
            "builds a candidate for bandit logs only; trajectory candidates are the "
            "target__<name> columns of the steps (select them with --policy NAME).",
            flag="--policy",
        )
    bandit_only = [
        flag
        for flag, value in (
            ("--policies", args.policies),
            ("--by", args.by),
            ("--context-columns", args.context_columns),
            ("--tau", args.tau),
            ("--shrinkage", args.shrinkage),
            ("--n-resamples", args.n_resamples),
        )
        if value
    ]
    if bandit_only:
        raise _UsageError(
            f"{', '.join(bandit_only)} appl{'y' if len(bandit_only) > 1 else 'ies'} to bandit "
            "logs only; trajectory candidates are the target__<name> columns of the steps "
            "(select them with --policy).",
            flag=bandit_only[0],
        )
    if args.tail_value is not None and not math.isfinite(args.tail_value):
        raise _UsageError(
            f"argument --tail-value: must be a finite number (the value of the state a truncated "
            f"episode was left in); got {args.tail_value!r}.",
            flag="--tail-value",
        )


def _per_policy_columns(template: str | None, policies: Sequence[str], flag: str) -> Any:
    """A ``--q-column``/``--v-column``/``--tail-column`` name: a mapping of each policy to its
    column when it holds :data:`POLICY_PLACEHOLDER`, else the one column (for one policy)."""
    if template is None or POLICY_PLACEHOLDER not in template:
        if template is not None and len(policies) > 1:
            raise _UsageError(
                f"argument {flag}: {template!r} would serve {len(policies)} candidate policies, "
                f"but a model's values depend on the policy: put {POLICY_PLACEHOLDER} in the "
                f"name (e.g. {flag} '{'q' if flag == '--q-column' else 'v'}_target__"
                f"{POLICY_PLACEHOLDER}') or select one with --policy.",
                flag=flag,
            )
        return template
    return {p: template.replace(POLICY_PLACEHOLDER, p) for p in policies}


def _report_trajectories(args: argparse.Namespace) -> _Outcome:
    """``ope report`` on trajectory logs: the evaluation of :func:`_evaluate_trajectories`
    written as the report (its overlap sections need bandit logs' diagnostics and say so)."""
    bandit_only = (
        ("by", "--by"),
        ("target_width", "--target-width"),
        ("weight_column", "--weight-column"),
        ("guardrail", "--guardrail"),
        ("cluster_column", "--cluster-column"),
    )
    for dest, flag in bandit_only:
        if getattr(args, dest, None):
            raise _UsageError(
                f"argument {flag}: the report of trajectory logs has no section for it (it "
                "applies to bandit logs); drop it, or use ope evaluate for what it supports.",
                flag=flag,
            )
    for dest, flag, off in (
        ("sensitivity", "--sensitivity", "off"),
        ("streaming", "--streaming", "auto"),
    ):
        if getattr(args, dest, off) not in (None, off, "off", "auto"):
            raise _UsageError(
                f"argument {flag}: applies to bandit logs only; drop it for trajectory logs.",
                flag=flag,
            )
    if args.tail_column and POLICY_PLACEHOLDER in args.tail_column:
        raise _UsageError(
            "argument --tail-column: per-candidate tail values leave the report no logging "
            "baseline to compare with (its tail would be a candidate's); give --tail-value, or "
            "use ope evaluate.",
            flag="--tail-column",
        )
    traj, ev, outcome, found = _trajectory_run(args)
    path = _write_report(args, args.out, traj, ev, None, title=args.title, distribution=found)
    return _Outcome({**outcome.document, "report": path}, f"report written to {path}")


def _evaluate_trajectories(args: argparse.Namespace) -> _Outcome:
    """``ope evaluate`` on trajectory logs: :func:`ope.sequential.evaluate_trajectories` with
    the flags, in the output style of bandit logs."""
    return _trajectory_run(args)[2]


def _trajectory_run(args: argparse.Namespace) -> tuple[Any, Any, _Outcome, Any]:
    """The trajectories read, their evaluation, the output of ``ope evaluate`` and the return
    distribution of ``--metric`` (or None)."""
    from ope.io import read_trajectories
    from ope.sequential import evaluate_trajectories

    _check_settings(args, _PLAN_SETTINGS)  # no evaluation plan checks them on this path
    _trajectory_usage(args)
    marginalized = any(e in ("mis", "mis_dr") for e in args.estimator or ())
    dr_returns = bool(args.metric) and args.distribution_estimator == "dr"
    if args.state_column and not (marginalized or dr_returns):
        raise _UsageError(
            "argument --state-column: it serves --estimator mis/mis_dr, and the return "
            "distribution of --metric with --distribution-estimator dr; add one, or drop it.",
            flag="--state-column",
        )
    traj = _read(args, read_trajectories)
    if dr_returns and (args.state_column or "state" in traj.table.column_names):
        from ope.sequential._steps import state_codes

        state_codes(traj, args.state_column)  # before the evaluation: a bad column fails now
    policies = list(args.policy) if args.policy else traj.target_policies
    tail: Any = args.tail_value
    if args.tail_column:
        tail = _per_policy_columns(args.tail_column, policies or [""], "--tail-column")
        if not isinstance(tail, str) and len(policies) == 1:
            tail = next(iter(tail.values()))  # one policy: its column, the logging value too
    ev = evaluate_trajectories(
        traj,
        policies or None,
        **({"estimators": tuple(args.estimator)} if args.estimator else {}),
        ci=args.ci,
        ci_fallback=None if args.ci == FALLBACK_CI else FALLBACK_CI,
        confidence_level=args.confidence_level,
        gamma=1.0 if args.gamma is None else args.gamma,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        max_weight=args.max_weight,
        weight_bound=args.weight_bound,
        horizon=_horizon_arg(args.horizon),
        tail_value=tail,
        q_hat=_per_policy_columns(args.q_column, policies, "--q-column"),
        v_hat=_per_policy_columns(args.v_column, policies, "--v-column"),
        state=args.state_column if marginalized else None,  # and DR's returns (below)
    )
    document = ev.to_dict()
    document = {"kind": document.pop("kind"), "logs": args.logs, **document}
    document["estimand"] = _cli_text(document["estimand"])
    document["notes"] = [_cli_text(n) for n in document["notes"]]
    texts = [str(traj.report), _cli_text(ev.summary())]
    found = None
    if args.metric:  # the return distribution: trajectory-wise weights per episode
        from ope.distribution import return_distribution

        if args.outcome not in (None, "return"):
            raise _UsageError(
                "argument --outcome: on trajectories the outcome is the episode's discounted "
                "return; drop --outcome.",
                flag="--outcome",
            )
        found = return_distribution(
            traj,
            policies or None,
            gamma=1.0 if args.gamma is None else args.gamma,
            tail_value=args.tail_value,
            estimator=args.distribution_estimator,
            weight_bound=args.weight_bound if args.distribution_estimator == "ips" else None,
            confidence_level=args.confidence_level,
            outcome_range=None if args.outcome_range is None else tuple(args.outcome_range),
            rng=args.seed if args.seed is not None else 0,
            state=args.state_column if args.distribution_estimator == "dr" else None,
        )
        found = dataclasses.replace(found, shown=tuple(args.metric))
        document["distribution"] = found.to_dict()
        texts.append(found.summary())
    return traj, ev, _Outcome(document, _joined(*texts)), found


# ---------------------------------------------------------------------------------------------
# paired, learn, import
# ---------------------------------------------------------------------------------------------
def _arm_of(value: str, arms: Sequence[Any], flag: str) -> Any:
    """The replays' arm written ``value`` on the command line (arms may be integers)."""
    by_text = {str(a): a for a in arms}
    if value not in by_text:
        raise _UsageError(
            f"argument {flag}: arm {value!r} is not in the replays; their arms are: "
            f"{', '.join(map(repr, by_text))}.",
            flag=flag,
        )
    return by_text[value]


def _with_rng(func: Callable[..., Any], seed: int) -> dict[str, Any]:
    """``{"rng": seed}`` when ``func`` takes an ``rng`` (everything random gets the seed)."""
    import inspect

    return {"rng": seed} if "rng" in inspect.signature(func).parameters else {}


def _result_outcome(
    args: argparse.Namespace, report: Any, result: Any, summary: str | None = None
) -> _Outcome:
    """The outcome of a run that reads logs and gives one result: the document is the logs,
    their validation report and the result's ``to_dict()``; the text the report, the result's
    summary (or ``summary``, the command's wording of it) and the seed."""
    return _Outcome(
        {"logs": args.logs, "validation": report.to_dict(), **result.to_dict()},
        "\n\n".join(
            [str(report), result.summary() if summary is None else summary, _seed_line(args)]
        ),
    )


def _cmd_tune(args: argparse.Namespace) -> _Outcome:
    from ope.evaluation.tuning import tune_setting

    logs = _read(args)
    policies = _policies_from_args(args, logs)
    choice = tune_setting(
        logs,
        args.estimator,
        policies,
        grid=args.grid,
        delta=args.delta,
        rule=args.rule,
        rng=args.seed,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        context_columns=args.context_columns,
    )
    return _result_outcome(args, logs.report, choice)


def _cmd_paired(args: argparse.Namespace) -> _Outcome:
    from ope.io import read_paired
    from ope.paired import paired_effect

    replays = _read(args, read_paired)
    arms = replays.arms
    treated = [_arm_of(a, arms, "--treated") for a in args.treated]
    control = _arm_of(args.control, arms, "--control")
    outcomes: Any = args.outcomes or (list(args.outcome) if args.outcome else ("outcome",))
    _typed([*treated, control, *([] if outcomes == "all" else outcomes), args.by])
    res = paired_effect(
        replays,
        treated=treated,
        control=control,
        outcomes=outcomes,
        by=args.by,
        ratio=args.ratio,
        confidence_level=args.confidence_level,
        ci=args.ci,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        correction=args.correction,
        **_with_rng(paired_effect, args.seed),
    )
    # the notes name the arms, outcomes and groups as the user typed them (and as the table
    # shows them), and the flags of their advice
    groups = dict.fromkeys(res.table()["group"]) if args.by is not None else {}
    _typed([*res.treated, res.control, *res.outcomes, args.by, *groups])
    return _result_outcome(args, replays.report, res, _cli_summary(res.summary()))


def _cmd_learn(args: argparse.Namespace) -> _Outcome:
    from ope._output import atomic_path
    from ope.learning import (
        ConservativePolicyLearner,
        learn_from_logs,
        write_learner_policy_table,
    )

    logs = _read(args)
    _require_columns(logs, args, "context_columns")
    learner, cert = learn_from_logs(
        logs,
        context_columns=args.context_columns,
        learner=ConservativePolicyLearner(
            reward_range=tuple(args.reward_range), **_with_rng(ConservativePolicyLearner, args.seed)
        ),
        certify_fraction=args.certify_fraction,
        confidence_level=args.confidence_level,
        ci=args.gate,
        name=args.name,
        rng=args.seed,
        weight_column=args.weight_column,
        max_sampling_weight=args.max_sampling_weight,
    )
    text = [str(cert)]
    policy_rows = None
    if args.out:  # written block by block: only each row's candidates, never held whole
        with atomic_path(args.out, force=args.force, flag="--out") as tmp:
            policy_rows = write_learner_policy_table(
                learner, logs, tmp, context_columns=args.context_columns, name=args.name
            )
        text.append(
            f"learned policy written to {args.out}; score it with: "
            f"ope evaluate LOGS --policies {args.out}"
        )
    text.append(_seed_line(args))
    document = {
        "validation": logs.report.to_dict(),
        "certificate": cert.to_dict(),
        "weight_column": cert.sampling_weight,
        "policy_table": args.out,
        "policy_rows": policy_rows,
    }
    return _Outcome(document, "\n".join(text))


def _cmd_action_table(args: argparse.Namespace) -> _Outcome:
    """The logging policy of context-free logs as a per-(action, position) table."""
    import pyarrow.compute as pc

    from ope._output import atomic_path
    from ope.policies import logged_action_table

    logs = _read(args)
    table = logged_action_table(logs)
    with atomic_path(args.out, force=args.force, flag="--out") as tmp:
        if args.out.lower().endswith(".csv"):
            import pyarrow.csv as pacsv

            pacsv.write_csv(table, tmp)
        else:
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
    n_actions = pc.count_distinct(table.column("action")).as_py()
    positions = (
        sorted(pc.unique(table.column("position")).to_pylist())
        if "position" in table.column_names
        else None
    )
    shape = f"{n_actions} actions" + (f" x {len(positions)} positions" if positions else "")
    text = (
        f"{str(logs.report)}\n\nwrote {table.num_rows:,} rows ({shape}) to {args.out}; "
        f"evaluate it on other logs with: ope evaluate LOGS --policy NAME=table:{args.out}"
    )
    document = {
        "validation": logs.report.to_dict(),
        "out": args.out,
        "rows": table.num_rows,
        "actions": n_actions,
        "positions": positions,
    }
    return _Outcome(document, text)


def _cmd_import(args: argparse.Namespace) -> _Outcome:
    """``ope import obd|dsjson SRC --out LOGS.parquet``: validate and write parquet logs.

    ``--out`` was checked before the import started (:mod:`ope._output`) and is written through
    a temporary file renamed only when the import succeeds. DSJSON is streamed chunk by chunk
    into the file. OBD's item table is embedded in the file's schema metadata; with ``--force``
    an item table that an earlier import wrote beside the file (``<stem>.actions.parquet``)
    is removed.
    """
    import pyarrow.parquet as pq

    from ope._output import atomic_path

    out = Path(args.out)
    side = _import_side_file(out)
    written = 0
    action_features = None
    with atomic_path(out, force=args.force, flag="--out") as tmp:
        if args.format == "dsjson":
            from ope.importers import import_dsjson

            written, report = import_dsjson(
                args.src, tmp, on_invalid=args.on_invalid, **_chunk_option(args)
            )
        else:
            from ope.importers import read_obd

            logs = read_obd(
                args.src, context=args.obd_context or "user", on_invalid=args.on_invalid
            )
            # the item table travels in the schema metadata (ope.io.ACTION_FEATURES_KEY)
            pq.write_table(logs.table, tmp)
            written, report, action_features = logs.n, logs.report, logs.action_features
    # an item table that an earlier import wrote beside the file --force replaced is stale
    removed = args.format == "obd" and args.force and _is_import_side_table(side)
    if removed:
        side.unlink()
    document = {
        "format": args.format,
        "src": args.src,
        "out": str(out),
        "rows_written": written,
        "report": report.to_dict(),
        "action_features": None
        if action_features is None
        else {
            "items": action_features.num_rows,
            "columns": [c for c in action_features.column_names if c != "action"],
        },
        "removed": str(side) if removed else None,
    }
    text = f"wrote {written:,} rows to {out}"
    if action_features is not None:
        text += (
            f"\nwith the action features of {action_features.num_rows:,} items "
            "(item_context.csv) embedded in the file: ope.read_logs reads them back"
        )
    if removed:
        text += f"\nremoved {side}: the item table an earlier import wrote beside the file"
    return _Outcome(document, "\n\n".join([str(report), text]))


# ---------------------------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------------------------
#: where ``ope demo`` writes its HTML report by default (in the current directory; ``--out``)
DEMO_REPORT: Final = "report.html"

#: ``ope report``'s estimators when ``--max-weight`` is given without ``--estimator``: the clip
#: level is then both the outer/inner split of the diagnostics and clipped_ips's (as in the demo)
REPORT_CLIPPED_ESTIMATORS: Final = ("ips", "clipped_ips", "snips")

#: suffixes ``ope report --out`` and ``ope evaluate --report`` accept
REPORT_SUFFIXES: Final = (".html", ".htm")

#: what identifies a page ope.report wrote (in its head, after the doctype)
REPORT_MARKER: Final = b'<meta name="generator" content="ope report">'


def _cmd_demo(args: argparse.Namespace) -> _Outcome:
    """``ope demo``: the bundled sample's story (:func:`ope._demo.run_demo`), its report at
    ``--out`` (checked before the work: absent, ope's own, or ``--force``)."""
    from ope._demo import run_demo

    document, text = run_demo(
        seed=args.seed,
        out=args.out,
        seed_line=_seed_line(args),
        provenance={
            "command": ["ope", *getattr(args, "_argv", ["demo"])],
            "options": _options(args),
            "seed": args.seed,
        },
    )
    return _Outcome(document, _cli_summary(text))


# ---------------------------------------------------------------------------------------------
# monitor (anytime-valid sequences over files as they land)
# ---------------------------------------------------------------------------------------------
#: The monitor's settings a resumed ``--state`` must agree with: (attribute, flag).
_MONITOR_SETTINGS: Final = (
    ("reward_range", "--reward-range"),
    ("estimator", "--estimator"),
    ("method", "--method"),
    ("confidence_level", "--confidence-level"),
    ("simultaneous", "--simultaneous"),
    ("planned_rows", "--planned-rows"),
)


def _monitor_settings(args: argparse.Namespace) -> tuple[float | None, float, Any]:
    """``--every`` and ``--settle`` in seconds, and the monitor (new, or resumed from
    ``--state``), each flag checked before any row is read."""
    from ope._output import check_outputs
    from ope.monitor import Monitor, parse_interval

    if args.policies:
        raise _UsageError(
            "argument --policies: a policy table joins on the event ids of all the logs; a "
            "monitor reads file by file: give the candidates as target__<name> columns or "
            "--policy NAME=KIND:ARGS.",
            flag="--policies",
        )
    every = (
        None
        if args.every is None
        else _checked("--every", lambda: parse_interval(args.every, "every"))
    )
    default_settle = "5s" if every is not None else "0"
    settle = _checked("--settle", lambda: parse_interval(args.settle or default_settle, "settle"))
    if args.max_looks is not None and args.max_looks < 1:
        raise _UsageError(
            f"argument --max-looks: must be at least 1; got {args.max_looks}.", flag="--max-looks"
        )
    options = {"reward_model": None, "rng": args.seed}
    mon = Monitor(
        reward_range=None if args.reward_range is None else tuple(args.reward_range),
        estimator=args.estimator,
        method=args.method,
        confidence_level=args.confidence_level,
        simultaneous=args.simultaneous,
        planned_rows=args.planned_rows,
        context_columns=args.context_columns,
        **options,
    )
    args._monitor_files = {}
    if args.state is None:
        return every, settle, mon
    _checked(
        "--state",
        lambda: check_outputs(
            [("--state", args.state)], inputs=[("LOGS", args.logs)], force=True, suffixes=(".json",)
        ),
    )
    if not os.path.exists(args.state):
        return every, settle, mon
    try:
        with open(args.state, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _UsageError(
            f"argument --state: cannot read {args.state!r} as a monitor state ({exc}); remove "
            "it to start a new monitor.",
            flag="--state",
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("files"), dict):
        raise _UsageError(
            f"argument --state: {args.state!r} is not a state ope monitor wrote; remove it to "
            "start a new monitor.",
            flag="--state",
        )
    resumed = _checked("--state", lambda: Monitor.from_state(state.get("monitor"), **options))
    for attr, flag in _MONITOR_SETTINGS:  # the flags must restate the state's settings
        if getattr(resumed, attr) != getattr(mon, attr):
            raise _UsageError(
                f"argument {flag}: {getattr(mon, attr)!r} differs from the resumed state's "
                f"{getattr(resumed, attr)!r} ({args.state!r}); a sequence keeps its settings: "
                "give the same flags, or remove the state to start a new monitor.",
                flag=flag,
            )
    if args.context_columns is not None and resumed.context_columns != mon.context_columns:
        raise _UsageError(
            f"argument --context-columns: {mon.context_columns!r} differs from the resumed "
            f"state's {resumed.context_columns!r} ({args.state!r}); give the same columns, or "
            "remove the state to start a new monitor.",
            flag="--context-columns",
        )
    args._monitor_files = dict(state["files"])
    mon = resumed
    return every, settle, mon


def _cmd_monitor(args: argparse.Namespace) -> _Outcome:
    """Read each new parquet file of LOGS as one look, update the confidence sequences, write
    the state (and the report) after each look, and stop when told (no --every, --max-looks,
    --until-decided) or interrupted: Ctrl-C or SIGTERM end the watch with the document of every
    look so far."""
    import time

    from ope._output import clear_stop
    from ope.io import read_logs
    from ope.monitor import new_log_files

    every, settle, mon = _monitor_settings(args)
    seen: dict[str, Any] = args._monitor_files
    rejected: dict[str, str] = {}  # this run's: a rejected file is retried by the next run
    rejected_stat: dict[str, list[int]] = {}  # ... and by a later poll once it changes
    mapping = _parse_mapping(args.mapping)
    names = list(getattr(args, "_policy_names", None) or [])
    specs = list(getattr(args, "_policy_specs", None) or [])
    single = os.path.isfile(args.logs)
    quiet = getattr(args, "quiet", False)
    notes: list[str] = []
    stopped = "no new files"
    looks = 0
    try:
        while True:
            if single:  # one file: keyed by its absolute path, read once
                pending = [] if os.path.abspath(args.logs) in seen else [args.logs]
            else:
                fresh, changed = new_log_files(args.logs, seen, settle=settle)
                notes += [n for n in changed if n not in notes]
                pending = []
                for name in fresh:  # a loop over new files
                    st = os.stat(os.path.join(args.logs, name))
                    if rejected_stat.get(name) != [st.st_size, st.st_mtime_ns]:
                        pending.append(os.path.join(args.logs, name))
            for path in pending:  # a loop over files: each is one look
                key = os.path.abspath(path) if single else os.path.basename(path)
                before = os.stat(path)
                try:
                    try:
                        logs = read_logs(path, mapping=mapping, on_invalid=args.on_invalid)
                    except ValidationError as exc:
                        # a file without rows (an hour with no traffic): a look that changes
                        # nothing (Monitor.update of an empty batch); other errors set it aside
                        if getattr(getattr(exc, "report", None), "rows_read", None) != 0:
                            raise
                        logs = None
                    if logs is None:
                        import pandas as pd

                        result = mon.update(pd.DataFrame())
                    else:
                        if specs:
                            from ope.policies import candidates_with_specs

                            mon.policies = candidates_with_specs(
                                logs,
                                specs,
                                names=names,
                                labels=[f"--policy {s.text}" for s in specs],
                            )
                        else:
                            mon.policies = names or None
                        result = mon.update(logs)
                except (
                    ValidationError,
                    SchemaError,
                    DataFileError,
                    PolicyError,
                    EstimationError,  # e.g. sampling weights, which the monitor refuses
                ) as exc:
                    if single:  # the one input: its error is the run's
                        raise
                    from ope._format import safe_text

                    # a directory keeps being watched: the file is set aside and said; it is
                    # read again when it changes or by the next run (the flags may have been
                    # the cause), and the run ends with exit code 65
                    rejected[key] = f"{type(exc).__name__}: {_cli_text(str(exc))}"
                    rejected_stat[key] = [before.st_size, before.st_mtime_ns]
                    print(
                        f"rejected {safe_text(key)}: {safe_text(rejected[key])}",
                        file=sys.stderr,
                        flush=True,
                    )
                    continue
                rejected.pop(key, None)
                looks += 1
                after = os.stat(path)
                if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
                    notes.append(
                        f"{key} changed while it was read; its rows after that are not "
                        "monitored (write each batch to a new file, e.g. by renaming it into "
                        "place)."
                    )
                seen[key] = [before.st_size, before.st_mtime_ns]
                if args.state is not None:
                    _write_monitor_state(args, mon, seen, rejected)
                if args.report is not None:
                    _write_monitor_report(args, mon.result())
                if not quiet:
                    _monitor_line(key, result)
                if args.until_decided and result.decided:
                    stopped = "decided"
                    break
                if args.max_looks is not None and looks >= args.max_looks:
                    stopped = "max looks"
                    break
            if stopped in ("decided", "max looks") or every is None or single:
                break
            time.sleep(every)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the way a watch ends; every look is kept
        clear_stop()
        stopped = "interrupted"
    if mon.names is None:
        detail = (
            " (rejected: " + "; ".join(f"{k}: {v}" for k, v in rejected.items()) + ")"
            if rejected
            else ""
        )
        raise ValidationError(
            f"no log file of {args.logs!r} was monitored{detail}; monitored files are parquet "
            "files whose names do not start with '.' or '_': write the first batch there, or "
            "pass --every to wait for it."
        )
    if looks == 0 and not quiet and stopped != "interrupted":
        print(f"no new files in {args.logs} since the state's last look", file=sys.stderr)
    result = mon.result()
    document = {
        "monitor": result.to_dict(),
        "files": sorted(seen),
        "rejected": dict(rejected),
        "looks_this_run": looks,
        "stopped": stopped,
        "state": args.state,
        "notes": notes,
    }
    text = result.summary()
    if args.report is not None:
        path = _write_monitor_report(args, result)
        document["report"] = path
        text += f"\nreport written to {path}"
    if notes:
        text += "\n" + "\n".join(f"note: {n}" for n in notes)
    if rejected:
        text += "\n" + "\n".join(f"rejected: {k}: {v}" for k, v in rejected.items())
    return _Outcome(document, text, EXIT_DATAERR if rejected else EXIT_OK)


def _write_monitor_report(args: argparse.Namespace, result: Any) -> str:
    """``--report``: the monitor's page, replaced after each look (it is ope's own report)."""
    from ope.report import write_report

    path = write_report(
        args.report,
        monitoring=result,
        provenance={
            "command": ["ope", *getattr(args, "_argv", [])],
            "options": _options(args),
            "seed": args.seed,
            "input": args.logs,
            "rows": result.rows,
        },
        overwrite=True,
    )
    return str(path)


def _write_monitor_state(
    args: argparse.Namespace, mon: Any, seen: dict[str, Any], rejected: dict[str, str]
) -> None:
    """``--state``: the monitor's state, the files read and this run's rejected ones (with the
    reason; for information: the next run reads them again), replaced atomically."""
    from ope._output import atomic_path

    document = {"monitor": mon.state(), "files": dict(seen), "rejected": dict(rejected)}
    with atomic_path(args.state, force=True, flag="--state") as tmp:
        tmp.write_text(_dump(document), encoding="utf-8")


def _monitor_line(name: str, result: Any) -> None:
    """One line per look on stderr: the file, the rows, each candidate's difference."""
    from ope._format import format_value, safe_text

    parts = [
        f"{safe_text(r.policy)} value {format_value(r.estimate)}, difference with logging "
        f"{format_value(r.difference)} [{format_value(r.difference_low)}, "
        f"{format_value(r.difference_high)}] {r.decision}"
        for r in result.current.itertuples()
    ]
    print(
        f"look {result.looks} ({safe_text(name)}, {result.rows:,} rows): " + "; ".join(parts),
        file=sys.stderr,
        flush=True,
    )


def _candidate_names(args: argparse.Namespace, command: str, columns: str) -> list[str]:
    """The candidates of ``--policy`` of a command that takes them by name (its ``columns``),
    each once; ``--max-weight`` only with clipped_ips."""
    if getattr(args, "_policy_specs", None):
        raise _UsageError(
            f"argument --policy: ope {command} takes candidates by NAME (their {columns}), not "
            "NAME=KIND:ARGS specs.",
            flag="--policy",
        )
    if getattr(args, "max_weight", None) is not None and "clipped_ips" not in (
        args.estimator or ()
    ):
        raise _UsageError(
            "argument --max-weight: it is the clip level of clipped_ips; add --estimator "
            "clipped_ips.",
            flag="--max-weight",
        )
    chosen = list(getattr(args, "_policy_names", None) or [])
    if len(set(chosen)) < len(chosen):
        twice = next(p for p in chosen if chosen.count(p) > 1)
        raise _UsageError(f"argument --policy: {twice!r} is named twice.", flag="--policy")
    return chosen


def _side_report(args: argparse.Namespace, title: str, rows: int, **sections: Any) -> Path:
    """``--report`` of a command whose result has its own report section (``sequences=``,
    ``continuous=``: its evaluation is the report's)."""
    from ope.report import write_report

    return write_report(
        args.report,
        title=title,
        provenance={
            "command": ["ope", *getattr(args, "_argv", [])],
            "options": _options(args),
            "seed": args.seed,
            "input": args.logs,
            "rows": rows,
        },
        overwrite=args.force,
        **sections,
    )


def _cmd_sequences(args: argparse.Namespace) -> _Outcome:
    """Evaluate candidates from logged responses (:func:`ope.evaluate_sequences`)."""
    from ope.sequences import evaluate_sequences, read_sequences

    chosen = _candidate_names(args, "sequences", "target_logprobs__<name> columns")
    # the chosen candidates and the on-policy one (the audit's, maybe outside --policy) are
    # read; no other candidate column is
    extra = [args.on_policy] if chosen and args.on_policy and args.on_policy not in chosen else []
    try:
        seq = read_sequences(
            args.logs,
            reward_column=args.reward_column,
            behavior_column=args.behavior_column,
            policies=(chosen + extra) or None,
        )
    except SchemaError as exc:
        if extra and f"no candidate {args.on_policy!r}" in str(exc):
            raise SchemaError(str(exc).replace("`policies`", "`on_policy`", 1)) from None
        raise
    options: dict[str, Any] = {
        "estimators": tuple(args.estimator or ("ips", "snips")),
        "ci": args.ci,
        "confidence_level": args.confidence_level,
        "reward_range": None if args.reward_range is None else tuple(args.reward_range),
        "weight_bound": args.weight_bound,
        "ci_fallback": None if args.ci == FALLBACK_CI else FALLBACK_CI,
        "rng": args.seed,
    }
    if args.max_weight is not None:
        options["max_weight"] = args.max_weight
    result = evaluate_sequences(
        seq,
        chosen or None,
        weighting=args.weighting,
        on_policy=args.on_policy,
        q_column=args.q_column,
        v_column=args.v_column,
        **options,
    )
    document = {"logs": args.logs, **result.to_dict()}
    text = _joined(result.summary(), result.audit.summary(), result.divergences.summary())
    if args.report is not None:
        path = _side_report(
            args, f"Language-model policies from {Path(args.logs).name}", seq.n, sequences=result
        )
        document["report"] = str(path)
        text += f"\n\nreport written to {path}"
    return _Outcome(document, text)


def _cmd_continuous(args: argparse.Namespace) -> _Outcome:
    """Evaluate candidates of a continuous action (:func:`ope.evaluate_continuous`)."""
    import numpy as np

    from ope.continuous import evaluate_continuous, read_continuous

    chosen = _candidate_names(args, "continuous", "target__<name> or density__<name> columns")
    bandwidth: Any = args.bandwidth
    if bandwidth != "slope":
        try:
            bandwidth = float(bandwidth)
        except ValueError:
            raise _UsageError(
                f"argument --bandwidth: 'slope' or a positive number; got {args.bandwidth!r}.",
                flag="--bandwidth",
            ) from None
        if not (math.isfinite(bandwidth) and bandwidth > 0):
            raise _UsageError(
                f"argument --bandwidth: must be a positive number; got {args.bandwidth!r}.",
                flag="--bandwidth",
            )
    constants: dict[str, float] = {}
    for spec in args.constant or ():  # a loop over the flag's values
        name, sep, value = spec.rpartition("=")
        name = name.strip()
        try:
            number = float(value) if sep and name else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise _UsageError(
                f"argument --constant: NAME=VALUE with a name and a finite number; got {spec!r}.",
                flag="--constant",
            )
        if name in constants or name in chosen:
            raise _UsageError(f"argument --constant: {name!r} is named twice.", flag="--constant")
        constants[name] = number
    logs = read_continuous(
        args.logs,
        action_column=args.action_column,
        density_column=args.density_column,
        reward_column=args.reward_column,
        context_columns=args.context_column,
        policies=chosen or None,
        on_invalid=args.on_invalid,
    )
    if constants:
        clash = sorted(set(constants) & set(logs.policies))
        if clash:
            raise _UsageError(
                f"argument --constant: {', '.join(map(repr, clash))} is also a candidate of the "
                "logs (a target__<name> or density__<name> column); give the constant another "
                "name.",
                flag="--constant",
            )
        logs = logs.with_candidates({k: np.full(logs.n, v) for k, v in constants.items()})
    options: dict[str, Any] = {"confidence_level": args.confidence_level}
    if args.estimator:
        options["estimators"] = tuple(args.estimator)
    if args.max_weight is not None:
        options["max_weight"] = args.max_weight
    result = evaluate_continuous(
        logs,
        (chosen + list(constants)) if chosen else None,  # None: every candidate of the logs
        kernel=args.kernel,
        bandwidth=bandwidth,
        q_column=args.q_column,
        v_column=args.v_column,
        rng=args.seed if args.seed is not None else 0,
        **options,
    )
    report = logs.report
    document = {"logs": args.logs, **result.to_dict()}
    if report is not None:
        document["validation"] = report.to_dict()
    text = result.summary()
    if report is not None and report.rows_rejected:
        text = f"{report}\n\n{text}"
    if args.report is not None:
        path = _side_report(
            args,
            f"Continuous actions from {Path(args.logs).name}",
            logs.n,
            continuous=result,
            validation=report,
        )
        document["report"] = str(path)
        text += f"\n\nreport written to {path}"
    return _Outcome(document, text)


def _cmd_slates(args: argparse.Namespace) -> _Outcome:
    """Evaluate candidate rankings from slate logs (:func:`ope.evaluate_slates`)."""
    import numpy as np

    from ope.io import read_table
    from ope.slate_evaluation import evaluate_slates
    from ope.slates import candidate_columns, plackett_luce_from_table, slate_logs

    chosen = _candidate_names(
        args, "slates", "target__/target_prefix__/target_slate__<name> columns, or --scores"
    )
    files: dict[str, str] = {}
    for spec in args.scores or ():  # a loop over the flag's values
        name, sep, path = spec.partition("=")
        name = name.strip()
        if not (sep and name and path):
            raise _UsageError(
                f"argument --scores: NAME=FILE with a name and a file; got {spec!r}.",
                flag="--scores",
            )
        if name in files:
            raise _UsageError(f"argument --scores: {name!r} is named twice.", flag="--scores")
        files[name] = path
    if args.position_base < 0:
        raise _UsageError(
            f"argument --position-base: must be 0 or more; got {args.position_base}.",
            flag="--position-base",
        )
    table = read_table(args.logs, what="slate logs")
    logs = slate_logs(
        table,
        mapping=_parse_mapping(args.mapping),
        position_base=args.position_base,
        policies=chosen or None,  # the other candidates' columns are not read
    )
    in_columns = list(candidate_columns(table.column_names))
    both = sorted(set(files) & set(in_columns))
    if both:
        raise _UsageError(
            f"argument --scores: {both[0]!r} is also a candidate of the logs' columns; give it "
            "once, under another name.",
            flag="--scores",
        )
    known = [*in_columns, *files]
    if not known:
        raise SchemaError(
            "no candidate: the logs have no target__<name>, target_prefix__<name> or "
            "target_slate__<name> column, and no --scores NAME=FILE was given."
        )
    unknown = [p for p in chosen if p not in known]
    if unknown:
        raise _UsageError(
            f"argument --policy: no candidate {unknown[0]!r}; the candidates are "
            f"{', '.join(map(repr, known))} (the logs' columns and --scores).",
            flag="--policy",
        )
    candidates = {}
    for name, path in files.items():  # a loop over the --scores files
        spec = f"--scores {name}={path}"
        table = read_table(path, what=f"scores table ({spec})")
        try:
            n_ctx = None if logs.context is None else int(logs.context.max()) + 1
            policy = plackett_luce_from_table(table, logs.slate_size, n_contexts=n_ctx)
        except (ParameterError, SchemaError, ValidationError) as exc:
            raise ValidationError(f"{spec}: {exc}") from None
        if logs.context is None:
            if policy.n_contexts > 1:
                raise ValidationError(
                    f"{spec}: the table scores items per context, and the logs have no "
                    "'context' column to say which context each slate was shown in; add one "
                    "(or --mapping context=COLUMN), or give one score per item."
                )
            logs = dataclasses.replace(logs, context=np.zeros(logs.n, dtype=np.int64))
        elif int(logs.context.max()) >= policy.n_contexts:
            raise ValidationError(
                f"{spec}: the logs' contexts run to {int(logs.context.max())}, and the table "
                f"scores {policy.n_contexts} contexts (0 to {policy.n_contexts - 1})."
            )
        if int(logs.item.max()) >= policy.n_items:
            raise ValidationError(
                f"{spec}: the logs show items up to {int(logs.item.max())}, and the table "
                f"scores {policy.n_items} items (0 to {policy.n_items - 1}); give every logged "
                "item a score."
            )
        candidates[name] = policy
    result = evaluate_slates(
        logs,
        candidates,
        policies=chosen or None,
        estimators=args.estimator,
        cascade_model=args.cascade_model,
        product_logging=args.product_logging,
        ci=args.ci,
        confidence_level=args.confidence_level,
        rng=args.seed,
    )
    document = {"logs": args.logs, **result.to_dict()}
    text = result.summary()
    if args.report is not None:
        path = _side_report(args, f"Slates from {Path(args.logs).name}", logs.n, slates=result)
        document["report"] = str(path)
        text += f"\n\nreport written to {path}"
    return _Outcome(document, text)


_COMMANDS: Final[dict[str, Callable[[argparse.Namespace], _Outcome]]] = {
    "validate": _cmd_validate,
    "evaluate": _cmd_evaluate,
    "diagnose": _cmd_diagnose,
    "learn": _cmd_learn,
    "paired": _cmd_paired,
    "import": _cmd_import,
    "report": _cmd_report,
    "action-table": _cmd_action_table,
    "demo": _cmd_demo,
    "tune": _cmd_tune,
    "monitor": _cmd_monitor,
    "sequences": _cmd_sequences,
    "continuous": _cmd_continuous,
    "slates": _cmd_slates,
}


def _entry() -> None:  # pragma: no cover - exercised through the console script
    raise SystemExit(main())


if __name__ == "__main__":  # pragma: no cover
    _entry()
