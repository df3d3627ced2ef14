"""Stopping the machines people rent by the container: Vast.ai, Lambda, AutoDL.

* Vast.ai: ``PUT /instances/{CONTAINER_ID}/`` with ``{"state": "stopped"}`` and the
  instance's own ``CONTAINER_API_KEY`` (docs.vast.ai "Docker Execution Environment":
  "Per-instance API key for CLI commands from inside the container"; the CLI's
  ``vastai stop instance``). A stopped instance: "Disk charges continue; no GPU charges"
  (docs.vast.ai, ``show instances``' ``actual_status``).
* AutoDL: the container runs ``shutdown`` (``c.GpuCost.autodl_shutdown_command``), which
  powers the instance off and ends its billing (AutoDL's help pages, as the users' guides
  quote them: 关机 stops the meter and keeps the disks; a powered-off instance is released
  after 15 days).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping

from ..core.i18n import _
from ..core.machine import STILL_AUTODL, STILL_VAST, Machine
from .http import request
from .outcome import StopResult, StopSettings, fail


def stop_vast(machine: Machine, settings: StopSettings, environ: Mapping[str, str]) -> StopResult:
    """What ``vastai stop instance $CONTAINER_ID`` sends: ``PUT /instances/{id}/`` with
    ``{"state": "stopped"}`` and the instance's own key; it answers ``{"success": true}``."""
    key = environ.get("CONTAINER_API_KEY", "")
    if not key:
        return fail(
            "vast",
            _(
                "CONTAINER_API_KEY is not set: Vast.ai puts it in every instance; pass it "
                "to the server's environment"
            ),
        )
    if not (machine.instance_id.isascii() and machine.instance_id.isdigit()):
        return fail("vast", _("the Vast.ai instance id (CONTAINER_ID) is not known"))
    url = f"{settings.vast_api_url.rstrip('/')}/instances/{machine.instance_id}/"
    answer = request(
        "PUT",
        url,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        body=b'{"state": "stopped"}',
        timeout_s=settings.timeout_s,
    )
    if answer.status in (401, 403):
        return fail(
            "vast",
            _(
                "Vast.ai refused to stop the instance ({status}): CONTAINER_API_KEY must be "
                "this instance's key, allowed to manage it"
            ).format(status=answer.status),
        )
    try:
        success = json.loads(answer.body).get("success") is True
    except (ValueError, AttributeError):
        success = False
    if answer.status != 200 or not success:
        return fail(
            "vast",
            _("Vast.ai answered {status}: {answer}").format(
                status=answer.status, answer=answer.snippet()
            ),
        )
    return StopResult(
        True,
        "vast",
        _("Vast.ai is stopping instance {instance}").format(instance=machine.instance_id),
        STILL_VAST,
    )


def stop_autodl(settings: StopSettings) -> StopResult:
    """The container runs ``shutdown``; a command that fails says why."""
    argv = list(settings.autodl_shutdown_command)
    grant = _(
        "shutdown must run as root in the container (or set c.GpuCost.autodl_shutdown_command, "
        "e.g. ['sudo', 'shutdown'])"
    )
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=settings.timeout_s * 6, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        return fail(
            "autodl",
            _("{command} could not run ({why}): {grant}").format(
                command=" ".join(argv), why=e, grant=grant
            ),
        )
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout)[-300:].split())
        return fail(
            "autodl",
            _("{command} exited with {code} ({output}): {grant}").format(
                command=" ".join(argv), code=done.returncode, output=tail, grant=grant
            ),
        )
    return StopResult(
        True,
        "autodl",
        _("AutoDL is powering the instance off ({command})").format(command=" ".join(argv)),
        STILL_AUTODL,
    )
