"""Which GPU model a study's GPU trials run on, where the study says `accelerator_type: auto`.

Results are per GPU model: a study held to `auto` takes the one model its cluster has (the alive
nodes' Ray resources, `accelerator_type:H100`), read once Ray is connected (farm/run/driver.py);
a results file takes the one model its runs recorded (their provenance). Pure: the driver hands in
the nodes' resource dicts, so this imports no ray.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from farm.errors import UserError
from farm.study.sections import AUTO_ACCELERATOR
from farm.study.spec import Study
from farm.study.trial import Trial

RESOURCE_PREFIX = "accelerator_type:"  # Ray's custom resource naming a node's GPU model


def with_accelerator(study: Study, name: str) -> Study:
    """`farm sweep --accelerator NAME|auto`: the study's and every engine's GPU model, for this sweep."""
    engines = {key: spec.model_copy(update={"accelerator_type": name}) for key, spec in study.engines.items()}
    return study.model_copy(update={"accelerator_type": name, "engines": engines})


def auto_engines(study: Study, trials: Iterable[Trial]) -> set[str]:
    """The engines whose GPU trials wait for the cluster to name their GPU model (`auto`)."""
    return {t.engine for t in trials
            if t.gpus and t.engine in study.engines and study.engines[t.engine].accelerator_type == AUTO_ACCELERATOR}


def says_auto(study: Study) -> bool:
    """The study (or one of its engines) takes its GPU model from the cluster."""
    return study.accelerator_type == AUTO_ACCELERATOR or any(
        e.accelerator_type == AUTO_ACCELERATOR for e in study.engines.values())


def resolved(study: Study, name: str) -> Study:
    """The study with every `auto` (the study's, each engine's) replaced by `name`: what the sweep
    stores and runs with, so its snapshot names the GPU model its results were measured on."""
    engines = {key: spec.model_copy(update={"accelerator_type": name}) if spec.accelerator_type == AUTO_ACCELERATOR
               else spec for key, spec in study.engines.items()}
    top = name if study.accelerator_type == AUTO_ACCELERATOR else study.accelerator_type
    return study.model_copy(update={"accelerator_type": top, "engines": engines})


def gpu_models(study: Study, trials: Iterable[Trial]) -> list[str]:
    """The GPU models (named, not `auto`) the study holds its GPU trials to, sorted."""
    return sorted({m for t in trials if t.gpus and t.engine in study.engines
                   and (m := study.engines[t.engine].accelerator_type) and m != AUTO_ACCELERATOR})


def node_models(nodes: Iterable[Mapping[str, float]]) -> list[str]:
    """The GPU models the nodes with GPUs name (`accelerator_type:X` resources), sorted."""
    return sorted({key[len(RESOURCE_PREFIX):] for res in nodes if res.get("GPU", 0) > 0
                   for key, amount in res.items() if key.startswith(RESOURCE_PREFIX) and amount})


def cluster_accelerator(nodes: Iterable[Mapping[str, float]]) -> str:
    """The one GPU model among the nodes that have GPUs (each node's Ray resources); a cluster of
    several models, or of GPUs that name none, is a `UserError`: the user picks one."""
    nodes = list(nodes)
    models = node_models(nodes)
    if len(models) == 1:
        return models[0]
    if models:
        raise UserError(f"auto: the cluster has GPUs of several models ({', '.join(models)}); results are per GPU "
                        f"model: pass --accelerator NAME to run on one of them", key="accelerator_type")
    if not any(res.get("GPU", 0) > 0 for res in nodes):
        raise UserError("auto: no node of the cluster has GPUs, so none names a GPU model: run where GPUs are, or "
                        "pass --accelerator NAME", key="accelerator_type")
    raise UserError("auto: the cluster's GPU nodes name no GPU model (no Ray resource accelerator_type:NAME): pass "
                    "--accelerator NAME (and start the nodes with --resources '{\"accelerator_type:NAME\": 1}')",
                    key="accelerator_type")


# Ray's own reading of an NVIDIA driver's GPU name (ray/_private/accelerators/nvidia_gpu.py):
# "NVIDIA H200" -> H200, "NVIDIA H100 80GB HBM3" -> H100, "NVIDIA RTX PRO 6000 ..." -> RTX-PRO-6000.
_NVIDIA_NAME = re.compile(r"\w+\s+((?:[A-Z]+\s+)*[A-Z0-9]*\d[A-Z0-9]*)")


def ray_name(gpu_name: str) -> str | None:
    """A GPU as its driver names it ('NVIDIA H200') -> the model as Ray names it ('H200')."""
    match = _NVIDIA_NAME.match(gpu_name.strip())
    if match and len(match.group(1)) > 1:
        return match.group(1).replace(" ", "-")
    cleaned = re.sub(r"^NVIDIA\s+", "", gpu_name).strip()
    return cleaned.replace(" ", "-") or None


def recorded_accelerator(gpu_names: Iterable[str | None]) -> str | None:
    """The one GPU model the runs recorded (their provenance's `gpu`, a driver's name, several
    comma-joined where a trial held more than one); None where they recorded none or several."""
    models = {ray_name(part) for name in gpu_names if name for part in name.split(",") if part.strip()}
    models.discard(None)
    return models.pop() if len(models) == 1 else None
