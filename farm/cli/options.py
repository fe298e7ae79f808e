"""Click option types that read their value through `farm.inputs`, the one boundary.

A bad value raises the boundary's `UserError` (one line naming the option, exit 2, from the
`farm` group) rather than click's usage block, so an option and a study key fail alike.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from farm import inputs


class Checked(click.ParamType):
    """A value read by `reader(value, option=...)`; `reader` raises `UserError`."""

    def __init__(self, name: str, reader: Callable[..., Any]):
        self.name = name
        self._reader = reader

    def convert(self, value, param, ctx):
        if not isinstance(value, str):  # a default given as a value already
            return value
        option = param.opts[0] if param is not None and param.opts else self.name
        if param is not None and param.param_type_name == "argument":
            option = param.human_readable_name
        return self._reader(value, option=option)


def _whole(low: int, high: int):
    def read(value: str, *, option: str) -> int:
        return inputs.whole_number(value, option=option, low=low, high=high)
    return read


def _count(high: int):
    return _whole(1, high)


_port = _whole(1, 65535)


TRACKING_URI = Checked("tracking_uri", inputs.tracking_uri)
RAY_ADDRESS = Checked("ray_address", inputs.ray_address)
SWEEP_ID = Checked("sweep_id", inputs.sweep_id)
NAME = Checked("name", inputs.text_option)
# --experiment: a name farm may put in a path (farm/inputs.py SAFE_NAME_RULE)
SAFE_NAME = Checked("name", inputs.safe_name_option)
# A serve command or a trial's name: continuations joined, then one line of a command line's length.
COMMAND = Checked("command", inputs.command_option)
REPEATS = Checked("repeats", inputs.repeats)
GPU_HOURS = Checked("gpu_hours", inputs.gpu_hours)
RUNS = Checked("runs", _count(inputs.MAX_RUNS))
WORKERS = Checked("workers", _count(64))
# `farm server --auth-cache-s`: 0 (MLflow's default: every request checks the password hash) to an hour
AUTH_CACHE_S = Checked("auth_cache_s", _whole(0, 3600))
PORT = Checked("port", _port)
DIRECTORY = Checked("directory", inputs.output_directory)
# --workdir: a path on the nodes (checked here only where the sweep runs on this machine)
NODE_DIRECTORY = Checked("directory", inputs.directory_option)
HOST = Checked("host", inputs.host_option)
# --price H100=2.5: dollars per GPU-hour of one accelerator type (repeatable; over the study's `prices`)
PRICE = Checked("price", inputs.price)
# --wait-lease: seconds a resume waits for the sweep's other driver, bounded (a day)
LEASE_WAIT_S = Checked("seconds", _whole(1, 86400))


def price_option(f):
    return click.option("--price", "prices", type=PRICE, multiple=True, metavar="ACCELERATOR=USD",
                        help="Dollars per GPU-hour of an accelerator type as Ray names it (H100=2.5; repeatable): "
                             "the report prices each trial's million tokens and the sweep's GPU-hours at it; over "
                             "the study's `prices`. No lookups: without a price, costs are not computed.")(f)


PICKS = ("best", "stepwise")


def pick_option(f):
    """How a report picks its recommendation from what was measured (`farm report`, `farm analyze`):
    its own word, apart from `farm sweep --strategy` (which search runs). `--strategy`, its name
    before, is still read here, hidden from the help."""
    f = click.option("--strategy", "legacy_pick", type=click.Choice(PICKS), default=None, hidden=True)(f)
    return click.option("--pick", "pick", type=click.Choice(PICKS), default=None,
                        help="best (default): the global best of what was measured, or the simplest trial proven "
                             "equivalent to it; stepwise: replay the seed's method along the study's ordered steps, "
                             "keeping a step only if it raises the deciding number.")(f)


def picked(pick: str | None, legacy_pick: str | None) -> str:
    """The pick asked for (`--pick`, or `--strategy` as before); one line when the two disagree."""
    if pick and legacy_pick and pick != legacy_pick:
        raise inputs.UserError(f"--pick {pick} and --strategy {legacy_pick} ask for two picks: --strategy is "
                               f"--pick's former name; give --pick alone", key="--pick")
    return pick or legacy_pick or "best"


def with_prices(study, prices: tuple[tuple[str, float], ...]):
    """The study with `--price` over its own `prices` (which the sweep stores and its report reads)."""
    if not prices:
        return study
    return study.model_copy(update={"prices": {**(study.prices or {}), **dict(prices)}})


def _accelerator(value: str, *, option: str) -> str:
    """A GPU model as Ray names it (the study's `accelerator_type` check), or `auto`."""
    value = inputs.text_option(value, option=option, what="a GPU model", max_len=100)
    from farm.study.sections import check_accelerator  # pydantic: only when the option is given, not for --help

    try:
        return check_accelerator(value)
    except ValueError as exc:
        raise inputs.UserError(str(exc), key=option) from None


ACCELERATOR = Checked("accelerator", _accelerator)
FILE = Checked("file", inputs.file_path)
# --allowed-hosts: a comma-separated list handed to MLflow's server as one argument: one line.
HOST_LIST = Checked("hosts", lambda value, *, option: inputs.text_option(value, option=option, what="a list of hosts",
                                                                        max_len=inputs.MAX_OPTION_CHARS))


def echo_user_error(exc: inputs.UserError) -> None:
    click.echo(f"error: {exc.line()}", err=True)


class OneLineErrors(click.Command):
    """A command run on its own (`python -m farm.cli.analyze`): a `UserError`, from an
    option or the command's body, is the same one line and exit 2 as under the `farm` group."""

    def main(self, *args, **kwargs):
        try:
            return super().main(*args, **kwargs)
        except inputs.UserError as exc:
            echo_user_error(exc)
            raise SystemExit(exc.exit_code) from None


class _Strategies(click.Choice):
    """`farm sweep --strategy`: the strategies the search registry holds (farm/run/search.py `choices`),
    read when the option is: a strategy registered in its own module is a choice, the CLI unedited."""

    name = "choice"

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self):
        from farm.run import search  # the registry's modules: no mlflow, no ray

        return tuple(search.choices())

    @choices.setter
    def choices(self, value) -> None:
        pass


STRATEGY = _Strategies()
