"""Where a store's files are: its SQLite database, and its artifacts once the store has moved.

MLflow records each experiment's artifact root and each run's artifact location as absolute paths
of the machine that created them (`/tmp/farm-h200/store/mlruns/1/<run>/artifacts` on a lent GPU).
A store brought back from a GPU node or a colleague's laptop keeps those paths, and on any other
machine they name nothing. farm reads such a store anyway: a recorded local location that does not
exist is looked for beside the database (`<db dir>/mlruns/...`, where MLflow puts it by default),
and a sweep resumed in a moved store has its locations rewritten once (`relocate`), so that what it
writes next lands beside the database too rather than at the other machine's path.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import urlparse

# MLflow's default artifact roots, relative to where the store was created.
ARTIFACT_ROOTS = ("mlruns", "mlartifacts")


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///...` tracking URI (None for other stores)."""
    if not uri.startswith("sqlite:"):
        return None
    path = uri[len("sqlite:"):]
    path = path[3:] if path.startswith("///") else path.lstrip("/")
    return Path(path.split("?", 1)[0]).expanduser() if path and path != ":memory:" else None


def local_path(artifact_uri: str) -> Path | None:
    """The directory a `file:` (or bare-path) artifact location names; None for a server's store."""
    if not artifact_uri:
        return None
    parsed = urlparse(artifact_uri)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and artifact_uri[1:3] in (":\\", ":/")):
        return Path(artifact_uri)
    return None


def beside_db(uri: str, recorded: Path) -> Path | None:
    """`recorded` (a location of another machine) as it lies beside this store's database: the part
    from the artifact root's folder (`mlruns/1/<run>/artifacts`) on, under the database's folder."""
    db = sqlite_path(uri)
    if db is None:
        return None
    parts = recorded.parts
    # The last `mlruns` (or `mlartifacts`) component: an artifact root's own name. The root must be
    # there; a run that has logged no artifact yet has no folder of its own in it.
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ARTIFACT_ROOTS:
            return db.parent.joinpath(*parts[i:]) if (db.parent / parts[i]).is_dir() else None
    return None


def artifact_dir(uri: str, artifact_uri: str) -> Path | None:
    """A run's artifact directory on this disk: where it was recorded, or beside the database when
    the store has moved; None for a server's store (read through MLflow) or when it is in neither."""
    recorded = local_path(artifact_uri)
    if recorded is None:
        return None
    if recorded.exists():
        return recorded
    return beside_db(uri, recorded)


def moved_locations(uri: str) -> dict[str, str]:
    """Recorded location -> its place beside the database, for every experiment root and run
    location of a SQLite store that is missing where recorded and present beside the database.
    Read-only: the database is opened in read-only mode."""
    db = sqlite_path(uri)
    if db is None or not db.is_file():
        return {}
    out: dict[str, str] = {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = [r[0] for table, column in _LOCATION_COLUMNS
                if _has_column(con, table, column)
                for r in con.execute(f"SELECT {column} FROM {table}")]  # noqa: S608 - fixed names
    finally:
        con.close()
    for recorded in rows:
        path = local_path(recorded or "")
        if path is None or path.exists():
            continue
        moved = beside_db(uri, path)
        if moved is not None and moved != path:  # not yet there (a run with no artifact): already moved
            out[recorded] = str(moved)
    return out


_LOCATION_COLUMNS = (("experiments", "artifact_location"), ("runs", "artifact_uri"),
                     ("logged_models", "artifact_location"))


def _has_column(con: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in con.execute(f"PRAGMA table_info({table})"))


def relocate(uri: str) -> int:
    """Rewrite a moved SQLite store's locations to where they now lie (beside the database), so
    that a resumed sweep writes its new runs there; returns how many locations were rewritten.
    Only for a command that writes the store anyway (`farm sweep --resume`)."""
    moved = moved_locations(uri)
    if not moved:
        return 0
    db = sqlite_path(uri)
    assert db is not None
    con = sqlite3.connect(db)
    try:
        with con:
            for table, column in _LOCATION_COLUMNS:
                if not _has_column(con, table, column):
                    continue
                for old, new in moved.items():
                    con.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (new, old))  # noqa: S608
    finally:
        con.close()
    return len(moved)
