"""Credentials never leave the server: the IMDSv2 session token, the GCP and Azure access
tokens, the RunPod API key and the AWS keys are in no stop message or record, no status,
no log line and no error, even when the cloud refuses and echoes them back, times out or
answers something that is not HTTP (loopback stand-ins only)."""

from __future__ import annotations

import base64
import json
import logging
import string
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from cloud_standins import (
    AZURE_TOKEN,
    GCE_TOKEN,
    IMDS_TOKEN,
    RUNPOD_KEY,
    Cloud,
    StandIn,
    serve,
    write_dmi,
)
from hypothesis import given
from hypothesis import strategies as st
from test_budget_api import budget, wait_for

from jupyter_gpucost.cloud.detect import Endpoints
from jupyter_gpucost.cloud.http import REDACTED, Answer
from jupyter_gpucost.cloud.stop import StopResult, StopSettings, stop_instance
from jupyter_gpucost.core.machine import Machine

AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_SESSION = "IQoJb3JpZ2luX2VjEXAMPLEsessiontoken"
SECRETS = (IMDS_TOKEN, GCE_TOKEN, AZURE_TOKEN, RUNPOD_KEY, AWS_KEY_ID, AWS_SECRET, AWS_SESSION)


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


@pytest.fixture
def log_lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every log record of this process, whichever logger and handlers it goes to."""
    lines: list[str] = []
    real = logging.Logger.callHandlers

    def record(self: logging.Logger, rec: logging.LogRecord) -> None:
        lines.append(rec.getMessage())
        if rec.exc_info:
            lines.append(logging.Formatter().formatException(rec.exc_info))
        real(self, rec)

    monkeypatch.setattr(logging.Logger, "callHandlers", record)
    return lines


@pytest.fixture
def metadata() -> Iterator[StandIn]:
    yield from serve(Cloud())


@pytest.fixture
def api() -> Iterator[StandIn]:
    yield from serve(Cloud())


def gcp_machine() -> Machine:
    return Machine(
        "gcp",
        "a3-highgpu-1g",
        "us-central1",
        "spot",
        "4520031799277581759",
        source="dmi+metadata",
        zone="us-central1-a",
        project="my-project",
        name="train-1",
    )


def azure_machine() -> Machine:
    return Machine(
        "azure",
        "Standard_NC24ads_A100_v4",
        "eastus",
        "on-demand",
        "02aab8a4",
        source="dmi+metadata",
        name="gpu-vm",
        resource_group="ml-rg",
        subscription_id="8d10da13-8125-4ba9-a717-bf7490507b3d",
    )


MACHINES = {
    "gcp": gcp_machine(),
    "azure": azure_machine(),
    "runpod": Machine("runpod", instance_id="abc123xyz", source="environment"),
}


def stop(provider: str, metadata: StandIn, api: StandIn, timeout_s: float = 5) -> StopResult:
    """The provider's stop: tokens from the metadata stand-in, the API call to ``api``."""
    return stop_instance(
        MACHINES[provider],
        StopSettings(
            gcp_compute_url=api.url,
            azure_management_url=api.url,
            runpod_api_url=f"{api.url}/v1",
            timeout_s=timeout_s,
        ),
        Endpoints(aws_imds=metadata.url, gce_metadata_host=metadata.host, azure_imds=metadata.url),
        {"RUNPOD_API_KEY": RUNPOD_KEY},
    )


def sent_credential(api: StandIn) -> str:
    """The credential the API stand-in received (so the test knows it was sent)."""
    return " ".join(h.get("Authorization", "") for _, _, h in api.cloud.requests)


# -- the drivers --------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["gcp", "azure", "runpod"])
@pytest.mark.parametrize("status", [401, 403, 404, 429, 500, 503])
def test_a_refusal_that_echoes_the_credential_does_not_repeat_it(
    provider: str, status: int, metadata: StandIn, api: StandIn
) -> None:
    api.cloud.allowed = False
    api.cloud.refusal_status = status
    api.cloud.echo_credentials = True
    result = stop(provider, metadata, api)
    assert not result.ok
    assert str(status) in result.message
    # the credential went out and came back in the body; the message has none of it
    assert any(s in sent_credential(api) for s in SECRETS)
    assert leaked(result.message) == []
    assert api.cloud.stopped == []


@pytest.mark.parametrize("provider", ["gcp", "azure", "runpod"])
def test_an_answer_that_is_not_http_is_not_quoted(
    provider: str, metadata: StandIn, api: StandIn
) -> None:
    api.cloud.garbage = b"SSH-2.0-OpenSSH_9.6"
    result = stop(provider, metadata, api)
    assert not result.ok
    assert "not HTTP" in result.message
    assert "SSH-2.0" not in result.message
    assert any(s in sent_credential(api) for s in SECRETS)
    assert leaked(result.message) == []


@pytest.mark.parametrize("provider", ["gcp", "azure", "runpod"])
def test_a_cloud_that_does_not_answer_in_time_is_a_failure_in_bounded_time(
    provider: str, metadata: StandIn, api: StandIn
) -> None:
    api.cloud.delay_s = 2
    started = time.monotonic()
    result = stop(provider, metadata, api, timeout_s=0.3)
    assert time.monotonic() - started < 1.5
    assert not result.ok
    assert "no answer" in result.message
    assert leaked(result.message) == []


def test_a_metadata_service_that_answers_garbage_for_the_token_says_so(
    metadata: StandIn, api: StandIn
) -> None:
    metadata.cloud.garbage = b"\x00\x01garbage"
    for provider in ("gcp", "azure"):
        result = stop(provider, metadata, api)
        assert not result.ok
        assert leaked(result.message) == []
    assert api.cloud.requests == []


def test_the_snippet_of_an_answer_blanks_out_what_the_request_carried() -> None:
    body = json.dumps({"error": f"bad token Bearer {GCE_TOKEN}; {IMDS_TOKEN}"})
    answer = Answer(500, body, {}, (f"Bearer {GCE_TOKEN}", IMDS_TOKEN))
    assert leaked(answer.snippet()) == []
    assert REDACTED in answer.snippet()
    # a body longer than the snippet, cut inside the token, leaves no part of it
    cut = Answer(500, "x" * 290 + GCE_TOKEN, {}, (f"Bearer {GCE_TOKEN}",))
    assert GCE_TOKEN[:10] not in cut.snippet()


#: a temporary token as the clouds issue them: base64, with "+", "/" and "="
STS_TOKEN = "FwoGZXIvYXdzEBYaDH+k3yRYuGSSecRetT0ken/Pn8nAhbQ+z3JzcaD7KYv+Q=="
AWS_TEMP_SECRET = "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"


def _echoes() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Each provider's documented error shape, echoing a credential the request carried,
    in the encoding that provider writes: (provider, the secret, the body, what in the
    body would be the secret, in that encoding)."""
    from urllib.parse import quote

    def percent(text: str) -> str:
        return quote(text, safe="-_.~")

    form = f"AccessKeyId=STS.NUgYrLnoC37mZZCNnAbez2&SecurityToken={percent(STS_TOKEN)}"
    signed = "POST&%2F&" + percent(f"Action=StopInstance&{form}")
    canonical = (
        f"POST\n/\nAction=StopInstances&X-Amz-Security-Token={percent(STS_TOKEN)}\n"
        f"host:ec2.us-east-1.amazonaws.com\nx-amz-security-token:{STS_TOKEN}\n"
    )
    net_escaped = STS_TOKEN.replace("+", "\\u002B")
    go_escaped = STS_TOKEN.replace("=", "\\u003d")
    basic = base64.b64encode(f"AKIAI44QH8DHBEXAMPLE:{AWS_TEMP_SECRET}".encode()).decode()
    twice = percent(percent(STS_TOKEN))
    return [
        # Alibaba: SignatureDoesNotMatch quotes the string signed, values encoded twice
        (
            "alibaba",
            STS_TOKEN,
            json.dumps(
                {
                    "RequestId": "1DD9FD9A-8E57-43E5-B911-E4F5AD2027F7",
                    "HostId": "ecs.aliyuncs.com",
                    "Code": "SignatureDoesNotMatch",
                    "Message": "Specified signature is not matched with our calculation. "
                    f"server string to sign is:{signed}",
                }
            ),
            (twice[:12], twice[-12:], "SSecRetT0ken"),
        ),
        # AWS (S3's SignatureDoesNotMatch): the canonical request quoted, its bytes in hex
        (
            "aws",
            STS_TOKEN,
            "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we "
            "calculated does not match the signature you provided.</Message>"
            f"<AWSAccessKeyId>{AWS_KEY_ID}</AWSAccessKeyId>"
            f"<CanonicalRequest>{canonical}</CanonicalRequest>"
            f"<CanonicalRequestBytes>{canonical.encode().hex(' ')}</CanonicalRequestBytes>"
            "<RequestId>5d6f</RequestId></Error>",
            (percent(STS_TOKEN)[:12], STS_TOKEN, STS_TOKEN.encode().hex(" ")[:30]),
        ),
        # AWS: a form-encoded body echoed (the query API's parameters)
        (
            "aws",
            AWS_TEMP_SECRET,
            f"<Message>bad request SecretKey={quote(AWS_TEMP_SECRET)}</Message>",
            ("je7MtGbClwBF", "9Utk"),
        ),
        # GCP: {"error": {"code", "message", "status"}}, the token JSON-escaped the Go way
        (
            "gcp",
            STS_TOKEN,
            json.dumps(
                {
                    "error": {
                        "code": 401,
                        "message": "Request had invalid authentication credentials.",
                        "status": "UNAUTHENTICATED",
                    }
                }
            ).replace('credentials."', f'credentials: {go_escaped}"'),
            ("SSecRetT0ken", "Pn8nAhbQ"),
        ),
        # Azure: {"error": {"code", "message"}}, written by .NET ("+" as \u002B)
        (
            "azure",
            STS_TOKEN,
            '{"error":{"code":"InvalidAuthenticationToken","message":"The access token '
            f'is invalid: {net_escaped}"}}}}',
            ("SSecRetT0ken", "Pn8nAhbQ"),
        ),
        # a Basic credential quoted back: base64 of "id:secret"
        ("basic", AWS_TEMP_SECRET, f"401 for Authorization: Basic {basic}", (basic[30:50],)),
        # a JSON writer that escapes "/" (PHP's, some Java's)
        (
            "json",
            AWS_TEMP_SECRET,
            json.dumps({"m": AWS_TEMP_SECRET}).replace("/", "\\/"),
            ("je7MtGbClwBF", "9Utk"),
        ),
    ]


@pytest.mark.parametrize(("provider", "secret", "body", "tells"), _echoes())
def test_a_credential_echoed_in_any_encoding_is_blanked(
    provider: str, secret: str, body: str, tells: tuple[str, ...]
) -> None:
    from jupyter_gpucost.cloud.http import redact

    assert all(t in body for t in tells), provider  # the echo is there to blank
    shown = redact(body, [secret, AWS_KEY_ID])
    assert [t for t in tells if t in shown] == [], (provider, shown)
    assert AWS_KEY_ID not in shown
    assert REDACTED in shown
    # and through an answer cut for a message: the cut never leaves a part of one
    long = Answer(400, "x" * 250 + body, {}, (secret,))
    assert [t for t in tells if t[:10] in long.snippet()] == [], (provider, long.snippet())


class _EchoingEc2(BaseHTTPRequestHandler):
    """An EC2 endpoint that refuses every call and quotes the request's credentials."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        quoted = f"{self.headers.get('Authorization')} {self.headers.get('X-Amz-Security-Token')}"
        code = self.server.code  # type: ignore[attr-defined]
        body = (
            '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
            f"<Code>{code}</Code><Message>request {quoted} secret {AWS_SECRET}</Message>"
            "</Error></Errors><RequestID>5d6f</RequestID></Response>"
        ).encode()
        self.send_response(401 if code == "AuthFailure" else 403)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("code", ["AuthFailure", "UnauthorizedOperation", "Blocked"])
def test_ec2_quoting_the_aws_keys_back_does_not_put_them_in_the_message(
    code: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingEc2)
    server.code = code  # type: ignore[attr-defined]
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEY_ID)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
        monkeypatch.setenv("AWS_SESSION_TOKEN", AWS_SESSION)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        machine = Machine("aws", "p5.48xlarge", "us-east-1", "on-demand", "i-0123456789abcdef0")
        # the keys are read from the environment by boto3, not handed to the driver
        result = stop_instance(machine, StopSettings(), Endpoints(), {})
    finally:
        server.shutdown()
        server.server_close()
    assert not result.ok
    assert code in result.message
    assert leaked(result.message) == []


# -- detection: the IMDSv2 session token ----------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        f"<html>unauthorized: token {IMDS_TOKEN}</html>",
        json.dumps({"error": f"bad token {IMDS_TOKEN}", "instanceType": 7}),
    ],
)
def test_an_identity_document_quoting_the_session_token_is_not_repeated(
    answer: str,
    tmp_path: Path,
    metadata: StandIn,
    log_lines: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from jupyter_gpucost.server.machine.setup import MachineTraits, detect_machine
    from jupyter_gpucost.server.settings import machine_settings

    metadata.cloud.raw["/latest/dynamic/instance-identity/document"] = answer.encode()
    traits = MachineTraits(dmi_path=write_dmi(tmp_path / "dmi", "aws"))
    env = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata.url}
    caplog.set_level(logging.INFO, logger="gpucost-test")
    found = detect_machine(machine_settings(traits, env), env, logging.getLogger("gpucost-test"))
    assert found is not None
    assert (found.provider, found.source, found.instance_type) == ("aws", "dmi", "")
    assert "identity document" in found.note
    # the token was asked for and sent with the request the service answered
    assert ("PUT", "/latest/api/token") in [(m, p) for m, p, _ in metadata.cloud.requests]
    assert leaked(json.dumps(found.to_json())) == []
    assert any("identity document" in line for line in log_lines)
    assert leaked("\n".join(log_lines)) == []


# -- the whole server: a refused stop -----------------------------------------------------


class TestARefusedGcpStopThroughTheServer:
    @pytest.fixture(params=[403, 500])
    def api(self, request: pytest.FixtureRequest) -> Iterator[StandIn]:
        cloud = Cloud(allowed=False, refusal_status=request.param, echo_credentials=True)
        yield from serve(cloud)

    @pytest.fixture
    def stops(self, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
        """The server's own stop (the fallback), recorded instead of done."""
        from jupyter_server.serverapp import ServerApp

        stopped: list[bool] = []
        monkeypatch.setattr(ServerApp, "stop", lambda self, from_signal=False: stopped.append(True))
        return stopped

    @pytest.fixture
    def gpucost_config(
        self,
        tmp_path: Path,
        metadata: StandIn,
        api: StandIn,
        stops: list[bool],
        monkeypatch: pytest.MonkeyPatch,
    ) -> dict[str, object]:
        monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
        monkeypatch.setenv("RUNPOD_API_KEY", RUNPOD_KEY)
        return {
            "telemetry": "simulated",
            "simulated_trace": "h100-live",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "dmi_path": write_dmi(tmp_path / "dmi", "gcp"),
            "gcp_compute_url": api.url,
            "hard_budget_usd": 0.004,
            "budget_grace_s": 0,
            "budget_save_timeout_s": 1,
            "budget_action": "stop-instance",
            "budget_state_path": str(tmp_path / "budget.json"),
            "ledger_url": "none",
        }

    async def test_no_token_in_the_record_the_status_the_file_or_the_log(
        self,
        jp_fetch: Any,
        api: StandIn,
        stops: list[bool],
        tmp_path: Path,
        log_lines: list[str],
    ) -> None:
        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the stop-instance action")
        # the token went to the API and came back quoted in its refusal
        assert GCE_TOKEN in sent_credential(api)
        assert api.cloud.stopped == []
        payload = await budget(jp_fetch)
        last = payload["last_action"]
        assert last["instance"].startswith("failed:")
        assert str(api.cloud.refusal_status) in last["instance"]
        actions = (await jp_fetch("gpucost", "api", "budget", "actions")).body.decode()
        status = (await jp_fetch("gpucost", "api", "status")).body.decode()
        assert json.loads(status)["machine"]["instance_type"] == "a3-highgpu-1g"
        await wait_for(self._stopped(stops), 10, "the fallback: the server stopped")
        on_disk = (tmp_path / "budget.json").read_text()
        assert "stop-instance" in on_disk
        log = "\n".join(log_lines)
        assert "could not stop the machine" in log
        for where, text in [
            ("budget", json.dumps(payload)),
            ("budget/actions", actions),
            ("status", status),
            ("budget.json", on_disk),
            ("log", log),
        ]:
            assert leaked(text) == [], where

    @staticmethod
    def _stopped(stops: list[bool]) -> Any:
        async def check() -> bool:
            return bool(stops)

        return check


def _lower_hex(text: str) -> str:
    import re

    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


ENCODERS: dict[str, Callable[[str], str]] = {
    "as is": lambda s: s,
    "url": lambda s: quote(s, safe=""),
    "url, rfc 3986": lambda s: quote(s, safe="-_.~"),
    "url, lower hex": lambda s: _lower_hex(quote(s, safe="")),
    "url twice": lambda s: quote(quote(s, safe="-_.~"), safe="-_.~"),
    "form": lambda s: quote_plus(s),
    "json": lambda s: json.dumps(s)[1:-1],
    "json, slash escaped": lambda s: json.dumps(s)[1:-1].replace("/", "\\/"),
    "json, all escaped": lambda s: "".join(c if c.isalnum() else f"\\u{ord(c):04X}" for c in s),
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "base64, url-safe": lambda s: base64.urlsafe_b64encode(s.encode()).decode(),
    "hex": lambda s: s.encode().hex(" "),
}


@given(
    secret=st.text(
        alphabet=string.ascii_letters + string.digits + "+/=-_.~!*'()&:@ ",
        min_size=12,
        max_size=60,
    ).filter(lambda s: s.strip() == s),
    encoder=st.sampled_from(sorted(ENCODERS)),
)
def test_any_secret_in_any_encoding_is_blanked(secret: str, encoder: str) -> None:
    from jupyter_gpucost.cloud.http import redact

    echoed = ENCODERS[encoder](secret)
    shown = redact(f"Error 400: {echoed} (request 5d6f)", [secret])
    assert echoed not in shown
    assert shown.startswith("Error 400: ")
    assert shown.endswith(" (request 5d6f)")
