"""The boundary: everything a user hands farm is read here.

Study files and their includes, results files, command-line options (tracking URIs, Ray
addresses, sweep ids, names, numbers) and the environment variables farm reads. Each reader
either returns a value farm can use as it is, or raises one `UserError` naming the file or
option, the key where known, and the reason in the user's terms: whatever the library beneath
it raised (a decoder, a parser, recursion, a size, pydantic) never reaches the user as a
traceback.

What farm accepts (the README's "Bad input" says the same):
- text files are UTF-8, with or without a byte-order mark; a UTF-16/32 or Latin-1 file is
  refused with the reason and the offending byte's line and column;
- a path where a file is expected is a regular file (not a directory, FIFO, device or socket),
  at most `STUDY_MAX_BYTES` for a study or include, `RESULTS_MAX_BYTES` for a results file;
- YAML and JSON nest at most `MAX_DEPTH` levels; YAML anchors may be reused, but a document
  expands (aliases followed) to at most `YAML_MAX_NODES` nodes, and an alias never contains
  itself;
- every number is finite (no .inf, .nan, NaN or Infinity) and fits a signed 64-bit integer
  where it is whole;
- tracking URIs and Ray addresses take the forms listed in `TRACKING_FORMS` and
  `RAY_ADDRESS_FORMS`.

Pure: no ray or mlflow import here (the CLI runs these checks before either is loaded).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from farm.errors import UserError
# The files' readers live in farm/input_files.py; every name stays importable from here, the one boundary.
from farm.input_files import (
    _CONTROL as _CONTROL, _SURROGATE as _SURROGATE, DATASET_MAX_BYTES as DATASET_MAX_BYTES, INT_MAX as INT_MAX,
    MAX_DEPTH as MAX_DEPTH, QUOTE_CHARS as QUOTE_CHARS, RESULTS_MAX_BYTES as RESULTS_MAX_BYTES,
    STUDY_MAX_BYTES as STUDY_MAX_BYTES, YAML_MAX_NODES as YAML_MAX_NODES, check_values as check_values,
    decode_text as decode_text, load_json as load_json, load_yaml as load_yaml, quoted as quoted,
    read_bytes as read_bytes, read_json_file as read_json_file, read_text as read_text,
    read_yaml_file as read_yaml_file,
)

MAX_RUNS = 1_000_000  # --run-budget, --repeats: far beyond any sweep a cluster finishes

TRACKING_FORMS = "sqlite:///PATH or http(s)://HOST[:PORT]"
RAY_ADDRESS_FORMS = "HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto"



# --------------------------------------------------------------------------------------
# command-line options and environment variables

MAX_OPTION_CHARS = 2048  # a URI, address or path on the command line; keeps every error line short


def one_line(value: str, *, option: str, what: str) -> str:
    """A value that must be one line of text (a name, a path): no control characters, no lone
    surrogates (text that cannot be written as UTF-8, e.g. from a mis-decoded file name)."""
    if _CONTROL.search(value) or _SURROGATE.search(value):
        hint = "; a file's text where its path belongs?" if "\n" in value and what == "a file path" else ""
        raise UserError(f"expected {what} of one line, got {quoted(value)} (control characters or invalid text{hint})",
                        key=option)
    return value


def _too_long(value: str, option: str) -> None:
    if len(value) > MAX_OPTION_CHARS:
        raise UserError(f"expected at most {MAX_OPTION_CHARS} characters, got {len(value)}", key=option)


def command_option(value: str, *, option: str, max_len: int = 8192) -> str:
    """A serve command or a trial's name (`--from`): read as a shell reads a pasted command, its
    backslash-newline continuations joined and the line end a paste brings dropped; then one line of
    at most `max_len` characters."""
    return text_option(joined_continuations(value).strip(), option=option, what="a command or a trial",
                       max_len=max_len)


def text_option(value: str, *, option: str, what: str = "a name", max_len: int = 256) -> str:
    """A name given on the command line (grid, experiment, baseline): non-empty, one line."""
    if not value or not value.strip():
        raise UserError(f"expected {what}, got an empty value", key=option)
    one_line(value, option=option, what=what)
    if len(value) > max_len:
        raise UserError(f"expected {what} of at most {max_len} characters, got {len(value)}", key=option)
    return value


def joined_continuations(command: str) -> str:
    """`command` with its backslash-newline continuations removed, as a POSIX shell removes them:
    outside quotes and inside double quotes, not inside single quotes (a pasted multi-line command
    is one command; `\\r\\n` line ends too)."""
    out: list[str] = []
    i, quote, n = 0, "", len(command)
    while i < n:
        c = command[i]
        if quote == "'":
            quote = "" if c == "'" else quote
            out.append(c)
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            nxt = command[i + 1]
            if nxt == "\n":
                i += 2
                continue
            if nxt == "\r" and command[i + 2 : i + 3] == "\n":
                i += 3
                continue
            out.append(c + nxt)
            i += 2
            continue
        if c in "'\"" and (not quote or quote == c):
            quote = "" if quote else c
        out.append(c)
        i += 1
    return "".join(out)


def file_path(value: str, *, option: str) -> str:
    """A file named on the command line (--config, --results): a path of one line, not the file's text."""
    if not value or not value.strip():
        raise UserError("expected a file, got an empty value", key=option)
    _too_long(value, option)
    return one_line(value, option=option, what="a file path")


# MLflow's own rule for run ids (a sweep id is its parent run's id); keeps quotes and spaces out
# of the filter strings farm builds from it.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,255}")


def sweep_id(value: str, *, option: str = "SWEEP_ID") -> str:
    if not _RUN_ID.fullmatch(value or ""):
        raise UserError(f"{quoted(value or '')} is not a sweep id (the run id farm printed: letters, digits, - and _)",
                        key=option)
    return value


# A name a user gives that farm puts into a file or folder name (a profile's guidellm reports
# `<profile>-r<repeat>.json` in the trial's folder, a capacity plot `capacity_<profile>.png` in
# the report's folder) or that names a sweep where one lands (study, grid, trial, experiment):
# one portable path component, so that no name reaches outside the folder it is put in (`../x`,
# `/abs`, `a/b`, `..`), hides (a leading dot), reads as an option (a leading dash) or overflows a
# file name's 255 bytes with farm's suffixes.
SAFE_NAME_MAX = 100
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,%d}" % (SAFE_NAME_MAX - 1))
SAFE_NAME_RULE = f"letters, digits, '.', '_' and '-', not starting with '.' or '-', at most {SAFE_NAME_MAX} characters"


def safe_name_problem(value: Any, what: str = "name") -> str | None:
    """Why `value` cannot be a name farm puts in a path (`SAFE_NAME_RULE`), or None."""
    if isinstance(value, str) and _SAFE_NAME.fullmatch(value):
        return None
    if not isinstance(value, str):
        got = f"a {type(value).__name__}"
    elif len(value) > SAFE_NAME_MAX:
        got = f"{quoted(value)} ({len(value):,} characters)"
    else:
        got = quoted(value) if value else "an empty name"
    return f"{got} is not a {what} farm can put in a file or folder name ({SAFE_NAME_RULE})"


def safe_name_option(value: str, *, option: str) -> str:
    """A name given on the command line that farm puts in a path (`--experiment`)."""
    problem = safe_name_problem(value)
    if problem:
        raise UserError(problem, key=option)
    return value


def whole_number(value: Any, *, option: str, low: int, high: int) -> int:
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise UserError(f"expected a whole number from {low} to {high}, got {str(value)[:40]!r}", key=option)
    if len(text) > 40:
        raise UserError(f"expected a whole number from {low} to {high}, got one of {len(text)} digits", key=option)
    number = int(text)
    if not low <= number <= high:
        raise UserError(f"expected a whole number from {low} to {high}, got {text}", key=option)
    return number


def gpu_hours(value: Any, *, option: str = "--budget") -> float:
    """A positive, finite number of GPU-hours (at most a million)."""
    try:
        number = float(str(value).strip())
    except ValueError:
        raise UserError(f"expected a number of GPU-hours, got {str(value)[:40]!r}", key=option) from None
    if not math.isfinite(number) or number <= 0 or number > 1_000_000:
        raise UserError(f"expected GPU-hours above 0 and at most 1,000,000, got {str(value)[:40]}", key=option)
    return number


PRICE_MAX = 10_000.0  # dollars per GPU-hour: far above any GPU's; a typo past it (2.5e6) is refused
ACCELERATOR_FORM = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # a GPU model as Ray names it (H100, RTX-PRO-6000)


def price_problem(accelerator: str, value: Any) -> str | None:
    """Why `accelerator: value` is no price per GPU-hour (the study's `prices` and `--price` alike), or None."""
    if not re.fullmatch(ACCELERATOR_FORM, accelerator):
        return f"expected an accelerator type as Ray names it (H100, H200, A100), got {accelerator[:40]!r}"
    try:
        number = math.nan if isinstance(value, bool) else float(str(value).strip())
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0 or number > PRICE_MAX:
        return f"expected dollars per GPU-hour above 0 and at most {PRICE_MAX:,.0f}, got {str(value)[:40]!r}"
    return None


def price(value: str, *, option: str = "--price") -> tuple[str, float]:
    """`H100=2.5` -> ("H100", 2.5): dollars per GPU-hour of one accelerator type; one line naming the option if not."""
    accelerator, sep, number = str(value).strip().partition("=")
    if not sep or not accelerator.strip():
        raise UserError(f"expected ACCELERATOR=DOLLARS_PER_GPU_HOUR (e.g. H100=2.5), got {str(value)[:40]!r}", key=option)
    problem = price_problem(accelerator.strip(), number)
    if problem:
        raise UserError(problem, key=option)
    return accelerator.strip(), float(number)


def repeats(value: Any, *, option: str = "--repeats") -> int | str:
    if str(value).strip().lower() == "auto":
        return "auto"
    return whole_number(value, option=option, low=1, high=MAX_RUNS)


def _split(value: str, option: str, *, shown: str | None = None, what: str = "a valid URL"):
    """urlsplit, whose ValueError (an unclosed IPv6 bracket, a port out of range) becomes the
    option's error; the port is read here so that no later `.port` raises."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise UserError(f"'{shown or value}' is not {what} ({exc})", key=option) from None
    return parts, port


def _check_host(host: str | None, value: str, option: str, forms: str) -> str:
    if not host:
        raise UserError(f"{quoted(value or '', 200)} names no host (expected {forms})", key=option)
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?", host) or len(host) > 253:
        raise UserError(f"{quoted(host, 200)} is not a host name or IP address (in {quoted(value, 200)})", key=option)
    return host


def tracking_uri(value: str, *, option: str = "--tracking-uri") -> str:
    """The MLflow stores farm checks before a sweep and reads from: a SQLite file or a tracking
    server. Anything else MLflow might take (databricks, a database URL) is refused: farm could
    not check it before starting, and a cluster needs a server anyway (put an MLflow server in
    front of such a store)."""
    if not value or not value.strip():
        raise UserError(f"expected a tracking URI ({TRACKING_FORMS}), got an empty value", key=option)
    _too_long(value, option)
    if _CONTROL.search(value) or _SURROGATE.search(value):
        raise UserError(f"expected a tracking URI ({TRACKING_FORMS}), got {quoted(value)} (control characters)",
                        key=option)
    parts, port = _split(value, option)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        if not value.startswith("sqlite:///") or value[len("sqlite:///"):] in ("", ":memory:"):
            raise UserError(f"'{value}' names no database file (expected sqlite:///PATH)", key=option)
        return value
    if scheme in ("http", "https"):
        _check_host(parts.hostname, value, option, TRACKING_FORMS)
        if parts.username is not None or parts.password is not None:
            raise UserError("credentials do not go in the URI (MLflow would record them): set "
                            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD", key=option)
        if port == 0:
            raise UserError(f"'{value}': port 0 is not a server's port", key=option)
        return value
    if scheme == "file" or (scheme == "" and "://" not in value) or (len(scheme) == 1 and value[1:2] == ":"):
        # MLflow 3 refuses its file store unless told to (MLFLOW_ALLOW_FILE_STORE); farm keeps to
        # the stores MLflow maintains.
        raise UserError(f"'{value}' is a file store, which MLflow 3 no longer opens: use sqlite:///PATH "
                        "(`mlflow migrate-filestore` converts an old one) or http(s)://HOST:PORT", key=option)
    raise UserError(f"unsupported tracking URI scheme '{parts.scheme}' in '{value}' (farm takes {TRACKING_FORMS}; "
                    "for another MLflow store, run an MLflow server in front of it)", key=option)


def ray_address(value: str, *, option: str = "--address") -> str:
    """`auto` (the cluster of this machine), `HOST:PORT` (its GCS), `ray://HOST:PORT` (Ray
    Client), or `http(s)://HEAD[:PORT]` (the Jobs API, the dashboard's port)."""
    if not value or not value.strip():
        raise UserError(f"expected a Ray address ({RAY_ADDRESS_FORMS}), got an empty value", key=option)
    _too_long(value, option)
    if value == "auto":
        return value
    bad = f"{quoted(value, 200)} is not a Ray address ({RAY_ADDRESS_FORMS})"
    if _CONTROL.search(value) or _SURROGATE.search(value) or " " in value:
        raise UserError(bad, key=option)
    what = f"a Ray address ({RAY_ADDRESS_FORMS})"
    if "://" not in value:
        parts, port = _split(f"tcp://{value}", option, shown=value, what=what)
        scheme = ""
    else:
        parts, port = _split(value, option, what=what)
        scheme = parts.scheme.lower()
        if scheme not in ("ray", "http", "https"):
            raise UserError(bad, key=option)
    if scheme in ("", "ray") and (parts.path not in ("", "/") or parts.query or parts.fragment):
        raise UserError(bad, key=option)
    if parts.username is not None or parts.password is not None:
        raise UserError(f"{bad}: credentials do not go in the address (the cluster token does: "
                        "RAY_AUTH_TOKEN or ~/.ray/auth_token)", key=option)
    _check_host(parts.hostname, value, option, RAY_ADDRESS_FORMS)
    if port is None and scheme in ("", "ray"):
        raise UserError(bad, key=option)
    if port == 0:
        raise UserError(f"{bad}: port 0 is not a server's port", key=option)
    return value


def address_host_port(address: str) -> tuple[str, int]:
    """Host and port of an address `ray_address` accepted (not `auto`)."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    port = parts.port
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return parts.hostname or "", port


def env_tracking_uri() -> str | None:
    """MLFLOW_TRACKING_URI, when set: read by farm (the default store) and by MLflow itself."""
    value = os.environ.get("MLFLOW_TRACKING_URI")
    return tracking_uri(value, option="MLFLOW_TRACKING_URI") if value else None


def tracking_source(given: str | None) -> str:
    """Where the tracking URI a command uses came from, as its errors name it: the option, the
    environment variable MLflow reads, or farm's default (a store the user never named)."""
    if given:
        return "--tracking-uri"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return "MLFLOW_TRACKING_URI"
    return "the default store (no --tracking-uri or MLFLOW_TRACKING_URI given)"


def env_ray_address() -> str | None:
    """RAY_ADDRESS, when set: the cluster `farm sweep` and `farm status` use when no `--address`
    is given (as Ray's own commands do)."""
    value = os.environ.get("RAY_ADDRESS")
    return ray_address(value, option="RAY_ADDRESS") if value else None


def ray_address_source(given: str | None) -> str:
    """Where the Ray address a command uses came from, as its errors name it."""
    return "--address" if given else "RAY_ADDRESS"


TOKEN_MAX_BYTES = 4096


def _check_token(token: str, source: str, option: str) -> None:
    """A token travels in an HTTP header: one line of printable ASCII. Never shown in the error."""
    if not token:
        raise UserError(f"{source} is empty", key=option)
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise UserError(f"{source} holds a token with spaces, line breaks or non-ASCII characters inside it "
                        "(Ray sends it in an HTTP header: copy it again with `ray get-auth-token`)", key=option)


def ray_token_source() -> str | None:
    """Where Ray reads this machine's cluster token from, in Ray's order (RAY_AUTH_TOKEN, the file
    RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token), as an error names it; None when there is none.
    Never the token itself."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH ({os.environ['RAY_AUTH_TOKEN_PATH']})"
    return "~/.ray/auth_token" if Path("~/.ray/auth_token").expanduser().exists() else None


RAY_TOKEN_HOW = "set RAY_AUTH_TOKEN or copy ~/.ray/auth_token from the head (`ray get-auth-token` there)"
RAY_TOKEN_MISSING = f"requires a token: {RAY_TOKEN_HOW}"


def check_ray_token_sources(option: str) -> None:
    """The Ray cluster token wherever this machine keeps it: RAY_AUTH_TOKEN, the file named by
    RAY_AUTH_TOKEN_PATH (Ray aborts the whole process on an unreadable one), ~/.ray/auth_token."""
    value = os.environ.get("RAY_AUTH_TOKEN")
    if value is not None:
        _check_token(value, "RAY_AUTH_TOKEN", option)
        return
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    source = "RAY_AUTH_TOKEN_PATH" if path else "~/.ray/auth_token"
    token_file = Path(path or "~/.ray/auth_token").expanduser()
    if not path and not token_file.exists():
        return  # no token on this machine: fine for a cluster without token authentication
    try:
        text = read_text(token_file, what="token file", max_bytes=TOKEN_MAX_BYTES)
    except UserError as exc:
        raise UserError(f"{source} names {token_file}, which cannot be used: {exc.reason}", key=option) from None
    _check_token(text.strip(), f"{source} ({token_file})", option)  # Ray strips a file's line end


def env_directory(name: str) -> None:
    """A variable naming a directory farm writes into (FARM_CACHE_DIR): if it names something
    that exists, that is a directory; and it is usable here (`usable_directory`)."""
    value = os.environ.get(name)
    if not value:
        return
    path = _not_a_file(value, key=name)
    if path is not None:
        raise UserError(f"{path} is not a directory", key=name)
    usable_directory(value, key=name)


def usable_directory(value: str, *, key: str) -> None:
    """A directory farm will write into on this machine can be: it exists and is writable, or
    the nearest part of its path that exists is a writable directory it can be made in. Checked
    without writing anything (no directory is made to find out), so a refusal leaves no trace;
    made later, when the sweep or command writes there."""
    try:
        path = Path(value).expanduser().absolute()
        nearest = path
        while not os.path.lexists(nearest) and nearest != nearest.parent:
            nearest = nearest.parent
        is_dir = nearest.is_dir()
    except (OSError, ValueError):
        raise UserError(f"{quoted(value)} is not a usable directory path", key=key) from None
    if nearest == path:
        if not is_dir:
            raise UserError(f"{value} exists and is not a directory", key=key)
        if not os.access(path, os.W_OK | os.X_OK):
            raise UserError(f"{value} is not writable", key=key)
        return
    if not is_dir:
        raise UserError(f"{value} cannot be made: {nearest} on its path is a file, not a directory", key=key)
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise UserError(f"{value} cannot be made: {nearest} is not writable", key=key)


def _not_a_file(value: str, *, key: str) -> Path | None:
    """The path `value` names when it exists and is not a directory (None when it is fine)."""
    try:
        path = Path(value).expanduser()
        exists, is_dir = path.exists(), path.is_dir()
    except (OSError, ValueError):
        raise UserError(f"'{value}' is not a usable directory path", key=key) from None
    return path if exists and not is_dir else None


def directory_option(value: str, *, option: str) -> str:
    """A directory farm writes into, named on the command line: given, one line, and not an
    existing file. Where it is is not checked here: `--workdir` may be a path on a cluster's nodes."""
    if not value or not value.strip():
        raise UserError("expected a directory, got an empty value", key=option)
    _too_long(value, option)
    one_line(value, option=option, what="a directory path")
    if _not_a_file(value, key=option) is not None:
        raise UserError(f"{value} exists and is not a directory", key=option)
    return value


def output_directory(value: str, *, option: str) -> str:
    """A directory farm writes into on this machine (--out, --plots, --store): `directory_option`,
    and usable before anything starts (`usable_directory`)."""
    directory_option(value, option=option)
    usable_directory(value, key=option)
    return value


def host_option(value: str, *, option: str = "--host") -> str:
    """An address to bind: an IP address or a host name."""
    return _check_host(value.strip("[]") if value else value, value, option, "an IP address or host name")
