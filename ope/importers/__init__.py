"""Importers: logged-bandit data as it comes, to validated ``BanditLogs``.

- :func:`read_obd`: the Open Bandit Dataset (a campaign folder such as ``random/all`` or its CSV).
- :func:`read_dsjson`: Vowpal Wabbit DSJSON (Decision Service / Personalizer exports), streamed;
  :func:`import_dsjson` writes the same table to parquet chunk by chunk (``ope import dsjson``).
- :func:`from_bandit_feedback` / :func:`to_bandit_feedback`: Open Bandit Pipeline's in-memory
  ``bandit_feedback`` dict.

Every importer parses its source into ope's column names and validates through
:func:`ope.read_logs`; problems only the source format can have are counted under the reasons of
:data:`IMPORT_REJECTION_REASONS`, with source row (line) numbers.
"""

from ope.importers._common import EXCLUDED_REASONS, IMPORT_REJECTION_REASONS
from ope.importers.dsjson import import_dsjson, iter_dsjson, read_dsjson
from ope.importers.feedback import from_bandit_feedback, to_bandit_feedback
from ope.importers.obd import read_obd

__all__ = [
    "read_obd",
    "read_dsjson",
    "iter_dsjson",
    "import_dsjson",
    "from_bandit_feedback",
    "to_bandit_feedback",
    "IMPORT_REJECTION_REASONS",
    "EXCLUDED_REASONS",
]
