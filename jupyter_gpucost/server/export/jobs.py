"""Export jobs: run in background threads, report progress, cancel, clean up.

A job exports one or more sources (files or folders) to one target. It is all or
nothing: when it fails or is cancelled, every object it wrote is removed again, so a
reader of the target never finds a partial export. Each source gets a manifest next to
it, written last (``<name>.manifest.json``): what it is, where it came from, its sha256
and what the session had cost when it was exported.
"""

from __future__ import annotations

import getpass
import json
import logging
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from ...core.i18n import _
from ...core.refusal import Refusal
from ..inputs import shown
from .sources import Source, resolve_source
from .stores import Cancelled, Landed, Store, StoreError, Tuning, open_store
from .targets import ExportTarget, missing_extra, resolve

FINISHED = ("done", "failed", "cancelled")
MANIFEST_FORMAT = "jupyter-gpucost export manifest 1"
MAX_PATH_CHARS = 4096


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


@dataclass
class ExportJob:
    id: str
    target: ExportTarget
    sources: list[Source]
    user: str
    #: what the session had cost etc. when the job was started (for the manifests)
    context: dict[str, Any]
    created: datetime = field(default_factory=_now)
    state: str = "queued"
    bytes_done: int = 0
    started: datetime | None = None
    finished: datetime | None = None
    error: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    #: set once the job has ended, whatever the outcome
    ended: threading.Event = field(default_factory=threading.Event, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _started_mono: float = 0.0
    _finished_mono: float = 0.0

    @property
    def bytes_total(self) -> int:
        return sum(s.size_bytes for s in self.sources)

    def add(self, n: int) -> None:
        with self.lock:
            self.bytes_done += n

    def public(self) -> dict[str, object]:
        with self.lock:
            done, state = self.bytes_done, self.state
        total = self.bytes_total
        rate: float | None = None
        eta: float | None = None
        if self._started_mono:
            end = self._finished_mono or time.monotonic()
            elapsed = max(end - self._started_mono, 1e-6)
            rate = done / elapsed
            if state == "running" and rate > 0:
                eta = max(total - done, 0) / rate
        return {
            "id": self.id,
            "state": state,
            "target": self.target.name,
            "target_url": self.target.public_url,
            "paths": [s.requested for s in self.sources],
            "bytes_done": done,
            "bytes_total": total,
            "progress": 1.0 if total == 0 else round(done / total, 4),
            "rate_bytes_per_s": None if rate is None else round(rate, 1),
            "eta_s": None if eta is None else round(eta, 1),
            "created": _iso(self.created),
            "started": _iso(self.started),
            "finished": _iso(self.finished),
            "error": self.error,
            "results": list(self.results),
            "user": self.user,
        }


@dataclass(frozen=True)
class ExportSettings:
    targets: dict[str, ExportTarget]
    default_target: str
    root_dir: str
    allow_urls: bool = False
    allow_hidden: bool = False
    tuning: Tuning = field(default_factory=Tuning)
    max_jobs: int = 2
    keep_jobs: int = 100


class ExportManager:
    def __init__(
        self,
        settings: ExportSettings,
        *,
        context: Callable[[], dict[str, Any]] | None = None,
        log: logging.Logger | None = None,
        store_factory: Callable[[ExportTarget, Tuning], Store] = open_store,
    ) -> None:
        self.settings = settings
        self.context = context or dict
        self.log = log or logging.getLogger(__name__)
        self.store_factory = store_factory
        self.jobs: OrderedDict[str, ExportJob] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(settings.max_jobs, thread_name_prefix="gpucost-export")
        self._closed = False

    # -- what the browser may know ------------------------------------------------------

    def targets(self) -> list[dict[str, object]]:
        default = self.settings.default_target
        return [t.public(default) for t in self.settings.targets.values()]

    def payload(self) -> dict[str, object]:
        with self._lock:
            jobs = list(self.jobs.values())
        return {
            "default_target": self.settings.default_target,
            "targets": self.targets(),
            "jobs": [j.public() for j in reversed(jobs)],
        }

    # -- jobs --------------------------------------------------------------------------

    def start(self, paths: object, target: object = None, *, user: str = "") -> ExportJob:
        """Check a request and start its job (blocking: call it off the event loop)."""
        if self._closed:
            raise Refusal(_("the server is stopping"), HTTPStatus.SERVICE_UNAVAILABLE)
        if not isinstance(paths, list) or not paths:
            raise Refusal(
                _("paths must be a non-empty list of paths, not {value}").format(value=shown(paths))
            )
        if len(paths) > 1000:
            raise Refusal(_("at most 1000 paths per export"))
        for n, raw in enumerate(paths):
            if not isinstance(raw, str) or not raw.strip():
                raise Refusal(
                    _("paths[{n}] must be a non-empty string, not {value}").format(
                        n=n, value=shown(raw)
                    )
                )
            if len(raw) > MAX_PATH_CHARS or "\x00" in raw:
                raise Refusal(
                    _(
                        "paths[{n}] is not a path (at most {max} characters, no NUL): {value}"
                    ).format(n=n, max=MAX_PATH_CHARS, value=shown(raw))
                )
        try:
            chosen = resolve(
                self.settings.targets,
                self.settings.default_target,
                target,  # type: ignore[arg-type]
                allow_urls=self.settings.allow_urls,
            )
        except Refusal:
            raise
        except ValueError as e:
            raise Refusal(str(e), 400) from None
        missing = missing_extra(chosen)
        if missing:
            raise Refusal(missing, 501)
        sources: list[Source] = []
        names: set[str] = set()
        for raw in paths:
            try:
                source = resolve_source(
                    self.settings.root_dir, raw, allow_hidden=self.settings.allow_hidden
                )
            except Refusal:
                raise
            except ValueError as e:
                raise Refusal(str(e)) from None
            if source.name in names:
                raise Refusal(
                    _("two paths have the name {name}: export them one at a time").format(
                        name=repr(source.name)
                    )
                )
            names.add(source.name)
            sources.append(source)
        job = ExportJob(uuid.uuid4().hex[:12], chosen, sources, user, self.context())
        with self._lock:
            self.jobs[job.id] = job
            while len(self.jobs) > self.settings.keep_jobs:
                oldest = next(iter(self.jobs.values()))
                if oldest.state not in FINISHED:
                    break
                self.jobs.popitem(last=False)
        self.log.info(
            "jupyter-gpucost: export %s of %s to %s started",
            job.id,
            ", ".join(s.requested for s in sources),
            chosen.public_url,
        )
        self._pool.submit(self._run, job)
        return job

    def get(self, job_id: str) -> ExportJob | None:
        with self._lock:
            return self.jobs.get(job_id)

    def job(self, job_id: str) -> ExportJob:
        """The job a request names, or a 404 ``Refusal`` (any text may be asked for)."""
        job = self.get(job_id)
        if job is None:
            raise Refusal(
                _(
                    "there is no export {id}: export ids are 12 hexadecimal characters, as "
                    "POST /gpucost/api/exports answers"
                ).format(id=shown(job_id)),
                HTTPStatus.NOT_FOUND,
            )
        return job

    def cancel(self, job_id: str) -> ExportJob:
        job = self.job(job_id)
        with job.lock:
            if job.state in FINISHED:
                raise Refusal(
                    _("the export {id} has already ended ({state})").format(
                        id=job_id, state=job.state
                    ),
                    HTTPStatus.CONFLICT,
                )
            job.cancel.set()
            if job.state == "queued":
                job.state = "cancelled"
                job.finished = _now()
                job.ended.set()
        return job

    def wait(self, job_id: str, timeout_s: float) -> ExportJob | None:
        """Block until the job ends (for the budget action); None if it did not in time."""
        job = self.get(job_id)
        if job is None or job.ended.wait(timeout_s):
            return job
        return None

    def close(self) -> None:
        self._closed = True
        with self._lock:
            jobs = list(self.jobs.values())
        for job in jobs:
            job.cancel.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- the work (a pool thread) --------------------------------------------------------

    def _run(self, job: ExportJob) -> None:
        with job.lock:
            if job.state != "queued":
                return
            job.state = "running"
            job.started = _now()
            job._started_mono = time.monotonic()
        written: list[tuple[Store, str]] = []
        state, error = "done", None
        try:
            store = self.store_factory(job.target, self.settings.tuning)
            for source in job.sources:
                job.results.append(self._export_source(job, store, source, written))
        except Cancelled:
            state = "cancelled"
        except StoreError as e:
            state, error = "failed", str(e)
        except Exception as e:  # a job never takes the server down
            self.log.exception("jupyter-gpucost: export %s failed", job.id)
            state, error = "failed", f"{type(e).__name__}: {e}"
        if state != "done":
            job.results.clear()
            for store, key in reversed(written):
                store.delete(key)
        with job.lock:
            job.state = "cancelled" if job.cancel.is_set() and state != "done" else state
            job.error = None if job.state == "cancelled" else error
            job.finished = _now()
            job._finished_mono = time.monotonic()
            job.ended.set()
        self.log.info(
            "jupyter-gpucost: export %s %s%s", job.id, job.state, f": {error}" if error else ""
        )

    def _free_key(self, store: Store, name: str) -> str:
        """``name``, or ``name-2``, ``name-3``... when an export of that name is there."""
        stem, dot, ext = name.partition(".") if not name.startswith(".") else (name, "", "")
        candidate, n = name, 1
        while store.exists(candidate) or store.exists(f"{candidate}.manifest.json"):
            n += 1
            candidate = f"{stem}-{n}{dot}{ext}"
            if n > 1000:
                raise StoreError(
                    _("too many exports named {name} at the target").format(name=repr(name))
                )
        return candidate

    def _export_source(
        self, job: ExportJob, store: Store, source: Source, written: list[tuple[Store, str]]
    ) -> dict[str, object]:
        key = self._free_key(store, source.name)
        files: list[tuple[str, Landed]] = []
        if source.is_dir:
            staging = f".{key}.part-{job.id}" if store.renames else key
            written.append((store, staging))
            for f in source.files:
                object_key = f"{staging}/{f.relative}"
                if not store.renames:
                    written.append((store, object_key))
                files.append((f.relative, store.upload(f.path, object_key, job.add, job.cancel)))
            if store.renames:
                if job.cancel.is_set():
                    raise Cancelled()
                store.rename(staging, key)
                written.append((store, key))
        else:
            written.append((store, key))
            files.append(("", store.upload(source.files[0].path, key, job.add, job.cancel)))
        manifest = self._manifest(job, source, store.url(key), files)
        manifest_key = f"{key}.manifest.json"
        written.append((store, manifest_key))
        store.put_bytes(manifest_key, json.dumps(manifest, indent=2).encode() + b"\n")
        return {
            "path": source.requested,
            "url": store.url(key),
            "manifest_url": store.url(manifest_key),
            "size_bytes": source.size_bytes,
            "sha256": manifest["sha256"],
            "verified": manifest["verified"],
        }

    def _manifest(
        self, job: ExportJob, source: Source, url: str, files: list[tuple[str, Landed]]
    ) -> dict[str, object]:
        single = None if source.is_dir else files[0][1]
        return {
            "format": MANIFEST_FORMAT,
            "name": source.name,
            "kind": "folder" if source.is_dir else "file",
            "source_path": source.requested,
            "url": url,
            "size_bytes": source.size_bytes,
            "sha256": single.sha256 if single else None,
            "verified": single.verified if single else (files[0][1].verified if files else ""),
            "files": (
                [
                    {"path": rel, "size_bytes": landed.size_bytes, "sha256": landed.sha256}
                    for rel, landed in files
                ]
                if source.is_dir
                else None
            ),
            "exported_at": _iso(_now()),
            "export_id": job.id,
            "user": job.user or None,
            **job.context,
        }


#: the user name jupyter_server's default identity gives a token's user: a new random id
#: each time the server starts, which names nobody
_ANONYMOUS = re.compile(r"^[0-9a-f]{32}$")


def manifest_user(environ: Mapping[str, str], username: str | None) -> str:
    """Who exported, as the manifest names them: on JupyterHub the hub's user; elsewhere
    the user an identity provider names, else (a token's anonymous random id) the
    operating system's user running the server, the same at every start."""
    hub_user = environ.get("JUPYTERHUB_USER", "")
    if hub_user:
        return hub_user
    if username and not _ANONYMOUS.match(username):
        return username
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a uid with no name (some containers)
        return username or ""


def export_context(service: Any, user_agent_versions: dict[str, str | None]) -> dict[str, object]:
    """The session facts a manifest records (from the cost service's latest status)."""
    status = service.status()
    return {
        "session": {
            "id": status.get("session_id"),
            "cost": status.get("cost"),
            "currency": status.get("currency"),
            "rate_per_hour": status.get("rate_per_hour"),
            # deprecated twins (docs/api.md, "Money keys")
            "cost_usd": status.get("cost_usd"),
            "rate_usd_per_hour": status.get("rate_usd_per_hour"),
            "simulated": bool((status.get("telemetry") or {}).get("simulated")),
        },
        "gpus": [
            {"index": g.get("index"), "name": g.get("name"), "uuid": g.get("uuid")}
            for g in status.get("gpus", [])
        ],
        "software": user_agent_versions,
    }


def software_versions() -> dict[str, str | None]:
    """torch and CUDA versions when torch is installed (read from metadata: no import)."""
    from importlib import metadata

    from ..._version import __version__

    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = None
    cuda = None
    if torch and "+cu" in torch:
        digits = torch.split("+cu", 1)[1]
        cuda = f"{digits[:-1]}.{digits[-1]}" if digits.isdigit() and len(digits) > 1 else None
    return {"jupyter_gpucost": __version__, "torch": torch, "cuda": cuda}
