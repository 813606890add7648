"""Names are shown, never obeyed: control, bidi and XML-illegal characters in column, policy,
segment and file names are escaped visibly on the terminal, in the HTML report and in its SVG
figures, and kept exact in the JSON output."""

from __future__ import annotations

import contextlib
import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ope._format import UNSAFE_CHARACTERS, format_list, format_table, safe_text, wrap_text
from ope.cli import main

UNSAFE = re.compile(f"[{UNSAFE_CHARACTERS}]")
UNSAFE_BUT_NEWLINE = re.compile(f"(?!\\n)[{UNSAFE_CHARACTERS}]")

#: A terminal retitle (OSC ... BEL) and a clear screen (CSI 2J).
RETITLE = "\x1b]0;PWNED\x07\x1b[2J"
#: A right-to-left override, a left-to-right isolate, a NUL and a C1 CSI.
BIDI = "a\u202eb\u2066c\x00d\x9b"
POLICIES = (RETITLE, BIDI)
SEGMENT_COLUMN = "seg\x1b[31m"
SEGMENTS = ("x\x1b[2J", "y\u202e\x00z")


# --------------------------------------------------------------------------------------------
# the one escaping function
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (RETITLE, r"\x1b]0;PWNED\x07\x1b[2J"),
        (BIDI, r"a\u202eb\u2066c\x00d\x9b"),
        ("del\x7f tab\t cr\r nl\n", r"del\x7f tab\x09 cr\x0d nl\x0a"),
        (
            "lrm\u200e rlm\u200f alm\u061c pdi\u2069 lre\u202a ls\u2028",
            r"lrm\u200e rlm\u200f alm\u061c pdi\u2069 lre\u202a ls\u2028",
        ),
        ("surrogate\udc9b nonchar\uffff", r"surrogate\udc9b nonchar\uffff"),
        ("plain café – π/π₀ 日本", "plain café – π/π₀ 日本"),
    ],
)
def test_safe_text_escapes_every_unsafe_character_visibly(raw: str, shown: str) -> None:
    assert safe_text(raw) == shown
    assert safe_text(safe_text(raw)) == shown  # escaping twice changes nothing
    assert UNSAFE.search(safe_text(raw)) is None


def test_safe_text_keeps_newlines_only_when_asked() -> None:
    assert safe_text("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"
    assert safe_text("a\nb") == "a\\x0ab"


def test_the_text_formatters_escape_names() -> None:
    table = "\n".join(format_table(["policy", "value"], [[RETITLE, "0.5"], [BIDI, "0.25"]]))
    assert UNSAFE_BUT_NEWLINE.search(table) is None
    # the column is as wide as the escaped name
    assert table.splitlines()[2] == r"\x1b]0;PWNED\x07\x1b[2J   0.5"
    assert UNSAFE.search("".join(wrap_text(f"by {SEGMENT_COLUMN} and {BIDI}"))) is None
    assert format_list(POLICIES) == [r"\x1b]0;PWNED\x07\x1b[2J, a\u202eb\u2066c\x00d\x9b"]


# --------------------------------------------------------------------------------------------
# through the command line
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    n = 400
    action = rng.integers(0, 2, n)
    columns = {
        "event_id": np.arange(n),
        "action": action,
        "propensity": np.full(n, 0.5),
        "reward": (rng.random(n) < 0.3 + 0.2 * action).astype(float),
        f"target__{RETITLE}": np.where(action == 1, 0.8, 0.2),
        f"target__{BIDI}": np.where(action == 1, 0.3, 0.7),
        SEGMENT_COLUMN: pa.array([SEGMENTS[i] for i in rng.integers(0, 2, n)]),
    }
    folder = tmp_path_factory.mktemp("hostile")
    path = folder / "logs\x1b[2J\u202e.parquet"  # a file name with ESC and RLO
    pq.write_table(pa.table(columns), path)
    return path


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def evaluated(hostile: Path) -> tuple[int, str, str, str]:
    report = hostile.with_name("report.html")
    code, out, err = _run(
        "evaluate",
        str(hostile),
        "--reward-range",
        "0",
        "1",
        "--by",
        SEGMENT_COLUMN,
        "--report",
        str(report),
        "--force",
    )
    return code, out, err, report.read_text(encoding="utf-8")


def test_evaluate_text_shows_names_escaped(evaluated: tuple[int, str, str, str]) -> None:
    code, out, err, _ = evaluated
    assert code == 0, err
    assert UNSAFE_BUT_NEWLINE.search(out) is None
    assert UNSAFE_BUT_NEWLINE.search(err) is None
    assert r"\x1b]0;PWNED\x07\x1b[2J" in out  # the policy, escaped, still readable
    assert r"a\u202eb\u2066c\x00d\x9b" in out
    assert r"seg\x1b[31m" in out and r"x\x1b[2J" in out and r"y\u202e\x00z" in out


def test_json_keeps_names_exact(hostile: Path) -> None:
    code, out, err = _run(
        "evaluate", str(hostile), "--reward-range", "0", "1", "--by", SEGMENT_COLUMN, "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert {e["policy"] for e in doc["estimates"]} == set(POLICIES)
    assert doc["by"] == [SEGMENT_COLUMN]
    assert {(s["column"], s["segment"]) for s in doc["segments"]} == {
        (SEGMENT_COLUMN, s) for s in SEGMENTS
    }


def test_an_error_message_escapes_the_name_it_quotes(hostile: Path) -> None:
    missing = "no\x1b]0;X\x07col\u202e"
    code, out, err = _run("evaluate", str(hostile), "--reward-range", "0", "1", "--by", missing)
    assert code == 65 and out == ""
    assert UNSAFE_BUT_NEWLINE.search(err) is None
    assert r"--by no\x1b]0;X\x07col\u202e: not in the logs" in err
    assert r"target__\x1b]0;PWNED\x07\x1b[2J" in err  # the columns it lists, escaped too
    code, out, _ = _run(
        "evaluate", str(hostile), "--reward-range", "0", "1", "--by", missing, "--json"
    )
    assert code == 65 and missing in json.loads(out)["error"]["message"]  # exact in JSON


# --------------------------------------------------------------------------------------------
# the HTML report and its figures
# --------------------------------------------------------------------------------------------
class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.texts.extend(v for _, v in attrs if v)


def test_the_report_has_no_raw_control_or_bidi_character(
    evaluated: tuple[int, str, str, str],
) -> None:
    page = evaluated[3]
    parser = _Text()
    parser.feed(page)
    texts = "\n".join(parser.texts)
    assert UNSAFE_BUT_NEWLINE.search(texts) is None
    assert UNSAFE_BUT_NEWLINE.search(page) is None  # nor in the markup, as character data
    assert r"\x1b]0;PWNED\x07\x1b[2J" in texts and r"a\u202eb\u2066c\x00d\x9b" in texts
    assert r"y\u202e\x00z" in texts and r"seg\x1b[31m" in texts
    assert r"logs\x1b[2J\u202e.parquet" in texts  # the file name, in the title and source


def test_every_inline_svg_is_well_formed_xml(evaluated: tuple[int, str, str, str]) -> None:
    figures = re.findall(r"<svg\b.*?</svg>", evaluated[3], re.S)
    assert len(figures) >= 5  # forest, differences, split, weights, segments, heatmaps
    labels = []
    for svg in figures:
        root = ET.fromstring(svg)
        labels += ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    shown = "\n".join(labels)
    assert r"\x1b]0;PWNED\x07\x1b[2J" in shown or r"\\x1b]0;PWNED" in shown


# --------------------------------------------------------------------------------------------
# the library's own views: summary() and the notebook HTML
# --------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::ope.OverlapWarning")
def test_summaries_and_notebook_views_escape_names(hostile: Path) -> None:
    import ope

    table = pq.read_table(hostile)
    ev = ope.evaluate(table, estimators=("ips",), reward_range=(0, 1), by=[SEGMENT_COLUMN])
    d = ope.diagnose(table, reward_range=(0, 1), by=[SEGMENT_COLUMN])
    report = str(ope.read_logs(table).report)  # the validation report lists the columns
    for text in (ev.summary(), d.summary(), ev._repr_html_(), d._repr_html_(), report):
        assert UNSAFE_BUT_NEWLINE.search(text) is None
        assert r"\x1b]0;PWNED\x07\x1b[2J" in text
    assert set(ev.table()["policy"]) == set(POLICIES)  # the data keep the names exact
