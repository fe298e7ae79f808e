"""Reading a results file (seed-results.json format, or one a sweep wrote) into `Results`.

The bytes are read under farm's input limits (`farm.inputs`), the object is validated by the
records' parser (`farm.analysis.records`); this module joins the two so that `farm.inputs`
stays below everything that parses what it reads.
"""

from __future__ import annotations

from pathlib import Path

from farm.analysis.records import Results, results_from_data
from farm.inputs import read_json_file


def read_results_file(path: str | Path) -> Results:
    """A results file -> `Results`; a `UserError` names the file and the key."""
    return results_from_data(read_json_file(path, what="results file"), str(path))
