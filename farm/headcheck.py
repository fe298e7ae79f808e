"""Can the head's `python` run farm? Run on the head, in the job's working directory, by
`farm sweep --address http://...` before it submits the sweep (farm/run/jobs.py).

The sweep's entrypoint is `python -m farm.cli ...` in the uploaded project, so farm's own code
is always this checkout's; what the head's `python` must bring is farm's dependencies in the
ranges pyproject.toml asks for. This prints one `FARM_HEAD_CHECK {json}` line saying which are
missing or of another version. Standard library only and any Python 3: it runs exactly where
farm may not.
"""

import json
import re
import sys

MARK = "FARM_HEAD_CHECK "
MIN_PYTHON = (3, 10)


def _requirements(pyproject: str) -> list:
    """(distribution, specifier) of [project] dependencies, read without tomllib (3.10 lacks it)."""
    block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", pyproject, re.S | re.M)
    out = []
    for item in re.findall(r'"([^"]+)"', block.group(1) if block else ""):
        match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(\[[^\]]*\])?\s*(.*)", item)
        if match:
            out.append((match.group(1), match.group(3).split(";")[0].strip()))
    return out


def _satisfies(version: str, spec: str):
    """True/False, or None where no `packaging` is at hand to compare versions."""
    try:
        from packaging.specifiers import SpecifierSet  # optional: a head's bare python may lack it
    except ImportError:
        try:
            from pip._vendor.packaging.specifiers import SpecifierSet
        except ImportError:
            return None
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except Exception:  # an unparsable local version: say nothing rather than something wrong
        return None


def check(pyproject: str) -> dict:
    report = {"python": sys.executable, "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
              "missing": [], "mismatched": []}
    if tuple(sys.version_info[:2]) < MIN_PYTHON:
        report["too_old"] = "%d.%d" % MIN_PYTHON
    try:
        from importlib import metadata
    except ImportError:  # before 3.8: too old anyway
        return report
    for dist, spec in _requirements(pyproject):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            report["missing"].append(dist)
            continue
        if spec and _satisfies(version, spec) is False:
            report["mismatched"].append("%s %s (farm needs %s)" % (dist, version, spec))
    return report


def main() -> None:
    try:
        with open("pyproject.toml", encoding="utf-8") as fh:
            pyproject = fh.read()
    except OSError:
        pyproject = ""
    print(MARK + json.dumps(check(pyproject)))


if __name__ == "__main__":
    main()
