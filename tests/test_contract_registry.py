"""The registry of public entry points is complete, and every entry keeps the hostile-input
contract (:func:`ope.testing.check_entry_point_contract`).

Completeness walks the ``__all__`` of ``ope`` and its public namespaces, the public methods of
public classes, and the subcommands of the command line's parser: a public callable that is not
in :data:`ope._entrypoints.REGISTERED` fails the test, by name.
"""

from __future__ import annotations

import pytest

import ope
import ope.policies
from ope import _entrypoints as registry
from ope._valid_calls import engines, known_broken
from ope.testing import (
    CONTRACT_EXAMPLES_SLOW,
    CONTRACT_SAMPLE_FAST,
    check_entry_point_contract,
)


def test_every_public_entry_point_is_registered():
    assert registry.unregistered() == []


def test_a_new_public_function_is_named_by_the_completeness_check(monkeypatch):
    def rank_everything(logs, *, confidence_level=0.95):
        return None

    monkeypatch.setattr(ope.policies, "rank_everything", rank_everything, raising=False)
    monkeypatch.setattr(ope.policies, "__all__", [*ope.policies.__all__, "rank_everything"])
    assert registry.unregistered() == ["ope.policies.rank_everything"]


def test_a_new_method_of_a_public_class_is_named(monkeypatch):
    def shrink(self, factor):
        return self

    monkeypatch.setattr(ope.DM, "shrink", shrink, raising=False)
    assert registry.unregistered() == ["ope.DM.shrink"]


def test_a_new_cli_subcommand_is_named(monkeypatch):
    monkeypatch.setattr(registry, "CLI_SUBCOMMANDS", registry.CLI_SUBCOMMANDS[:-1])
    assert registry.unregistered() == ["ope demo"]


def test_every_argument_has_a_glossary_term():
    for entry in [*registry.entries(), *registry.cli_entries()]:
        assert all(entry.terms.values()), entry.name
    assert registry.term_of("confidence_level") == "confidence_level"
    assert registry.term_of("n_resamples") == "count"
    assert registry.term_of("weight_column") == "column"
    assert registry.term_of("something_new") == "object"


def test_every_entry_taking_input_has_a_minimal_valid_call():
    """Without one the harness cannot vary its arguments: a new entry point writes its call in
    its area of ope._valid_calls (or says in NOT_USER_INPUT why it takes no input)."""
    missing = [e.name for e in registry.entries() if e.valid is None and e.skip is None]
    missing += [e.name for e in registry.cli_entries() if e.valid is None]
    assert missing == []


def test_valid_calls_and_known_violations_name_registered_entries():
    from ope._valid_calls import cli_runs, valid_calls

    assert set(valid_calls()) <= set(registry.REGISTERED)
    assert set(cli_runs()) <= set(registry.CLI_SUBCOMMANDS)
    arguments = {
        f"{e.name}::{a}" for e in [*registry.entries(), *registry.cli_entries()] for a in e.terms
    }
    assert set(KNOWN_BROKEN) <= arguments


#: Entries whose valid call starts an engine (Spark's JVM) -> why it cannot run here, or None.
ENGINES = engines()


def _engine_marks(name: str) -> list:
    """Slow, and skipped with the reason when the engine is missing."""
    if name not in ENGINES:
        return []
    why = ENGINES[name]()
    return [pytest.mark.slow] + ([pytest.mark.skip(reason=why)] if why else [])


# the valid calls run on a few dozen planted rows: ope's small-sample and overlap warnings are
# expected there; what this test checks is that each call succeeds
@pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")
def test_each_minimal_valid_call_succeeds(tmp_path):
    for entry in registry.entries():
        if entry.valid is not None and entry.name not in ENGINES:
            call = entry.valid(tmp_path)
            call.target(*call.args, **call.kwargs)


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=_engine_marks(name)) for name in sorted(ENGINES)]
)
@pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")
def test_each_engine_valid_call_succeeds(tmp_path, name):
    (entry,) = [e for e in registry.entries() if e.name == name]
    call = entry.valid(tmp_path)
    call.target(*call.args, **call.kwargs)


def test_each_cli_valid_run_exits_0_with_one_document(tmp_path):
    import contextlib
    import io
    import json

    from ope.cli import main

    ran = []
    for entry in registry.cli_entries():
        if entry.valid is None:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main([*entry.valid(tmp_path), "--json"])
        assert (code, json.loads(out.getvalue())["ok"]) == (0, True), entry.name
        ran.append(entry.name)
    assert ran == [f"ope {sub}" for sub in registry.CLI_SUBCOMMANDS]


# ============================================================================================
# the harness over every registered entry point
# ============================================================================================
#: (entry, argument) pairs whose contract is broken today, by area (ope._valid_calls): each a
#: bug to fix at its root; strict, so that a fix asks for its removal there.
KNOWN_BROKEN = known_broken()

#: Terms whose values take no hostile value from a catalogue (switches).
_NO_VALUES = ("flag",)


def _cases(slow: bool) -> list:
    cases = []
    for entry in [*registry.entries(), *registry.cli_entries()]:
        for argument, term in entry.terms.items():
            if term in _NO_VALUES and entry.cli:
                continue
            key = f"{entry.name}::{argument}"
            marks = _engine_marks(entry.name) or ([pytest.mark.slow] if slow else [])
            if slow and entry.name in ENGINES:  # seconds per call: the sampled run covers it
                marks.append(pytest.mark.skip(reason="each call runs Spark jobs; see the fast run"))
            if entry.skip is not None:
                marks.append(pytest.mark.skip(reason=f"takes no user input: {entry.skip}"))
            elif entry.valid is None:
                marks.append(pytest.mark.skip(reason="no minimal valid call registered yet"))
            elif key in KNOWN_BROKEN and slow:  # shown by the default suite; some hang
                marks.append(pytest.mark.skip(reason=f"known broken: {KNOWN_BROKEN[key]}"))
            elif key in KNOWN_BROKEN:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_BROKEN[key]))
            cases.append(pytest.param(entry, argument, id=key, marks=marks))
    return cases


@pytest.mark.parametrize("entry, argument", _cases(slow=False))
def test_hostile_values_keep_the_contract(entry, argument):
    """Every argument of every entry, a sample of its term's catalogue and one draw; a known
    violation runs the whole catalogue so that its strict xfail does not depend on the sample."""
    known = f"{entry.name}::{argument}" in KNOWN_BROKEN
    check_entry_point_contract(
        entry, argument, max_examples=1, catalogue_sample=None if known else CONTRACT_SAMPLE_FAST
    )


@pytest.mark.parametrize("entry, argument", _cases(slow=True))
def test_hostile_values_keep_the_contract_larger_budget(entry, argument):
    check_entry_point_contract(entry, argument, max_examples=CONTRACT_EXAMPLES_SLOW)
