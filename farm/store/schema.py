"""farm's layout in MLflow: every tag, param, metric name and artifact path, in one place.

A sweep is a parent run, each trial a child run. Stored sweeps outlive the farm that wrote them
(`farm report`, `--resume` and `farm status` read sweeps an older farm stored), so a name here
changes only with a migration. The writers and the raw reads (farm/store/tracking.py, a search's
records in farm/store/searches.py) and the reading backend (farm/store/mlflow_store.py) take the
names from here, and only they call MLflow (tests/unit/store/test_mlflow_only_in_store.py); tests
spell the names literally, which pins the layout.

Pure: no mlflow import, so the names can be read anywhere.
"""

from __future__ import annotations

import time

# --------------------------------------------------------------------------------------
# tags

PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: what makes a run a child in its UI
# MLflow's own, on the experiment: MLflow 3 opens an experiment without it on its GenAI overview
# (traces, "No data available"); the classic-ML kind opens it on its runs (mlflow/server/js:
# ExperimentKind.CUSTOM_MODEL_DEVELOPMENT). Set when farm creates the experiment, or where none is set.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND_RUNS = "custom_model_development"
KIND_TAG = "farm.kind"  # KIND_SWEEP on a parent run, KIND_TRIAL on a child run
KIND_SWEEP = "sweep"
KIND_TRIAL = "trial"
SWEEP_TAG = "farm.sweep_id"  # on the parent (its own run id) and on every child
TRIAL_TAG = "farm.trial_id"
# A sweep's: running, finished, partial, killed, failed. A trial's: its result status, written
# last, so that a child run without it was cut off while logging.
STATUS_TAG = "farm.status"
STUDY_TAG = "farm.study"
GRID_TAG = "farm.grid"
SUBMISSION_TAG = "farm.submission_id"  # the Ray Jobs submission that runs the sweep
# On the parent: the GPU model(s) the sweep's GPU trials ran on, as Ray names them (`H200`); a study's
# `accelerator_type: auto` is recorded as the model it resolved to. Results are per GPU model.
ACCELERATOR_TAG = "farm.accelerator"

ENGINE_TAG = "farm.engine"
NODE_TAG = "farm.node"
NODE_ID_TAG = "farm.node_id"
GPUS_TAG = "farm.gpus"  # comma-separated GPU ids the engine saw
ENGINE_VERSION_TAG = "farm.engine_version"
ATTEMPT_TAG = "farm.attempt"
REASON_TAG = "farm.reason"
LOG_TAIL_TAG = "farm.log_tail"
PREVIOUS_ATTEMPTS_TAG = "farm.previous_attempts"
KNOB_OVERRIDDEN_TAG = "farm.knob_overridden"  # knobs the engine's log contradicts: "max_running_requests: asked 512, got 83"
PASSES_TAG = "farm.passes"  # `--repeats auto`: passes appended to the child run so far
REPEATS_TAG = "farm.repeats"
# What the end of a sweep writes back, so the MLflow UI shows the answer without opening artifacts:
NOTE_TAG = "mlflow.note.content"  # MLflow's own: the run's description (markdown) on its Overview page
RECOMMENDED_TAG = "farm.recommended"  # on a child run: "true" for the recommended trial, "false" for the others
RECOMMENDED_TRIAL_TAG = "farm.recommended_trial"  # on the parent: the recommended trial's id
RECOMMENDED_COMMAND_TAG = "farm.recommended_command"  # on the parent: the serve command (secrets masked)
VERDICT_TAG = "farm.verdict"  # on a child run: what selection made of it on the primary profile
QUALITY_TAG = "farm.quality"  # on a child run: its quality gate status (worse, equivalent, cannot tell, not gated, ...)
QUALITY_REFERENCE_TAG = "farm.quality.reference"  # on a gated trial's run: its reference's trial id
QUALITY_TASK_PARAM = "quality_task"  # on a trial's run that answered the gate: the study's quality.task
# On a child run: the machine the trial ran on (actors/machine.py), its key and one tag per field of its
# fingerprint (farm.machine.gpu_name, farm.machine.gpu_driver, farm.machine.cuda_driver, farm.machine.kernel,
# farm.machine.cpu_model, farm.machine.host, ...), and why its runs' GPUs were not sampled where they were not.
MACHINE_TAG = "farm.machine"
MACHINE_TAG_PREFIX = "farm.machine."
GPU_NOT_MEASURED_TAG = "farm.gpu_samples"
NOTE_MAX_CHARS = 7500  # the note is a tag (MLflow's limit: 8000 characters); the whole report is report/report.md

TAG_MAX_CHARS = 5000  # MLflow's limit on a tag value (8000) with room for its encoding
LOG_TAIL_TAG_LINES = 25

# Ray Jobs metadata of a submitted sweep and of its head check (not MLflow, but the same words).
JOB_KIND_HEAD_CHECK = "head-check"
TRACKING_URI_JOB_KEY = "farm.tracking_uri"  # set at submission
MLFLOW_RUN_JOB_KEY = "farm.mlflow_run"  # the sweep's run in the MLflow UI, added by the job once it has a sweep

# Sweep statuses and the MLflow run status each ends with.
SWEEP_RUNNING = "running"
# A sweep left "running" by a driver that is gone (killed outright, its machine lost): marked so by
# the next farm command that reads it (farm/store/tracking.py `interruption`).
SWEEP_INTERRUPTED = "interrupted"
SWEEP_END_STATUS = {"finished": "FINISHED", "partial": "FINISHED", "killed": "KILLED",
                    SWEEP_INTERRUPTED: "KILLED"}  # anything else: FAILED

# The driver of a running sweep: where it runs (HOST:PID, set when it starts or resumes the sweep)
# and its heartbeat (unix seconds, every DRIVER_HEARTBEAT_S while it runs). A sweep whose driver is
# a dead process of this host, or whose heartbeat is older than DRIVER_GONE_S (a driver on another
# host cannot be asked), was interrupted; INTERRUPTED_TAG says how farm knew.
DRIVER_TAG = "farm.driver"
HEARTBEAT_TAG = "farm.driver.heartbeat"
# the driver's PID namespace (/proc/self/ns/pid): two containers may share a host name, not a PID space
DRIVER_PID_NS_TAG = "farm.driver.pid_namespace"
INTERRUPTED_TAG = "farm.interrupted"
DRIVER_HEARTBEAT_S = 30.0
DRIVER_GONE_S = 180.0  # six beats missed: a stalled store or a loaded machine misses one or two

# One driver a sweep (farm/store/lease.py): the lease on its run, a JSON object (token, host, pid,
# pid_namespace, since) written by the driver that took it, LEASE_RELEASED once it let it go. A
# lease expires DRIVER_GONE_S after the sweep's last heartbeat, or at once when its holder is a
# dead process of this host and PID namespace.
LEASE_TAG = "farm.lease"
LEASE_RELEASED = "released"

# --------------------------------------------------------------------------------------
# params

SWEEP_PARAMS = ("study", "grid", "trials", "profiles", "repeats", "primary_profile", "command")
COMMAND_PARAM_MAX_CHARS = 6000
TRIAL_PARAMS = ("engine", "model", "trial_id", "gpus", "profiles", "name")
FLAG_PARAM_PREFIX = "flag."  # one param per engine flag: flag.<name>
KNOB_PARAM_PREFIX = "knob."  # one param per engine-neutral knob: knob.<name>
LIMIT_PARAM_PREFIX = "limit."  # one param per effective limit the engine's log names: limit.<name>


def flag_param(name: str) -> str:
    return f"{FLAG_PARAM_PREFIX}{name}"


def knob_param(name: str) -> str:
    return f"{KNOB_PARAM_PREFIX}{name}"


def limit_param(name: str) -> str:
    return f"{LIMIT_PARAM_PREFIX}{name}"


# --------------------------------------------------------------------------------------
# metrics: `<profile>/<metric>` (MLflow's UI makes one chart section per prefix before the
# slash, so the compare view shows every profile), the mean over a trial's runs; with more
# than one run, `<profile>/runs/<metric>` holds each run at step = its repeat number.

METRICS = ("total_tps", "output_tps", "request_throughput", "success_rate", "duration_s",
           "ttft_mean_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p95_ms", "itl_mean_ms",
           "latency_per_output_token_mean_ms",
           "latency_mean_s", "latency_p95_s", "guidellm_total_tps_mean", "successful_requests",
           "total_input_tokens", "total_output_tokens",
           # the rate while the client held its full concurrency, and the requests it lost (issue 45)
           "steady_tps", "steady_output_tps", "steady_window_s", "client_lost_requests")
# What a run's GPUs did over its window (actors/machine.py): `<profile>/gpu_<quantity>_<min|mean|max>`,
# logged like METRICS (the mean over the trial's runs; each run under `<profile>/runs/`).
GPU_QUANTITIES = ("sm_clock_mhz", "temperature_c", "power_w")
GPU_STATS = ("min", "mean", "max")
# A run's energy over its window (farm/analysis/energy.py), logged like METRICS where its GPUs' power was
# sampled; none where not (the reason is GPU_NOT_MEASURED_TAG's): never zeros.
ENERGY_METRICS = ("energy_j", "power_mean_w", "power_peak_w", "output_tokens_per_j", "total_tokens_per_j")
# A trial's dollars per million tokens at its mean throughput and the study's price (farm/analysis/cost.py),
# `<profile>/<name>`, written on the trial's run by the sweep's end (and `farm report`) where a price was given.
COST_METRICS = ("usd_per_m_output_tokens", "usd_per_m_total_tokens")
# The quality gate (issue 49) on a trial's run: its own answers, written by its actor (QUALITY_RUN_METRICS,
# `quality/<name>`), and its paired verdict against its reference, written by the sweep's end and `farm report`
# (QUALITY_VERDICT_METRICS; the status in QUALITY_TAG, the reference's trial id in QUALITY_REFERENCE_TAG).
QUALITY_PREFIX = "quality"
QUALITY_RUN_METRICS = ("accuracy", "items", "correct", "eval_s")
QUALITY_VERDICT_METRICS = ("difference", "low", "high", "p_value", "reference_accuracy", "first_token_agreement",
                           "answer_agreement")
LOAD_METRIC = "load"  # a capacity search's step: the concurrency or rate it ran at
METRICS_PER_BATCH = 900  # MLflow takes at most 1000 metrics in one log_batch


# On the parent run: the recommendation's and the baseline's numbers per profile, and how far
# apart they are, so the experiment's table and charts set sweeps side by side.
RECOMMENDED_PREFIX = "recommended"
BASELINE_PREFIX = "baseline"
DELTA_PREFIX = "recommended_vs_baseline"  # (recommended / baseline - 1) x 100
SUMMARY_METRICS = ("total_tps", "tpot_mean_ms")
DELTA_SUFFIX = "_pct"
GPU_HOURS_METRIC = "gpu_hours"  # GPU-hours the sweep's trials held their GPUs


def recommended_metric(profile: str, metric: str) -> str:
    return f"{RECOMMENDED_PREFIX}/{profile}/{metric}"


def baseline_metric(profile: str, metric: str) -> str:
    return f"{BASELINE_PREFIX}/{profile}/{metric}"


def delta_metric(profile: str, metric: str) -> str:
    return f"{DELTA_PREFIX}/{profile}/{metric}{DELTA_SUFFIX}"


def gpu_metric(quantity: str, stat: str) -> str:
    return f"gpu_{quantity}_{stat}"


def machine_tag(field: str) -> str:
    return f"{MACHINE_TAG_PREFIX}{field}"


def metric_name(profile: str, metric: str) -> str:
    return f"{profile}/{metric}"


def quality_metric(name: str) -> str:
    """`quality/<name>`: one of QUALITY_RUN_METRICS or QUALITY_VERDICT_METRICS."""
    return f"{QUALITY_PREFIX}/{name}"


def run_metric_name(profile: str, metric: str) -> str:
    return f"{profile}/runs/{metric}"


# --------------------------------------------------------------------------------------
# artifacts

# on the parent run
SWEEP_DIR = "sweep"
STUDY_ARTIFACT = "study.yaml"  # the study, secrets masked
TRIALS_ARTIFACT = "trials.json"  # every trial of the grid, secrets masked
STUDY_PATH = f"{SWEEP_DIR}/{STUDY_ARTIFACT}"
TRIALS_PATH = f"{SWEEP_DIR}/{TRIALS_ARTIFACT}"
# A copy of the study's reference results file: the report sets them beside farm's numbers on any
# machine, not only where the sweep ran (the study names the file by that machine's path).
REFERENCE_ARTIFACT = "reference.json"
REFERENCE_PATH = f"{SWEEP_DIR}/{REFERENCE_ARTIFACT}"
REPORT_DIR = "report"  # what the end of a sweep (and `farm report --out DIR`) writes:
REPORT_MARKDOWN = "report.md"
REPORT_RESULTS = "results.json"  # the sweep's runs as a results file (`farm analyze --results`)
REPORT_RECOMMENDATION = "recommendation.txt"
REPORT_PLOTS = "plots"

# on a child run
RESULT_ARTIFACT = "result.json"  # the whole TrialResult: what `farm report` and `--resume` rebuild from
QUALITY_ARTIFACT = "quality.json"  # a trial's answers to the quality gate, item by item (its QualityRun)
COMMAND_ARTIFACT = "command.txt"
LOG_TAIL_ARTIFACT = "engine-log-tail.txt"
FILES_DIR = "files"  # the trial's own directory (engine.log, guidellm reports)


def pass_files_dir(pass_index: int) -> str:
    return f"{FILES_DIR}/pass-{pass_index}"


def trials_of_sweep_filter(sweep_id: str) -> str:
    """MLflow search filter: the child runs of a sweep."""
    return f"tags.`{PARENT_TAG}` = '{sweep_id}'"


# --------------------------------------------------------------------------------------
# a search's records on its sweep's run (farm/store/searches.py writes and reads them)

# The strategy and budget a sweep last ran with, so that `--resume` without --strategy continues
# as it ran and `farm report` reads it as one; a grid sweep has no strategy tag.
STRATEGY_TAG = "farm.strategy"
SEARCH_STRATEGIES = ("halving", "local")  # the values STRATEGY_TAG takes
BUDGET_TAG = "farm.budget_gpu_hours"  # repr(float) of the budget, "" for none
START_TAG = "farm.start"  # a local search's start: the trial it searches from
# A local search's per-trial price, {"step": GPU-hours, "final": GPU-hours} as JSON: recorded when
# it starts, reused by a resume and a report (a sweep stored before it was recorded has none).
LOCAL_SEARCH_ESTIMATE_TAG = "farm.local_search_estimate"
LOCAL_SEARCH_GPU_HOURS_TAG = "farm.local_search_gpu_hours"  # "%.4f" of what the search spent so far
LOCAL_SEARCH_PLAN_ARTIFACT = "local_search.json"  # the search's plan, after every job
HALVING_GPU_HOURS_TAG = "farm.halving_gpu_hours"  # "%.4f" of what the rungs spent
HALVING_SUMMARY_ARTIFACT = "halving.md"  # what each rung spent, why each trial stopped
HALVING_PLAN_ARTIFACT = "halving.json"  # the driver's last plan, once the sweep's rungs were done
# The trials a pass of `--repeats auto` was planned to run, a JSON list of trial ids, tagged as the
# pass starts: a resume finishes a pass cut short from what it was planned to run, not from a plan
# recomputed under that resume's budget (which may differ). A sweep stored before has none.
AUTO_PASS_TAG_PREFIX = "farm.auto_pass."


def auto_pass_tag(pass_index: int) -> str:
    return f"{AUTO_PASS_TAG_PREFIX}{pass_index}"


def halving_rung_metric(rung: int) -> str:
    """The GPU-hours one rung spent, a metric of the sweep's run."""
    return f"halving/rung_{rung}_gpu_hours"


# The memory-fit check: on each trial's child run, the KV-cache tokens (and requests at once) the
# memory-fit model predicted, what the engine reported and the error; the lines on the sweep's run.
KV_PREDICTED_TAG = "farm.kv_tokens_predicted"
KV_REPORTED_TAG = "farm.kv_tokens_reported"
KV_ERROR_TAG = "farm.kv_tokens_error_pct"  # signed, "%+.2f"
RUNNING_PREDICTED_TAG = "farm.running_requests_predicted"
MEMORY_FIT_ARTIFACT = "memory_fit.md"


def kv_check_tags(predicted: int, reported: int | None, error: float | None,
                  running_predicted: int | None) -> dict[str, str]:
    """One trial's memory-fit check as its child run's tags (`error`: a fraction; a tag is left out
    where its number is not known)."""
    return {KV_PREDICTED_TAG: str(predicted), **({KV_REPORTED_TAG: str(reported)} if reported else {}),
            **({KV_ERROR_TAG: f"{error * 100:+.2f}"} if error is not None else {}),
            **({RUNNING_PREDICTED_TAG: str(running_predicted)} if running_predicted is not None else {})}


# --------------------------------------------------------------------------------------
# names and views a user reads


def sweep_name(study: str, grid: str) -> str:
    return f"{study} · grid {grid}"


def sweep_run_name(study: str, grid: str, started: float) -> str:
    """The sweep's run as the MLflow UI lists it (its id stays the run id): `qwen3 · grid smoke · 2026-12-02 16:05`."""
    return f"{sweep_name(study, grid)} · {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}"


# MLflow's own experiment tag: a saved view of the experiment's runs table, which the UI opens by
# `?viewStateShareKey=<key>` (its "Share" button writes the same): the search facets (filter, sort)
# and the table's state (columns). farm writes one per sweep, keyed by the sweep id, so its link
# opens on the sweep's trials with their numbers, best first (farm/run/links.py mlflow_trials_link).
SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."
TRIALS_VIEW_METRICS = ("total_tps", "ttft_mean_ms", "tpot_mean_ms")  # per profile, the primary first
TRIALS_VIEW_TAGS = (RECOMMENDED_TAG, VERDICT_TAG, STATUS_TAG)
# on the primary profile only: what a million tokens cost and how many tokens a joule gives (issue 50)
TRIALS_VIEW_PRIMARY_METRICS = ("usd_per_m_total_tokens", "total_tokens_per_j")
TRIALS_VIEW_MAX_PROFILES = 6  # columns enough to read; every metric stays a click away ("Columns")


def trials_view_tag(sweep_id: str) -> str:
    return f"{SHARED_VIEW_TAG_PREFIX}{sweep_id}"


def trials_view(sweep_id: str, profiles: list[str], primary: str) -> dict:
    """The runs table of a sweep's trials as MLflow 3's UI reads a shared view (mlflow/server/js:
    the search facets `searchFilter`, `orderByKey`, `orderByAsc`, ...; the table's `selectedColumns`,
    `columnOrder` and `columnWidths`, each column `metrics.`NAME`` or `tags.`NAME``): the sweep's
    trials, throughput, TTFT and TPOT per profile with the recommendation, verdict and status, the
    primary profile's dollars per million tokens and tokens per joule beside its throughput,
    sorted by the primary profile's throughput, highest first."""
    ordered = [primary] + [p for p in profiles if p != primary][:TRIALS_VIEW_MAX_PROFILES - 1]
    metrics = [[f"metrics.`{metric_name(p, m)}`"
                for m in TRIALS_VIEW_METRICS + (TRIALS_VIEW_PRIMARY_METRICS if p == primary else ())]
               for p in ordered]
    tags = [f"tags.`{t}`" for t in TRIALS_VIEW_TAGS]
    # in this order, left to right: the primary profile's numbers, which trial won and why, the rest
    columns = metrics[0] + tags[:2] + [c for cols in metrics[1:] for c in cols] + tags[2:]
    widths = {c: TRIALS_VIEW_WIDTHS.get(c.split("`")[1], TRIALS_VIEW_WIDTHS["metric"]) for c in columns}
    return {"searchFilter": trials_of_sweep_filter(sweep_id),
            "orderByKey": f"metrics.`{metric_name(primary, 'total_tps')}`", "orderByAsc": False,
            "startTime": "ALL", "lifecycleFilter": "Active",
            "selectedColumns": columns, "columnOrder": columns, "columnWidths": widths}


# pixels: a metric's header (`profile/total_tps`) readable, a verdict ("recommended (cannot tell)") whole
TRIALS_VIEW_WIDTHS = {"metric": 175, RECOMMENDED_TAG: 140, VERDICT_TAG: 210, STATUS_TAG: 100}


def sweeps_filter() -> str:
    return f"tags.`{KIND_TAG}` = '{KIND_SWEEP}'"


def submission_filter(submission_id: str) -> str:
    return f"tags.`{SUBMISSION_TAG}` = '{submission_id}'"
