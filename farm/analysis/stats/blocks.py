"""Machines as blocks: two trials compared within the machines they share, or across machines only
through a control that ran on each; never from runs of different machines pooled as one sample.

Two lent H200 machines gave the same configuration 7,582 and 10,458 tok/s: a machine can move a
trial's throughput by more than the steps a study decides. Pooled, such runs either hide a real
difference in the machines' noise or manufacture one out of which trial ran where. So each side of
a comparison comes as its runs by machine (`Blocked`: machine key -> samples, the key of
`MachineFingerprint.key`, `UNKNOWN` for runs that recorded none) and:

- every run of both sides on one machine: Welch on the logs as ever (`relative_difference`);
- the sides share machines: only those machines' runs count. On one shared machine it is Welch on
  that machine's runs; on several, a stratified estimate: each machine's difference of log means,
  combined with inverse-variance weights, each side's variance pooled within machines (the
  residuals from each machine's own mean). Pooling the variance rather than taking each machine's
  own keeps a machine whose two runs happened to agree from taking all the weight, and assumes
  what the committed runs show: a configuration's run-to-run noise is a property of the
  configuration more than of the machine, while its level moves with the machine. With one
  machine this is Welch exactly; the degrees of freedom are Welch-Satterthwaite's over the
  pooled variances;
- the sides share no machine: through a control (a trial with runs on a machine of each; the
  caller orders the candidates, the baseline first): log(a / control) on a's machines minus
  log(b / control) on b's, each estimated as above, their variances added (the two use disjoint
  runs of the control, so they are independent), Welch-Satterthwaite for the degrees of freedom;
- no such control: not decided, "across machines, no shared control", whatever the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from farm.analysis.stats.difference import Diff, relative_difference
from farm.analysis.stats.summary import Samples, _clean

# The machine of runs that recorded none (results from before farm fingerprinted machines).
UNKNOWN = "unknown"

Blocked = Mapping[str, Samples]


@dataclass(frozen=True)
class Control:
    """A configuration that may bridge two machines: the runs of each of its trials (`parts`: trial ->
    runs by machine; a baseline and its node controls, which repeat it on other nodes, are one)."""

    name: str
    parts: Mapping[str, Blocked]

    def without(self, trials: set[str]) -> Control | None:
        """The control less the trials compared (their runs are a side, not the bridge); None if nothing is left.
        The baseline compared with another trial is still bridged by its node controls."""
        parts = {t: b for t, b in self.parts.items() if t not in trials}
        return Control(self.name, parts) if parts else None

    @property
    def blocks(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for blocked in self.parts.values():
            for machine, values in blocked.items():
                out.setdefault(machine, []).extend(values)
        return out


@dataclass
class _Estimate:
    """A difference of log means within machines: the estimate, its standard error and degrees of freedom,
    the runs used and each side's pooled within-machine log standard deviation."""

    d: float
    se: float
    df: float | None
    n_a: int
    n_b: int
    sd_a: float
    sd_b: float
    machines: list[str]


def _cleaned(blocks: Blocked) -> dict[str, np.ndarray]:
    return {k: x for k, s in blocks.items() if (x := _clean(s)[0]).size}


def _names(machines: Sequence[str]) -> str:
    return ", ".join(machines)


def _runs(n: int) -> str:
    return f"{n} run{'' if n == 1 else 's'}"


def _within(a: dict[str, np.ndarray], b: dict[str, np.ndarray], names: tuple[str, str] = ("a", "b")) -> _Estimate | str:
    """a against b on the machines both ran on: the stratified estimate (see the module's docstring), or
    why it cannot be made (the sides called by `names`)."""
    shared = sorted(set(a) & set(b))
    if any(a[k].min() <= 0 or b[k].min() <= 0 for k in shared):
        return "a sample <= 0: the log-ratio test does not apply"
    la, lb = {k: np.log(a[k]) for k in shared}, {k: np.log(b[k]) for k in shared}
    n_a, n_b = sum(la[k].size for k in shared), sum(lb[k].size for k in shared)
    df_a, df_b = n_a - len(shared), n_b - len(shared)
    if df_a < 1 or df_b < 1:
        side = names[0] if df_a < 1 else names[1]
        return (f"no machine holds two runs of {side}: no run-to-run noise within a machine to test against "
                f"(n_a={n_a}, n_b={n_b} on {_names(shared)})")
    va = sum(float(((la[k] - la[k].mean()) ** 2).sum()) for k in shared) / df_a
    vb = sum(float(((lb[k] - lb[k].mean()) ** 2).sum()) for k in shared) / df_b
    # Inverse-variance weights; both sides constant: weights by the runs (the precision under equal noise).
    w = np.array([1 / (va / la[k].size + vb / lb[k].size) if va + vb > 0 else 1 / (1 / la[k].size + 1 / lb[k].size)
                  for k in shared])
    c = w / w.sum()
    d = float(sum(ck * (la[k].mean() - lb[k].mean()) for ck, k in zip(c, shared)))
    ca = float(sum(ck * ck / la[k].size for ck, k in zip(c, shared)))
    cb = float(sum(ck * ck / lb[k].size for ck, k in zip(c, shared)))
    var = va * ca + vb * cb
    df = var * var / ((va * ca) ** 2 / df_a + (vb * cb) ** 2 / df_b) if var > 0 else None
    return _Estimate(d=d, se=math.sqrt(var), df=df, n_a=n_a, n_b=n_b, sd_a=math.sqrt(va), sd_b=math.sqrt(vb),
                     machines=shared)


def _decided(est: _Estimate, alpha: float, base: dict) -> Diff:
    """A Diff of method `log` from an estimate (its p-value and interval on Student's t)."""
    rel = math.expm1(est.d)
    logs = dict(log_ratio=est.d, log_sd_a=est.sd_a, log_sd_b=est.sd_b, log_se=est.se)
    if est.se == 0:
        if est.d == 0:
            return Diff(**base, relative=0.0, ci_low=0.0, ci_high=0.0, p_value=1.0, significant=False,
                        cannot_tell=False, df=None, **logs, note="every repeat identical on both sides and equal")
        return Diff(**base, relative=rel, ci_low=rel, ci_high=rel, p_value=0.0, significant=True, cannot_tell=False,
                    df=None, **logs, note="every repeat identical on both sides but the constants differ")
    from scipy import stats as _st  # seconds to import: only a comparison of repeated runs pays for it

    p = float(2 * _st.t.sf(abs(est.d) / est.se, est.df))
    half = float(_st.t.ppf(1 - alpha / 2, est.df)) * est.se
    return Diff(**base, relative=rel, ci_low=math.expm1(est.d - half), ci_high=math.expm1(est.d + half), p_value=p,
                significant=p < alpha, cannot_tell=False, df=est.df, **logs)


def _untestable(base: dict, note: str, relative: float | None = None) -> Diff:
    return Diff(**base, relative=relative, ci_low=None, ci_high=None, p_value=None, significant=None,
                cannot_tell=True, note=note)


def _mean(xs: list[np.ndarray]) -> float | None:
    return float(np.concatenate(xs).mean()) if xs else None


def blocked_difference(a: Blocked, b: Blocked, *, controls: Sequence[Control] = (), confidence: float = 0.95) -> Diff:
    """a against b on the ratio scale, within machines or through a control (the module's docstring).

    `controls`: the trials that may bridge machines, in the order to try them (the first with runs on
    a machine of each side is used: an order fixed before any number is seen, never the control
    that gives the smallest p)."""
    alpha = 1 - confidence
    xa, xb = _cleaned(a), _cleaned(b)
    if not xa or not xb or (len(xa) == 1 and set(xa) == set(xb)):
        # One machine (or a side without runs): the test as it always was.
        flat_a = [v for s in a.values() for v in s]
        flat_b = [v for s in b.values() for v in s]
        d = relative_difference(flat_a, flat_b, method="log", confidence=confidence)
        only = next(iter(xa), None)
        return d.model_copy(update={"machines": "one_machine",
                                    "machines_note": f"every run on one machine ({only})" if only else ""})
    shared = sorted(set(xa) & set(xb))
    if shared:
        left_a = sum(x.size for k, x in xa.items() if k not in shared)
        left_b = sum(x.size for k, x in xb.items() if k not in shared)
        left = (f"; left out: {_runs(left_a)} of a and {_runs(left_b)} of b on machines the other never ran on"
                if left_a or left_b else "")
        note = f"within machine{'s' if len(shared) > 1 else ''} {_names(shared)}{left}"
        if len(shared) == 1:
            d = relative_difference(xa[shared[0]], xb[shared[0]], method="log", confidence=confidence)
            return d.model_copy(update={"machines": "within", "machines_note": note})
        base = dict(method="log", confidence=confidence, n_a=sum(xa[k].size for k in shared),
                    n_b=sum(xb[k].size for k in shared), mean_a=_mean([xa[k] for k in shared]),
                    mean_b=_mean([xb[k] for k in shared]), machines="within",
                    machines_note=note + "; each machine's difference weighted by its inverse variance")
        est = _within({k: xa[k] for k in shared}, {k: xb[k] for k in shared})
        return _untestable(base, est) if isinstance(est, str) else _decided(est, alpha, base)
    return _via_control(xa, xb, controls, alpha, confidence)


def _via_control(xa: dict[str, np.ndarray], xb: dict[str, np.ndarray], controls: Sequence[Control], alpha: float,
                 confidence: float) -> Diff:
    apart = f"a ran on {_names(sorted(xa))}, b on {_names(sorted(xb))}"
    base = dict(method="log", confidence=confidence, n_a=sum(x.size for x in xa.values()),
                n_b=sum(x.size for x in xb.values()), mean_a=_mean(list(xa.values())), mean_b=_mean(list(xb.values())))
    for control in controls:
        xc = _cleaned(control.blocks)
        on_a, on_b = sorted(set(xc) & set(xa)), sorted(set(xc) & set(xb))
        if not on_a or not on_b:
            continue
        note = (f"across machines ({apart}), through {control.name}: a against it on {_names(on_a)}, b against it "
                f"on {_names(on_b)}")
        base.update(n_a=sum(xa[k].size for k in on_a), n_b=sum(xb[k].size for k in on_b),
                    mean_a=_mean([xa[k] for k in on_a]), mean_b=_mean([xb[k] for k in on_b]),
                    machines="via_control", machines_note=note, control=control.name)
        ea = _within({k: xa[k] for k in on_a}, {k: xc[k] for k in on_a}, ("a", control.name))
        eb = _within({k: xb[k] for k in on_b}, {k: xc[k] for k in on_b}, ("b", control.name))
        if isinstance(ea, str) or isinstance(eb, str):
            return _untestable(base, ea if isinstance(ea, str) else eb)
        var = ea.se ** 2 + eb.se ** 2
        parts = [(e.se ** 2, e.df) for e in (ea, eb) if e.se > 0]
        df = var * var / sum(v * v / f for v, f in parts) if var > 0 else None
        # "N more runs each" then counts runs of a, b and the control on each side's machines.
        est = _Estimate(d=ea.d - eb.d, se=math.sqrt(var), df=df, n_a=ea.n_a, n_b=eb.n_a,
                        sd_a=math.hypot(ea.sd_a, ea.sd_b), sd_b=math.hypot(eb.sd_a, eb.sd_b), machines=on_a + on_b)
        return _decided(est, alpha, base)
    return _untestable({**base, "machines": "no_shared_control",
                        "machines_note": f"across machines, no shared control: {apart}, and no trial ran on a "
                                         "machine of each"},
                       f"across machines, no shared control ({apart})",
                       relative=None)
