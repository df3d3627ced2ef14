"""EC2 from inside the instance: stop it (``stop-instance``), terminate it
(``terminate-instance``), and find out beforehand whether it can be stopped at all.

AWS stops only Spot Instances of *persistent* Spot requests; for one of a *one-time*
request ``StopInstances`` answers ``UnsupportedOperation`` ("You can't stop the Spot
Instance '…' because it is associated with a one-time Spot Instance request. You can only
stop Spot Instances associated with persistent Spot Instance requests."), and the
instance bills on until terminated. :func:`spot_stop_check` reads the request's type
(``DescribeSpotInstanceRequests`` filtered by ``instance-id``) at start, so that the
panel and the log say so before the budget is reached.

boto3 is an optional dependency (``jupyter-gpucost[aws]``); the instance's role is used
(``AWS_ENDPOINT_URL_EC2`` honoured as boto3 does). Blocking: run in a worker thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol, cast

from ..core.machine import CANNOT_STOP_ONE_TIME_SPOT, STILL_AWS_TERMINATED, Machine
from .outcome import StopResult
from .outcome import fail as _fail


class EC2Client(Protocol):
    """The EC2 calls used here (boto3's client; its answers are JSON-shaped documents)."""

    def stop_instances(self, *, InstanceIds: list[str]) -> dict[str, object]: ...

    def terminate_instances(self, *, InstanceIds: list[str]) -> dict[str, object]: ...

    def describe_spot_instance_requests(
        self,
        *,
        Filters: list[dict[str, object]],
    ) -> dict[str, object]: ...


#: how long each EC2 call at start may take: it must never hold the server's start
CHECK_TIMEOUT_S = 5.0
#: what AWS answers StopInstances for an instance that cannot be stopped
UNSUPPORTED = "UnsupportedOperation"


class _NoBoto(Exception):
    pass


def _client(
    machine: Machine, environ: Mapping[str, str], secrets: list[str], timeout_s: float | None
) -> EC2Client:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise _NoBoto from None
    region = machine.region or environ.get("AWS_DEFAULT_REGION", "") or None
    # a session of its own: credentials are read now (the instance role's, refreshed)
    session = boto3.session.Session(region_name=region)
    found = session.get_credentials()
    if found is not None:
        frozen = found.get_frozen_credentials()
        secrets.extend(s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s)
    if timeout_s is None:
        return cast(EC2Client, session.client("ec2"))
    config = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 1})
    return cast(EC2Client, session.client("ec2", config=config))


def stop(
    machine: Machine, environ: Mapping[str, str], secrets: list[str], *, terminate: bool = False
) -> StopResult:
    """``StopInstances`` (or ``TerminateInstances``) on the instance's own id."""
    if not machine.instance_id:
        return _fail("aws", "the EC2 instance id is not known (IMDS did not answer)")
    try:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    except ImportError:
        return _no_boto()
    call = "TerminateInstances" if terminate else "StopInstances"
    grant = (
        f"grant ec2:{call} on arn:aws:ec2:{machine.region or '*'}:*:instance/"
        f"{machine.instance_id} to the instance's role"
    )
    try:
        client = _client(machine, environ, secrets, None)
        if terminate:
            answer = client.terminate_instances(InstanceIds=[machine.instance_id])
        else:
            answer = client.stop_instances(InstanceIds=[machine.instance_id])
    except _NoBoto:
        return _no_boto()
    except NoCredentialsError:
        return _fail("aws", f"no AWS credentials: attach an instance role and {grant}")
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        text = e.response.get("Error", {}).get("Message", "")
        if code in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException"):
            return _fail("aws", f"EC2 refused {call} ({code}): {grant}")
        if code == UNSUPPORTED and not terminate:
            return _fail(
                "aws",
                f"EC2 cannot stop {machine.instance_id} ({code}: {text}); it bills until "
                "it is terminated: c.GpuCost.budget_action = 'terminate-instance' ends it at "
                "the budget (its instance-store data and DeleteOnTermination volumes are lost)",
            )
        return _fail("aws", f"EC2 {call} failed ({code}): {text}")
    except BotoCoreError as e:
        return _fail("aws", f"EC2 {call} failed: {e}")
    state = _changed_state(answer, "TerminatingInstances" if terminate else "StoppingInstances")
    if terminate:
        message = f"EC2 is terminating {machine.instance_id} ({state or 'shutting-down'})"
        return StopResult(True, "aws", message, STILL_AWS_TERMINATED)
    return StopResult(True, "aws", f"EC2 is stopping {machine.instance_id} ({state or 'stopping'})")


def _no_boto() -> StopResult:
    return _fail("aws", "boto3 is not installed: pip install 'jupyter-gpucost[aws]' to stop EC2")


def spot_stop_check(
    machine: Machine, environ: Mapping[str, str], timeout_s: float = CHECK_TIMEOUT_S
) -> tuple[Machine, str]:
    """``machine`` marked :attr:`~Machine.cannot_stop` where it is the instance of a
    one-time Spot request, and a line for the log ("" when there is nothing to say). Only
    for a Spot Instance on AWS; what cannot be read (no boto3, no permission, no answer)
    leaves the machine as it was and says which permission would tell."""
    if machine.provider != "aws" or machine.market != "spot" or not machine.instance_id:
        return machine, ""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return machine, "boto3 is not installed: whether this Spot Instance can stop is unknown"
    needs = "grant ec2:DescribeSpotInstanceRequests to the instance's role"
    try:
        client = _client(machine, environ, [], timeout_s)
        found = client.describe_spot_instance_requests(
            Filters=[{"Name": "instance-id", "Values": [machine.instance_id]}]
        )
        listed = found.get("SpotInstanceRequests")
        requests = [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []
    except (_NoBoto, ClientError, BotoCoreError) as e:
        return machine, f"whether this Spot Instance can stop is unknown ({e}): {needs}"
    if not requests:
        return machine, "a Spot Instance with no Spot request (a fleet's): stop is tried"
    request_id = str(requests[0].get("SpotInstanceRequestId", ""))
    kinds = [str(r.get("Type", "")) for r in requests]
    kind = kinds[0] if kinds else ""
    if kind == "one-time":
        return replace(machine, cannot_stop=CANNOT_STOP_ONE_TIME_SPOT), (
            f"Spot request {request_id} is one-time: {CANNOT_STOP_ONE_TIME_SPOT}"
        )
    return machine, f"Spot request {request_id} is {kind or 'of an unknown type'}: it can stop"


def _changed_state(answer: dict[str, object], key: str) -> str:
    """The first instance's new state in EC2's ``StopInstances``/``TerminateInstances``
    answer (``StoppingInstances[0].CurrentState.Name``), or ``""``."""
    changes = answer.get(key)
    first = changes[0] if isinstance(changes, list) and changes else None
    current = first.get("CurrentState") if isinstance(first, dict) else None
    name = current.get("Name") if isinstance(current, dict) else None
    return str(name or "")
