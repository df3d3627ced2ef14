"""Hostile metadata answers: whatever a metadata service (or anything claiming to be one)
answers, detection never raises, never waits past its bound, reads a bounded body, and
yields a machine whose names are fit to show and log, or the machine DMI names with the
reason its metadata was not used."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.cloud.detect import DetectSettings, Endpoints, identify
from jupyter_gpucost.cloud.http import MAX_BODY_BYTES
from jupyter_gpucost.core.machine import (
    MAX_FIELD_CHARS,
    Machine,
    MetadataError,
    cloud_from_dmi,
    from_environment,
    parse_alibaba,
    parse_aws,
    parse_azure,
    parse_gcp,
    parse_lambda,
)

AWS_DOC = Cloud().aws_identity
GCE_DOC = Cloud().gce_instance
AZURE_DOC = {"compute": Cloud().azure_compute}
ALIBABA_DOC = Cloud().alibaba_identity
#: Lambda's GET /instances/{id} "data", as the stand-in answers it
LAMBDA_DATA = {
    "id": "0920582c7ff041399e34823a0be62549",
    "status": "active",
    "region": {"name": "us-east-1", "description": "Virginia, USA"},
    "instance_type": {"name": "gpu_1x_a100_sxm4", "price_cents_per_hour": 129},
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.text(min_size=MAX_FIELD_CHARS, max_size=MAX_FIELD_CHARS + 50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner),
    max_leaves=20,
)


def valid_or_refused(parse: Callable[[], Machine]) -> None:
    """A Machine whose every name is short and printable, or MetadataError (and nothing
    else)."""
    try:
        machine = parse()
    except MetadataError as e:
        reason = str(e)
        assert reason, "a refusal says why"
        return
    for f in fields(machine):
        value = getattr(machine, f.name)
        if isinstance(value, str):
            assert len(value) <= MAX_FIELD_CHARS, f.name
            assert value.isprintable(), f.name
    # ECS's identity document does not say the market: unknown ("") there, never guessed
    known = ("spot", "on-demand", "") if machine.provider == "alibaba" else ("spot", "on-demand")
    assert machine.market in known
    assert machine.instance_type


def parsers(text: str, extra: str) -> list[Callable[[], Machine]]:
    return [
        lambda: parse_aws(text, extra),
        lambda: parse_gcp(text, extra),
        lambda: parse_azure(text),
        lambda: parse_alibaba(text),
        lambda: parse_lambda(text),
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(max_size=300))
def test_any_text_is_a_machine_or_a_reason(text: str, extra: str) -> None:
    for parse in parsers(text, extra):
        valid_or_refused(parse)


@settings(max_examples=300, deadline=None)
@given(json_values, st.text(max_size=300))
def test_any_json_is_a_machine_or_a_reason(value: Any, extra: str) -> None:
    for parse in parsers(json.dumps(value), extra):
        valid_or_refused(parse)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_documented_document_with_one_field_of_junk(data: st.DataObject) -> None:
    for doc, parse in [
        (dict(AWS_DOC), lambda t: parse_aws(t, "spot")),
        (dict(GCE_DOC), lambda t: parse_gcp(t, "my-project")),
        (dict(AZURE_DOC["compute"]), lambda t: parse_azure(json.dumps({"compute": json.loads(t)}))),
        (dict(ALIBABA_DOC), parse_alibaba),
        (dict(LAMBDA_DATA), lambda t: parse_lambda(json.dumps({"data": json.loads(t)}))),
    ]:
        key = data.draw(st.sampled_from(sorted(doc)))
        doc[key] = data.draw(json_values)
        text = json.dumps(doc)
        valid_or_refused(lambda parse=parse, text=text: parse(text))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "sys_vendor",
                "product_name",
                "product_version",
                "chassis_asset_tag",
                "board_asset_tag",
            ]
        ),
        st.text(),
    ),
    st.dictionaries(
        st.sampled_from(
            [
                "RUNPOD_POD_ID",
                "RUNPOD_DC_ID",
                "VAST_CONTAINERLABEL",
                "CONTAINER_ID",
                "AutoDLContainerUUID",
                "AutoDLRegion",
                "KUBERNETES_SERVICE_HOST",
            ]
        ),
        st.text(),
    ),
)
def test_local_signals_never_raise(dmi: dict[str, str], env: dict[str, str]) -> None:
    assert cloud_from_dmi(dmi) in (None, "aws", "gcp", "azure", "alibaba")
    found = from_environment(env)
    assert found is None or found.provider in ("runpod", "vast", "autodl")
    if found is not None and found.provider in ("vast", "autodl"):
        # an id a stop would put in a URL is digits (Vast.ai) or a printable name
        assert found.instance_id == "" or found.instance_id.isprintable()
        assert len(found.instance_id) <= MAX_FIELD_CHARS
        if found.provider == "vast":
            assert found.instance_id == "" or (
                found.instance_id.isascii() and found.instance_id.isdigit()
            )


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"a":' * 100_000,
        json.dumps({**AWS_DOC, "instanceType": "x" * 5_000_000}),
        json.dumps({**AWS_DOC, "instanceType": "g5.xlarge\n2026 INFO forged log line"}),
        json.dumps({**AWS_DOC, "instanceType": math.nan}),
        json.dumps({**AWS_DOC, "region": ["us-east-1"]}),
        '{"instanceType": "g5.xlarge", "instanceType": 1}',
        "\udcff\x00" * 1000,
    ],
    ids=["deep-list", "deep-object", "huge-field", "newline", "nan", "list", "dup", "binary"],
)
def test_the_hostile_documents_people_send_are_refused_with_a_reason(text: str) -> None:
    for parse in parsers(text, "on-demand"):
        with pytest.raises(MetadataError):
            parse()


def test_nan_and_numbers_where_names_belong_give_no_name() -> None:
    doc = {**GCE_DOC, "id": math.nan}
    found = parse_gcp(json.dumps(doc), "my-project")
    assert found.instance_id == ""
    found = parse_gcp(json.dumps({**GCE_DOC, "id": 4520031799277581759}), "p\n")
    assert found.instance_id == "4520031799277581759"
    assert found.project == "p"


# -- the adapter, through a stand-in -----------------------------------------------------

PATHS = {
    "aws": "/latest/dynamic/instance-identity/document",
    "gcp": "/computeMetadata/v1/instance/",
    "azure": "/metadata/instance",
    "alibaba": "/latest/dynamic/instance-identity/document",
}
VALID = {"aws": AWS_DOC, "gcp": GCE_DOC, "azure": AZURE_DOC, "alibaba": ALIBABA_DOC}


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud())


def detect_with(standin: StandIn, provider: str, tmp_path: Path, timeout_s: float) -> Machine:
    found = identify(
        DetectSettings(
            dmi_path=write_dmi(tmp_path / "dmi", provider),
            endpoints=Endpoints(
                aws_imds=standin.url,
                gce_metadata_host=standin.host,
                azure_imds=standin.url,
                alibaba_metadata=standin.url,
            ),
            timeout_s=timeout_s,
        ),
        {},
    )
    assert found is not None
    return found


def padded(doc: dict[str, Any], size: int) -> bytes:
    """A valid document made ``size`` bytes long by a field nobody reads."""
    text = json.dumps({**doc, "padding": ""})
    return text.replace('"padding": ""', '"padding": "' + "x" * (size - len(text)) + '"').encode()


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure", "alibaba"])
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html><body>502 Bad Gateway</body></html>", "not JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b"[" * 200_000, "not JSON"),
        (b'{"instanceType": NaN, "machineType": NaN, "compute": NaN}', "has no"),
        (b"\xff\xfe\x00" * 10_000, "not JSON"),
    ],
    ids=["html", "array", "deep", "nan", "binary"],
)
def test_a_hostile_answer_leaves_the_machine_dmi_names_with_the_reason(
    provider: str, body: bytes, reason: str, standin: StandIn, tmp_path: Path
) -> None:
    standin.cloud.raw[PATHS[provider]] = body
    found = detect_with(standin, provider, tmp_path, 2)
    assert (found.provider, found.source, found.instance_type) == (provider, "dmi", "")
    assert reason in found.note


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure", "alibaba"])
def test_a_50_mib_answer_is_read_no_further_than_the_bound(
    provider: str, standin: StandIn, tmp_path: Path
) -> None:
    # a valid document, 50 MiB long: read whole, it would be a machine; read to the
    # bound, it is cut short and refused
    standin.cloud.raw[PATHS[provider]] = padded(VALID[provider], 50 << 20)
    started = time.monotonic()
    found = detect_with(standin, provider, tmp_path, 2)
    assert time.monotonic() - started < 10
    assert found.source == "dmi"
    assert "not JSON" in found.note
    # a document just under the bound is read whole
    standin.cloud.raw[PATHS[provider]] = padded(VALID[provider], MAX_BODY_BYTES - 10)
    assert detect_with(standin, provider, tmp_path, 2).source == "dmi+metadata"


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure", "alibaba"])
def test_a_service_that_does_not_answer_in_time_costs_its_timeout(
    provider: str, standin: StandIn, tmp_path: Path
) -> None:
    standin.cloud.delay_s = 3
    started = time.monotonic()
    found = detect_with(standin, provider, tmp_path, 0.3)
    assert time.monotonic() - started < 2
    assert found.source == "dmi"
    assert "no answer" in found.note


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure", "alibaba"])
def test_an_answer_that_is_not_http_is_a_reason(
    provider: str, standin: StandIn, tmp_path: Path
) -> None:
    standin.cloud.garbage = b"\x16\x03\x01 not http at all"
    found = detect_with(standin, provider, tmp_path, 2)
    assert found.source == "dmi"
    assert "not HTTP" in found.note
