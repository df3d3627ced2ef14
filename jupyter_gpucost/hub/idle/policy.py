"""Idle GPU servers reclaimed: the idle policy per profile, how a server's activity is
judged, and the clock that warns, then stops.

* **The policy** (``c.GpuCostHub.idle_policy``): per profile slug (``"*"`` for every other
  server, the default one included), ``{"after_min": N, "warn_min": M}`` or ``None`` (never
  reclaimed); or a callable of the server returning one. ``busy_idle_max_min`` (optional)
  bounds how long a kernel the server *reports* busy spares GPUs that the cluster's DCGM
  sees idle.
* **Judged** (:func:`judge`) from the newest fresh reading of each source
  (:mod:`.activity`): a kernel the server reports busy is activity, always; the GPUs'
  state comes from DCGM where it is fresh (the cluster measures it; the user does not
  control it), else from the server's own report. What neither source says is
  *unknown*, never idle.
* **The clock** (:class:`HubIdleClock`): idle time adds up, tick by tick, only while every GPU
  is idle and no kernel is busy; each tick counts at most ``max_step_s`` (a wall clock that
  jumps forward cannot make a server idle sooner; one that goes back counts nothing).
  After ``after_s`` of it the server is **warned**: ``stop_at = now + warn_s``. Any activity
  clears the warning and the idle time; unknown holds both (a server whose reports stopped
  keeps its warning, and is not stopped while unknown). A warned server whose last
  judgement is idle is **due** at ``stop_at``.

Pure: no I/O, no clock of its own (``now`` is given), no tornado.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from ..activity import IDLE_UTIL_PCT, ActivitySource, GpuActivity, UserServer
from ..model import HubConfigError, ServerInfo

SETTING = "c.GpuCostHub.idle_policy"
#: a reading older than this says nothing about now (seconds)
STALE_S = 120.0
#: a reading this far ahead of the service's clock is not believed (seconds)
MAX_AHEAD_S = 60.0
#: the bounds of a rule's figures (minutes)
MAX_AFTER_MIN = 7 * 24 * 60
MAX_WARN_MIN = 24 * 60

Verdict = Literal["busy", "idle", "unknown"]


@dataclass(frozen=True)
class IdleRule:
    """When one server is reclaimed."""

    #: idle this long (every GPU idle, no kernel busy), the server is warned
    after_s: float
    #: then stopped this long after the warning, unless it became active
    warn_s: float
    #: with DCGM seeing every GPU idle this long, a kernel the server reports busy no
    #: longer spares it; ``None``: a reported busy kernel always spares it
    busy_idle_max_s: float | None = None


#: a server's rule, or ``None`` (never reclaimed)
RuleFor = Callable[[ServerInfo], IdleRule | None]

_KEYS = {"after_min", "warn_min", "busy_idle_max_min"}


def parse_rule(raw: object, where: str) -> IdleRule | None:
    """``{"after_min": 30, "warn_min": 5}`` (or ``None``) as a rule; :class:`HubConfigError`
    names ``where`` and what is wrong."""
    if raw is None:
        return None
    if isinstance(raw, IdleRule):
        return raw
    if not isinstance(raw, Mapping):
        raise HubConfigError(
            f"{where}: expected None or a dict such as {{'after_min': 30, 'warn_min': 5}}, "
            f"not {raw!r}"
        )
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise HubConfigError(
            f"{where}: unknown key {unknown[0]!r}; the keys are after_min, warn_min, "
            "busy_idle_max_min"
        )
    after = _minutes(raw.get("after_min"), f"{where}['after_min']", 0, MAX_AFTER_MIN, low_open=True)
    warn = _minutes(raw.get("warn_min", 5), f"{where}['warn_min']", 0, MAX_WARN_MIN)
    cap_raw = raw.get("busy_idle_max_min")
    cap = (
        None
        if cap_raw is None
        else _minutes(cap_raw, f"{where}['busy_idle_max_min']", 0, MAX_AFTER_MIN, low_open=True)
    )
    return IdleRule(after * 60, warn * 60, None if cap is None else cap * 60)


def _minutes(
    value: object, where: str, low: float, high: float, *, low_open: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HubConfigError(f"{where}: {value!r} is not a number of minutes")
    if value > high or value < low or (low_open and value == low):
        bound = f"more than {low:g}" if low_open else f"from {low:g}"
        raise HubConfigError(f"{where}: {value!r} is out of range; use {bound} to {high:g} minutes")
    return float(value)


class IdlePolicy:
    """``c.GpuCostHub.idle_policy`` checked at start: :meth:`rule_for` each server."""

    def __init__(self, raw: object, log_error: Callable[[str], None] | None = None) -> None:
        self._call: Callable[[ServerInfo], object] | None = None
        self._rules: dict[str, IdleRule | None] = {}
        self._log_error = log_error
        self._failed: set[str] = set()
        if raw is None:
            return
        if callable(raw):
            self._call = raw
            return
        if not isinstance(raw, Mapping):
            raise HubConfigError(
                f"{SETTING}: expected a dict of profile → rule, a callable of the server, or "
                f"None, not {type(raw).__name__}"
            )
        for profile, rule in raw.items():
            if not isinstance(profile, str):
                raise HubConfigError(f"{SETTING}: the profile {profile!r} is not text")
            self._rules[profile] = parse_rule(rule, f"{SETTING}[{profile!r}]")

    @property
    def enabled(self) -> bool:
        return self._call is not None or any(r is not None for r in self._rules.values())

    def rule_for(self, server: ServerInfo) -> IdleRule | None:
        """The server's rule (by its profile, else ``"*"``); ``None``: never reclaimed. A
        callable that fails or returns what is not a rule reclaims nothing (said once)."""
        if self._call is None:
            profile = server.profile or ""
            return self._rules[profile] if profile in self._rules else self._rules.get("*")
        try:
            return parse_rule(self._call(server), f"{SETTING}({server.user}/{server.server_name})")
        except Exception as e:  # the admin's code: never stops the service
            name = f"{server.user}/{server.server_name}"
            if name not in self._failed and self._log_error is not None:
                self._failed.add(name)
                self._log_error(f"{SETTING} for {name}: {e}; its server is not reclaimed")
            return None


# -- judging one server's activity -------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    #: DCGM (fresh) sees every GPU idle, whatever the server reports
    dcgm_idle: bool = False
    #: the server (fresh report) says a kernel is busy
    kernel_busy: bool = False
    #: where the GPUs' state came from
    gpu_source: ActivitySource | None = None
    #: every GPU idle (by ``gpu_source``); ``None``: unknown
    gpus_idle: bool | None = None


def gpus_idle(activity: GpuActivity) -> bool | None:
    """Every GPU idle over the window; ``None`` when no GPU is named or a figure is not a
    utilisation (NaN, infinite, outside 0..100: refused upstream, and never idle here)."""
    values = activity.gpu_util_pct
    if not values or any(not (math.isfinite(u) and 0 <= u <= 100) for u in values):
        return None
    return all(u < IDLE_UTIL_PCT for u in values)


def fresh(activity: GpuActivity | None, now: datetime, stale_s: float = STALE_S) -> bool:
    if activity is None:
        return False
    age_s = (now - activity.at).total_seconds()
    return -MAX_AHEAD_S <= age_s <= stale_s


def judge(
    sources: Mapping[ActivitySource, GpuActivity],
    now: datetime,
    stale_s: float = STALE_S,
    dcgm_stale_s: float | None = None,
) -> Judgement:
    """One server's activity now, from the newest reading of each source. DCGM's readings
    come once per Prometheus poll: ``dcgm_stale_s`` (default ``stale_s``) is how old one
    may be, at least a poll interval and its query's time."""
    dcgm = sources.get("dcgm")
    report = sources.get("report")
    dcgm = dcgm if fresh(dcgm, now, stale_s if dcgm_stale_s is None else dcgm_stale_s) else None
    report = report if fresh(report, now, stale_s) else None
    kernel_busy = report is not None and report.kernel_busy is True
    dcgm_state = None if dcgm is None else gpus_idle(dcgm)
    gpu_source: ActivitySource | None = None
    gpu_state: bool | None
    if dcgm_state is not None:
        gpu_state, gpu_source = dcgm_state, "dcgm"
    else:
        gpu_state = None if report is None else gpus_idle(report)
        gpu_source = None if gpu_state is None else "report"
    dcgm_idle = dcgm_state is True
    if kernel_busy or gpu_state is False:
        return Judgement("busy", dcgm_idle, kernel_busy, gpu_source, gpu_state)
    if gpu_state is None:
        return Judgement("unknown", dcgm_idle, kernel_busy, gpu_source, gpu_state)
    # every GPU idle: the kernels' state is the report's; with no report (DCGM only) no
    # kernel is known to be busy, and idle GPUs are idle
    return Judgement("idle", dcgm_idle, kernel_busy, gpu_source, gpu_state)


# -- the clock -------------------------------------------------------------------------


@dataclass(frozen=True)
class Warning:
    """A server warned for idle GPUs, and when the hub stops it."""

    key: UserServer
    since: datetime
    stop_at: datetime


@dataclass(frozen=True)
class IdleSpan:
    """A stretch of idle time that ended (activity, the stop, the server gone)."""

    key: UserServer
    started: datetime
    ended: datetime
    #: idle seconds counted (each tick at most ``max_step_s``)
    idle_s: float
    #: how it ended: "active", "reclaimed" or "gone"
    outcome: str


@dataclass
class _IdleState:
    last_tick: datetime | None = None
    idle_s: float = 0.0
    idle_since: datetime | None = None
    #: DCGM-idle time while a reported busy kernel spares the server
    dcgm_idle_s: float = 0.0
    last: Verdict = "unknown"
    warning: Warning | None = None
    spared_by_kernel: bool = False


@dataclass(frozen=True)
class Tick:
    """What one tick changed for one server."""

    warning: Warning | None
    #: a warning was given (``True``) or cleared (``False``) by this tick; ``None``: same
    changed: bool | None = None
    #: a span of idle time that ended with this tick
    ended: IdleSpan | None = None


class HubIdleClock:
    """Every server's idle time and warning. Not thread-safe: one loop ticks it."""

    def __init__(self, max_step_s: float) -> None:
        if not max_step_s > 0:
            raise ValueError("max_step_s must be more than 0")
        self.max_step_s = max_step_s
        self._states: dict[UserServer, _IdleState] = {}

    def tick(
        self, key: UserServer, rule: IdleRule | None, judgement: Judgement, now: datetime
    ) -> Tick:
        state = self._states.setdefault(key, _IdleState())
        step = 0.0
        if state.last_tick is not None:
            step = min(max((now - state.last_tick).total_seconds(), 0.0), self.max_step_s)
        if state.last_tick is None or now > state.last_tick:
            state.last_tick = now
        state.dcgm_idle_s = state.dcgm_idle_s + step if judgement.dcgm_idle else 0.0
        verdict = judgement.verdict
        state.spared_by_kernel = False
        if verdict == "busy" and judgement.kernel_busy and judgement.dcgm_idle:
            cap = None if rule is None else rule.busy_idle_max_s
            if cap is not None and state.dcgm_idle_s >= cap:
                verdict = "idle"  # a busy kernel that has not touched a GPU for that long
            else:
                state.spared_by_kernel = True
        state.last = verdict
        if rule is None:
            return self._reset(key, state, now, "active")
        if verdict == "unknown":
            return Tick(state.warning)
        if verdict == "busy":
            return self._reset(key, state, now, "active")
        if state.idle_since is None:
            state.idle_since = now
        state.idle_s += step
        if state.warning is None and state.idle_s >= rule.after_s:
            state.warning = Warning(key, now, now + timedelta(seconds=rule.warn_s))
            return Tick(state.warning, True)
        return Tick(state.warning)

    def _reset(self, key: UserServer, state: _IdleState, now: datetime, outcome: str) -> Tick:
        ended = None
        if state.idle_since is not None and state.idle_s > 0:
            ended = IdleSpan(
                key, state.idle_since, max(now, state.idle_since), state.idle_s, outcome
            )
        had = state.warning is not None
        state.idle_s, state.idle_since, state.warning = 0.0, None, None
        return Tick(None, False if had else None, ended)

    def restore(self, key: UserServer, since: datetime, stop_at: datetime) -> None:
        """A warning given before a restart of the service: it ends when it would have."""
        state = self._states.setdefault(key, _IdleState())
        state.warning = Warning(key, since, stop_at)
        state.idle_since = state.idle_since or since

    def warning(self, key: UserServer) -> Warning | None:
        state = self._states.get(key)
        return None if state is None else state.warning

    def verdict(self, key: UserServer) -> Verdict:
        """The last tick's verdict: a judgement of "busy" only by a reported kernel that
        ``busy_idle_max_s`` no longer lets spare the server is "idle" here."""
        state = self._states.get(key)
        return "unknown" if state is None else state.last

    def idle_s(self, key: UserServer) -> float:
        state = self._states.get(key)
        return 0.0 if state is None else state.idle_s

    def spared_by_kernel(self, key: UserServer) -> bool:
        """Its GPUs are idle by DCGM, and a kernel it reports busy spares it."""
        state = self._states.get(key)
        return state is not None and state.spared_by_kernel

    def dcgm_idle_s(self, key: UserServer) -> float:
        state = self._states.get(key)
        return 0.0 if state is None else state.dcgm_idle_s

    def due(self, now: datetime) -> list[Warning]:
        """Warned servers past ``stop_at`` whose last judgement is idle, earliest first."""
        return sorted(
            (
                s.warning
                for s in self._states.values()
                if s.warning is not None and s.last == "idle" and now >= s.warning.stop_at
            ),
            key=lambda w: w.stop_at,
        )

    def reclaimed(self, key: UserServer, now: datetime) -> IdleSpan | None:
        """The hub was asked to stop it: its idle span ends, reclaimed."""
        state = self._states.pop(key, None)
        if state is None or state.idle_since is None:
            return None
        return IdleSpan(
            key, state.idle_since, max(now, state.idle_since), state.idle_s, "reclaimed"
        )

    def forget(self, key: UserServer, now: datetime) -> IdleSpan | None:
        """The server is gone; its idle span so far, if any."""
        state = self._states.pop(key, None)
        if state is None or state.idle_since is None or state.idle_s <= 0:
            return None
        return IdleSpan(key, state.idle_since, max(now, state.idle_since), state.idle_s, "gone")

    def __contains__(self, key: object) -> bool:
        return key in self._states
