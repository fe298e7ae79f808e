"""`farm sweep --dry-run`: every trial's exact command line and what the sweep would cost, the
resume it would continue, and what each of its strategies says of itself (its plan and price,
through the search protocol, farm/run/search.py); nothing starts, nothing is written."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from farm.analysis.outcome import trial_not_measurable
from farm.engines import get_engine
from farm.engines.base import redact_args
from farm.run import search
from farm.run.sweep_view import flags_text
from farm.secrets import redact_flags
from farm.study.grid import MeasuredDurations, grid_cost, grid_costs
from farm.study.repeats import is_auto
from farm.study.spec import Study
from farm.study.trial import Trial


def dry_run(study: Study, grid: str, trials: list[Trial], *, selected: set[str] | None, mode: str,
            resume: str | None, tracking_uri: str | None, start: str | None, copies: tuple[str, ...] = ()) -> None:
    """What `farm sweep --dry-run` prints. With `resume`: the sweep's unfinished trials (read from
    its store, which must be there: a dry run creates nothing) and what each of its strategies runs
    next, planned from the stored results; with a store named, the estimate at the durations an
    earlier sweep of the study measured."""
    measured, note = None, None
    if resume:
        from farm.inputs import tracking_source
        from farm.run.preflight import check_resume, check_store_to_read
        from farm.store.tracking import default_tracking_uri

        uri = tracking_uri or default_tracking_uri()
        check_store_to_read(uri, key=tracking_source(tracking_uri))
        point = check_resume(uri, resume, study, grid, trials)
        trials = point.rename(trials)
        done = [t for t in trials if t.id in point.finished]
        trials = [t for t in trials if t.id not in point.finished]
        note = (f"resume of sweep {resume}: {len(done)} trial(s) finished, not run again"
                + (f" ({', '.join(t.label for t in done[:8])}{', ...' if len(done) > 8 else ''})" if done else "")
                + f"; {len(trials)} to run, listed below")
        if copies:  # --control: what runs before them, on the resume's machine
            label = {t.id: t.label for t in done}
            note += "; first, a copy of " + ", ".join(label.get(c, c) for c in copies) + \
                " as a control on the machine the resume runs on (--control)"
        more = False
        for kind in search.chain(study.strategy, is_auto(study.repeats)):
            said = kind.resume_note(study, grid, uri, resume)  # (what it runs next, whether it runs more)
            if said is not None:
                note += f"; {said[0]}"
                more = more or said[1]
        if not trials:
            print(note.replace("; 0 to run, listed below", "") + ("" if more else "; nothing is left to run"))
            return
    elif tracking_uri:
        from farm.run.estimate import previous_durations  # mlflow: only when a store is named

        measured, note = previous_durations(tracking_uri, study)
    print_dry_run(study, grid, [t for t in trials if selected is None or t.id in selected], mode=mode,
                  measured=measured, durations_note=note, start=start)


def missing_model_notes(trials: list[Trial]) -> list[str]:
    """A line for each local model directory the commands name that this machine does not have
    (a fresh clone has no `.models/`): the commands are printed all the same, as they would run
    where it exists, but not without a word."""
    local = sorted({t.model for t in trials if t.model.startswith(("/", "~"))})
    return [f"note: model directory {path} does not exist here: the commands below name it; make it first "
            f"(the study file says how) or run the sweep where it exists"
            for path in local if not Path(path).expanduser().exists()]


def grid_prices(study: Study, grid: str, trials: list[Trial], cost) -> list[dict]:
    """The grid's estimated GPU-hours in dollars, per GPU model its trials run on, at the price
    given (the study's `prices`, `--price`): {gpu, gpu_hours, usd_per_gpu_hour, usd}; where there is
    none, or the GPU model is not known yet (accelerator_type auto), {gpu, not_predicted: why}.
    Nothing for a grid that holds no GPU."""
    from farm.study.sections import AUTO_ACCELERATOR

    by_gpu: dict[str | None, list[Trial]] = {}
    for t in trials:
        if t.gpus:
            by_gpu.setdefault(study.engines[t.engine].accelerator_type, []).append(t)
    out: list[dict] = []
    for gpu, some in by_gpu.items():
        if gpu == AUTO_ACCELERATOR:
            out.append({"gpu": gpu, "not_predicted": "accelerator_type auto: the GPU model, and so its price, comes "
                                                      "from the cluster when the sweep starts"})
            continue
        if gpu is None:
            out.append({"gpu": None, "not_predicted": "no GPU model named (the study's accelerator_type, or "
                                                      "--accelerator NAME) to price"})
            continue
        price = next((v for k, v in (study.prices or {}).items() if k.lower() == gpu.lower()), None)
        if price is None:
            out.append({"gpu": gpu, "not_predicted": f"no price per GPU-hour for {gpu} (the study key "
                                                     f"`prices: {{{gpu}: USD}}` or `--price {gpu}=USD`)"})
            continue
        hours = cost.gpu_hours if len(some) == len(trials) else grid_cost(study, grid, trials=some).gpu_hours
        out.append({"gpu": gpu, "gpu_hours": hours, "usd_per_gpu_hour": price, "usd": hours * price})
    return out


def price_lines(study: Study, grid: str, trials: list[Trial], cost) -> list[str]:
    """`grid_prices` as the dry run prints them."""
    return [f"cost: not predicted: {p['not_predicted']}" if "not_predicted" in p else
            f"cost: ~{p['gpu_hours']:.1f} GPU-hours of {p['gpu']} at ${p['usd_per_gpu_hour']:g} per GPU-hour: "
            f"~${p['usd']:,.2f} (the estimate above)" for p in grid_prices(study, grid, trials, cost)]


def memory_json(study: Study, trial: Trial, p) -> dict | None:
    """A trial's memory prediction in the dry run's JSON: what is predicted, or why it is not
    (`not_predicted`); None for a trial that holds no GPU."""
    from farm.analysis.memory_fit import NoPrediction
    from farm.run.memory import why_not_predicted

    if p is None:
        why = why_not_predicted(study, trial)
        return None if why is None else {"not_predicted": why}
    if isinstance(p, NoPrediction):
        return {"not_predicted": p.reason}
    return {"fits": p.fits, "kv_cache_tokens": p.kv_cache_tokens, "state_slots": p.state_slots,
            "max_running_requests": p.max_running_requests, "reason": p.reason or None}


def print_dry_run(study: Study, grid: str, trials: list[Trial], mode: str = "normal",
                  measured: MeasuredDurations | None = None, durations_note: str | None = None,
                  start: str | None = None) -> None:
    """Every trial with its exact command line, one line each, ready to paste; nothing starts.
    What the sweep's strategies add (halving's rungs, a local search's start and price) each says of
    itself (`dry_run_lines`, farm/run/search.py).
    `quiet`: the command lines alone; `json`: the trials and the grid's estimated cost as JSON;
    `measured`: an earlier sweep's durations for the GPU-hour estimate."""
    commands = {}
    for t in trials:
        engine = get_engine(t.engine)
        spec = study.engines[t.engine]
        commands[t.id] = shlex.join(redact_args(engine.command(spec, t, port=8000), engine.secret_flags(spec)))
    if mode == "quiet":
        for t in trials:
            print(commands[t.id])
        return
    if mode == "json":
        from farm.run.memory import predictions

        cost = grid_costs(study, {grid: trials}, measured)[grid]
        fits = predictions(study, trials)
        print(json.dumps({
            "study": study.name, "grid": grid, "profiles": study.grid_profiles(grid),
            "primary_profile": study.grid_primary_profile(grid),
            "estimate": {"gpu_hours": cost.gpu_hours, "trial_hours": cost.trial_hours, "runs": cost.runs,
                         "durations_from": cost.durations_from},
            "cost": grid_prices(study, grid, trials, cost),
            "trials": [{"id": t.id, "name": t.name, "engine": t.engine, "model": t.model, "gpus": t.gpus,
                        "flags": redact_flags(t.flags, get_engine(t.engine).secret_flag_names),
                        "knobs": t.knobs or {}, "profiles": t.profiles, "command": commands[t.id],
                        "memory": memory_json(study, t, fits.get(t.id))} for t in trials],
        }, indent=2))
        return
    chain = search.chain(study.strategy, is_auto(study.repeats))
    print(f"study {study.name} ({study.source}), grid {grid}: {len(trials)} trial(s), "
          f"profiles {', '.join(study.grid_profiles(grid))}, primary {study.grid_primary_profile(grid)}")
    if durations_note:
        print(durations_note)
    if study.compile_cache:
        print("compile caches shared through " + ("Ray's object store (this sweep)" if study.compile_cache == "ray"
                                                   else f"directory {study.compile_cache}"))
    print("cost of each grid" + (":" if measured else " at the seed's measured durations:"))
    costs = grid_costs(study, {grid: trials}, measured)
    for cost in costs.values():
        print(f"  {cost.line()}")
    for line in price_lines(study, grid, trials, costs[grid]):
        print(line)
    for line in missing_model_notes(trials):
        print(line)
    from farm.analysis.accelerator import auto_engines
    from farm.run.memory import fit_line, predictions, why_not_predicted

    # accelerator_type auto: no GPU model to size memory by until the cluster names one
    waits = auto_engines(study, trials)
    if waits:
        print("note: accelerator_type auto: the GPU model comes from the cluster when the sweep starts; "
              "`--accelerator NAME` (e.g. --accelerator H200) predicts memory for one"
              + "".join(f"; {k.name} prunes the trials that do not fit it then" for k in chain if k.prunes_unfit))
    fits = predictions(study, trials)
    for kind in chain:  # what each strategy says of itself before anything runs: its plan and price
        for line in kind.dry_run_lines(study, grid, trials, fits=fits, measured=measured, start=start, waits=bool(waits)):
            print(line)
    for t in trials:
        print()
        print(f"{t.id}  {t.name or ''}".rstrip())
        print(f"  engine={t.engine} model={t.model} gpus={t.gpus} flags: {flags_text(t)}")
        print(f"  {commands[t.id]}")
        if fits.get(t.id) is not None:
            print(f"  {fit_line(fits[t.id])}")
        elif (why := why_not_predicted(study, t)) is not None:  # a GPU trial farm cannot size: why
            print(f"  {fit_line(None, why)}")
        if (why := trial_not_measurable(t)) is not None:
            print(f"  not started: {why}" if study.dummy_output_dependent == "skip" else
                  f"  one run of {study.grid_primary_profile(grid)} alone (dummy_output_dependent: speed)")
