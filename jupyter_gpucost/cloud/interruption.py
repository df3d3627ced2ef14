"""Watches a spot / preemptible machine for the cloud's notice that it takes the machine back.

Asked only on a machine detected as spot (:attr:`Machine.market`) on AWS, Google Cloud or
Azure and not a shared Kubernetes node (a pod learns of its node's drain through SIGTERM,
handled by the server: :mod:`..server.spot.interruption`). Every other machine gets no watcher
and sends no packet (:func:`watchable`).

What each metadata service answers, as documented:

* **EC2** (IMDSv2, a session token as the detection uses): ``meta-data/spot/instance-action``
  is 404 until an interruption is scheduled, then ``{"action": "terminate" | "stop" |
  "hibernate", "time": "2026-11-27T14:02:00Z"}`` (two minutes ahead); AWS recommends
  checking every 5 seconds. ``meta-data/events/recommendations/rebalance`` is 404, then
  ``{"noticeTime": "..."}``: an early warning, not a notice (no deadline).
* **Google Cloud**: ``instance/preempted`` answers ``FALSE`` or ``TRUE`` (with
  ``Metadata-Flavor: Google``); ``?wait_for_change=true&timeout_sec=N`` hangs until it
  changes or N seconds pass. The notice is 30 seconds.
* **Azure** Scheduled Events: ``/metadata/scheduledevents?api-version=2020-07-01`` (``Metadata:
  true``) answers ``{"DocumentIncarnation": n, "Events": [...]}``; a Spot VM's eviction is an
  event of ``EventType`` ``Preempt`` with ``NotBefore`` (RFC 1123, at least 30 seconds
  ahead; empty once started). The first request may take up to two minutes.

The watcher runs in its own thread (never on the event loop), one request in flight at a
time, each bounded; an answer that cannot be read is logged once and asked again later.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from ..core.machine import Machine
from .detect import Endpoints
from .http import HttpFailure, request

#: AWS: "We recommend that you check for these interruption notices every 5 seconds"
AWS_POLL_S = 5.0
#: Azure: the Scheduled Events document, asked again after this many seconds
AZURE_POLL_S = 1.0
#: Google: the hanging GET waits this long for a change, then is asked again
GCP_WAIT_S = 60
AZURE_EVENTS_API_VERSION = "2020-07-01"
#: the documented notices (when an answer carries no time of its own)
AWS_NOTICE_S = 120
GCP_NOTICE_S = 30
AZURE_NOTICE_S = 30
#: Kubernetes' default terminationGracePeriodSeconds
KUBERNETES_GRACE_S = 30
#: an IMDSv2 token for the watcher lives this long; it is renewed a minute before
AWS_TOKEN_TTL_S = 21600
#: a deadline further than this from the notice is taken as this (no documented notice is
#: longer; a far-off time would let the steps wait past the real one)
MAX_NOTICE_S = 120
#: a request that waits (not the hanging GET) is bounded by this
REQUEST_TIMEOUT_S = 2.0
#: after a failed request the next one waits at least this long
ERROR_BACKOFF_S = 10.0
#: the providers whose metadata service is watched
WATCHED = ("aws", "gcp", "azure")


@dataclass(frozen=True)
class Notice:
    """The cloud's word that it takes the machine back."""

    provider: str
    #: "terminate", "stop", "hibernate" (AWS), "preempt" (Google, Azure), "sigterm"
    #: (Kubernetes), "rebalance" (AWS's early warning: not final)
    action: str
    #: when it was seen (UTC)
    seen: datetime
    #: when the machine goes (UTC); ``None`` for an early warning
    deadline: datetime | None
    #: the machine goes at the deadline (False: an early warning only)
    final: bool = True

    def seconds_left(self, now: datetime) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, (self.deadline - now).total_seconds())


def watchable(machine: Machine | None) -> bool:
    """Whether this machine's metadata service is watched: a detected spot machine of a
    watched cloud, whose whole VM this server runs on (not a shared Kubernetes node)."""
    return (
        machine is not None
        and machine.market == "spot"
        and machine.provider in WATCHED
        and not machine.shared
    )


def _bounded(deadline: datetime, now: datetime) -> datetime:
    """The deadline, between now and MAX_NOTICE_S from now."""
    return min(max(deadline, now), now + timedelta(seconds=MAX_NOTICE_S))


def _utc(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_aws_action(body: str, now: datetime) -> Notice | None:
    """``{"action": ..., "time": ...}`` -> a notice (an unknown action is still one: the
    machine is going; a time that cannot be read is the documented two minutes)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    action = doc.get("action")
    if not isinstance(action, str) or not action:
        return None
    when = doc.get("time")
    deadline = _utc(when) if isinstance(when, str) else None
    if deadline is None:
        deadline = now + timedelta(seconds=AWS_NOTICE_S)
    known = action.lower() if action.lower() in ("terminate", "stop", "hibernate") else "terminate"
    return Notice("aws", known, now, _bounded(deadline, now))


def parse_aws_rebalance(body: str, now: datetime) -> Notice | None:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("noticeTime"), str):
        return None
    return Notice("aws", "rebalance", now, None, final=False)


def parse_gcp_preempted(body: str, now: datetime) -> Notice | None:
    if body.strip().upper() != "TRUE":
        return None
    return Notice("gcp", "preempt", now, now + timedelta(seconds=GCP_NOTICE_S))


def parse_azure_events(body: str, now: datetime) -> Notice | None:
    """The first ``Preempt`` event of the document, its deadline its ``NotBefore`` (or
    now, once started)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    events = doc.get("Events") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return None
    for event in events:
        if not isinstance(event, dict) or event.get("EventType") != "Preempt":
            continue
        deadline = now
        not_before = event.get("NotBefore")
        if isinstance(not_before, str) and not_before.strip():
            try:
                parsed = parsedate_to_datetime(not_before)
            except (TypeError, ValueError, IndexError):
                parsed = None
            if parsed is not None:
                deadline = parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        return Notice("azure", "preempt", now, _bounded(deadline, now))
    return None


Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class _AwsToken:
    def __init__(self, base: str) -> None:
        self.base = base
        self.token = ""
        self.expires = 0.0

    def get(self) -> str:
        if self.token and time.monotonic() < self.expires - 60:
            return self.token
        answer = request(
            "PUT",
            f"{self.base}/latest/api/token",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": str(AWS_TOKEN_TTL_S)},
            timeout_s=REQUEST_TIMEOUT_S,
        )
        if answer.status != 200:
            raise HttpFailure(f"EC2 IMDSv2 refused a session token ({answer.status})")
        self.token = answer.body.strip()
        self.expires = time.monotonic() + AWS_TOKEN_TTL_S
        return self.token


class Checker:
    """One look at the machine's metadata service: a notice, or ``None``."""

    def __init__(
        self,
        provider: str,
        endpoints: Endpoints,
        clock: Clock = _now,
        *,
        gcp_wait_s: int = GCP_WAIT_S,
    ) -> None:
        if provider not in WATCHED:
            raise ValueError(f"no interruption notice is known for {provider!r}")
        self.provider = provider
        self.endpoints = endpoints
        self.clock = clock
        self.gcp_wait_s = gcp_wait_s
        self._aws = _AwsToken(endpoints.aws_imds.rstrip("/"))
        #: the early warning was said already (it is said once)
        self._rebalance_seen = False

    @property
    def interval_s(self) -> float:
        """Seconds between two looks (Google's look itself waits)."""
        return {"aws": AWS_POLL_S, "azure": AZURE_POLL_S}.get(self.provider, 0.0)

    def check(self) -> Notice | None:
        """Raises HttpFailure when the service gives no usable answer."""
        if self.provider == "aws":
            return self._check_aws()
        if self.provider == "gcp":
            return self._check_gcp()
        return self._check_azure()

    def _check_aws(self) -> Notice | None:
        base = self.endpoints.aws_imds.rstrip("/")
        headers = {"X-aws-ec2-metadata-token": self._aws.get()}
        answer = request(
            "GET",
            f"{base}/latest/meta-data/spot/instance-action",
            headers=headers,
            timeout_s=REQUEST_TIMEOUT_S,
        )
        if answer.status == 401:
            self._aws.token = ""
            raise HttpFailure("EC2 IMDS refused the session token (401)")
        if answer.status == 200:
            notice = parse_aws_action(answer.body, self.clock())
            if notice is not None:
                return notice
        elif answer.status != 404:
            raise HttpFailure(f"EC2 IMDS answered {answer.status} for spot/instance-action")
        if self._rebalance_seen:
            return None
        rebalance = request(
            "GET",
            f"{base}/latest/meta-data/events/recommendations/rebalance",
            headers=headers,
            timeout_s=REQUEST_TIMEOUT_S,
        )
        if rebalance.status == 200:
            notice = parse_aws_rebalance(rebalance.body, self.clock())
            if notice is not None:
                self._rebalance_seen = True
                return notice
        return None

    def _check_gcp(self) -> Notice | None:
        base = f"{self.endpoints.gce_base()}/computeMetadata/v1"
        wait_s = self.gcp_wait_s
        url = f"{base}/instance/preempted?wait_for_change=true&timeout_sec={wait_s}"
        answer = request("GET", url, headers={"Metadata-Flavor": "Google"}, timeout_s=wait_s + 5)
        if answer.status != 200:
            raise HttpFailure(f"the GCE metadata server answered {answer.status}")
        return parse_gcp_preempted(answer.body, self.clock())

    def _check_azure(self) -> Notice | None:
        base = self.endpoints.azure_imds.rstrip("/")
        url = f"{base}/metadata/scheduledevents?api-version={AZURE_EVENTS_API_VERSION}"
        # the first request may take up to two minutes (Scheduled Events is enabled by it)
        answer = request("GET", url, headers={"Metadata": "true"}, timeout_s=120)
        if answer.status != 200:
            raise HttpFailure(f"Azure Scheduled Events answered {answer.status}")
        return parse_azure_events(answer.body, self.clock())


NoticeHandler = Callable[[Notice], None]


class Watcher:
    """Looks at the metadata service in a thread until stopped; hands each new notice to
    ``on_notice`` (from that thread: the handler passes it to the event loop). A final
    notice ends the watch."""

    def __init__(
        self,
        checker: Checker,
        on_notice: NoticeHandler,
        log: logging.Logger,
    ) -> None:
        self.checker = checker
        self.on_notice = on_notice
        self.log = log
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpucost-interruption", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            wait_s = self.checker.interval_s
            try:
                notice = self.checker.check()
            except HttpFailure as e:
                if not self._failing:
                    self.log.warning("jupyter-gpucost: interruption watch: %s", e)
                self._failing = True
                wait_s = max(wait_s, ERROR_BACKOFF_S)
                notice = None
            else:
                if self._failing:
                    self.log.info("jupyter-gpucost: interruption watch answers again")
                self._failing = False
            if notice is not None:
                try:
                    self.on_notice(notice)
                except Exception:  # the watch goes on whatever the handler does
                    self.log.exception("jupyter-gpucost: the interruption handler failed")
                if notice.final:
                    return
            self._stop.wait(wait_s)


def start_watch(
    machine: Machine | None,
    endpoints: Endpoints,
    on_notice: NoticeHandler,
    log: logging.Logger,
) -> Watcher | None:
    """A started watcher for a spot machine, or ``None`` (and nothing sent) for any other."""
    if machine is None or not watchable(machine):
        return None
    watcher = Watcher(Checker(machine.provider, endpoints), on_notice, log)
    watcher.start()
    return watcher
