"""The machine's identity: DMI and environment first, a metadata service only where they
name its cloud, and the whole-instance price that follows (admin settings win)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi

from jupyter_gpucost.cloud.detect import DetectSettings, Endpoints, identify
from jupyter_gpucost.core.attached_gpus import find_vm, load_vm_rows
from jupyter_gpucost.core.catalog import load_catalog
from jupyter_gpucost.core.gpu_models import _MODEL_RULES
from jupyter_gpucost.core.instance_prices import (
    AdminPrices,
    find_instance,
    load_instance_rows,
    plan_prices,
    whole_instance,
)
from jupyter_gpucost.core.machine import Machine, cloud_from_dmi, describe

ROWS = load_instance_rows()
CATALOG = load_catalog()
#: the models NVML names are matched to: an instance row's GPUs must be one of them
KNOWN_MODELS = {m for _, m in _MODEL_RULES} - {"A100"} | {"A100-40GB", "A100-80GB"}


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud())


def settings(dmi: str, standin: StandIn | None = None) -> DetectSettings:
    if standin is None:
        return DetectSettings(dmi_path=dmi, timeout_s=2.0)
    return DetectSettings(
        dmi_path=dmi,
        endpoints=Endpoints(
            aws_imds=standin.url, gce_metadata_host=standin.host, azure_imds=standin.url
        ),
        timeout_s=2.0,
    )


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every connection attempted by this process (sockets and create_connection)."""
    seen: list[object] = []
    real_connect = socket.socket.connect
    real_create = socket.create_connection

    def connect(self: socket.socket, address: Any) -> Any:
        seen.append(address)
        return real_connect(self, address)

    def create(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        seen.append(address)
        return real_create(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", create)
    return seen


# -- local signals ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dmi", "cloud"),
    [
        ({"sys_vendor": "Amazon EC2", "product_name": "g5.xlarge"}, "aws"),
        ({"sys_vendor": "Xen", "product_version": "4.11.amazon"}, "aws"),
        ({"sys_vendor": "Google", "product_name": "Google Compute Engine"}, "gcp"),
        ({"chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77"}, "azure"),
        ({"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}, None),
        ({"sys_vendor": "Dell Inc.", "product_name": "PowerEdge R750xa"}, None),
        ({}, None),
    ],
)
def test_dmi_names_the_cloud_as_ds_identify_does(dmi: dict[str, str], cloud: str | None) -> None:
    assert cloud_from_dmi(dmi) == cloud


def test_a_machine_with_no_dmi_sends_nothing(tmp_path: Path, connections: list[object]) -> None:
    found = identify(settings(str(tmp_path / "missing")), {"HOME": "/root"})
    assert found is None
    assert connections == []


def test_a_runpod_pod_is_known_from_its_environment_without_a_packet(
    tmp_path: Path, connections: list[object]
) -> None:
    found = identify(
        settings(str(tmp_path)), {"RUNPOD_POD_ID": "abc123xyz", "RUNPOD_DC_ID": "EU-RO-1"}
    )
    assert found == Machine(
        "runpod", region="EU-RO-1", instance_id="abc123xyz", source="environment"
    )
    assert connections == []


def test_a_server_with_no_dmi_starts_without_a_connection_to_a_metadata_service(
    tmp_path: Path, connections: list[object]
) -> None:
    # what the server does at start-up (server.machine.setup.detect_machine), on a machine with
    # neither DMI nor a cloud's variables: no connection is attempted at all
    import logging

    from jupyter_gpucost.server.machine.setup import MachineTraits, detect_machine
    from jupyter_gpucost.server.settings import machine_settings

    traits = MachineTraits(dmi_path=str(tmp_path))
    assert detect_machine(machine_settings(traits, {}), {}, logging.getLogger("t")) is None
    assert connections == []


# -- metadata services (loopback stand-ins) ---------------------------------------------


def test_aws_is_read_through_imdsv2(tmp_path: Path, standin: StandIn) -> None:
    dmi = write_dmi(tmp_path / "dmi", "aws")
    standin.cloud.aws_life_cycle = "spot"
    found = identify(settings(dmi, standin), {})
    assert found is not None
    assert (found.provider, found.instance_type, found.market, found.region) == (
        "aws",
        "p5.48xlarge",
        "spot",
        "us-east-1",
    )
    assert found.instance_id == "i-0123456789abcdef0"
    assert found.source == "dmi+metadata"
    # a session token first (PUT), then every GET carries it: IMDSv2, never v1
    first_method, first_path, first_headers = standin.cloud.requests[0]
    assert (first_method, first_path) == ("PUT", "/latest/api/token")
    assert "x-aws-ec2-metadata-token-ttl-seconds" in {k.lower() for k in first_headers}
    for _, _, headers in standin.cloud.requests[1:]:
        assert {k.lower(): v for k, v in headers.items()}["x-aws-ec2-metadata-token"]
    assert describe(found) == "p5.48xlarge, spot, us-east-1 (detected)"


def test_gcp_is_read_from_the_metadata_server(tmp_path: Path, standin: StandIn) -> None:
    found = identify(settings(write_dmi(tmp_path / "dmi", "gcp"), standin), {})
    assert found is not None
    assert (found.instance_type, found.market, found.region, found.zone) == (
        "a3-highgpu-1g",
        "spot",
        "us-central1",
        "us-central1-a",
    )
    assert (found.project, found.name) == ("my-project", "train-1")
    for _, _, headers in standin.cloud.requests:
        assert {k.lower(): v for k, v in headers.items()}["metadata-flavor"] == "Google"


def test_azure_is_read_from_imds(tmp_path: Path, standin: StandIn) -> None:
    standin.cloud.azure_compute["priority"] = "Spot"
    found = identify(settings(write_dmi(tmp_path / "dmi", "azure"), standin), {})
    assert found is not None
    assert (found.instance_type, found.market, found.region) == (
        "Standard_NC24ads_A100_v4",
        "spot",
        "eastus",
    )
    assert (found.resource_group, found.name) == ("ml-rg", "gpu-vm")
    for _, _, headers in standin.cloud.requests:
        assert {k.lower(): v for k, v in headers.items()}["metadata"] == "true"


def test_a_silent_metadata_service_leaves_what_dmi_says(tmp_path: Path) -> None:
    closed = DetectSettings(
        dmi_path=write_dmi(tmp_path / "dmi", "aws"),
        endpoints=Endpoints(aws_imds="http://127.0.0.1:9"),
        timeout_s=0.5,
    )
    found = identify(closed, {})
    assert found is not None
    assert (found.provider, found.instance_type, found.source) == ("aws", "", "dmi")
    assert found.instance_id == "i-0123456789abcdef0"
    assert "no answer" in found.note


# -- whole-instance prices ----------------------------------------------------------------


def test_the_catalog_prices_the_instance_families_people_rent() -> None:
    for provider, instance in [
        ("aws", "g4dn.xlarge"),
        ("aws", "g5.xlarge"),
        ("aws", "g6.xlarge"),
        ("aws", "g6e.xlarge"),
        ("aws", "p4d.24xlarge"),
        ("aws", "p5.48xlarge"),
        ("gcp", "a2-highgpu-1g"),
        ("gcp", "a3-highgpu-8g"),
        ("gcp", "g2-standard-4"),
        ("azure", "Standard_NC24ads_A100_v4"),
        ("azure", "Standard_ND96isr_H100_v5"),
    ]:
        row = find_instance(ROWS, provider=provider, instance=instance, market="on-demand")
        assert row is not None, instance
        assert row.source
        assert row.confidence
        assert row.gpu_model in KNOWN_MODELS, row
    assert find_instance(ROWS, provider="gcp", instance="a3-highgpu-1g", market="spot")
    # an N1 VM is priced as GCP bills it: its own row, plus each attached GPU's
    for market in ("on-demand", "spot"):
        vm = find_vm(load_vm_rows(), provider="gcp", machine_type="n1-standard-4", market=market)
        assert vm is not None
        assert vm.source
        assert vm.confidence
        assert load_catalog().find(provider="gcp", market=market, model="T4") is not None


#: every size of the families users rent, as each provider names them
FAMILIES = {
    "aws": [
        *(f"g4dn.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")),
        "g4dn.metal",
        *(
            f"{f}.{s}"
            for f in ("g5", "g6", "g6e")
            for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
        ),
        *(f"{f}.{s}" for f in ("g5", "g6", "g6e") for s in ("24xlarge", "48xlarge")),
        "p3.2xlarge",
        "p3.8xlarge",
        "p3.16xlarge",
        "p3dn.24xlarge",
        "p5.4xlarge",
        "p5.48xlarge",
        "p5en.48xlarge",
    ],
    "gcp": [
        *(f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)),
        "a2-megagpu-16g",
        *(f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)),
        "a3-highgpu-8g",
        *(f"g2-standard-{n}" for n in (4, 8, 12, 16, 24, 32, 48, 96)),
    ],
    "azure": [
        *(f"Standard_NC{n}as_T4_v3" for n in (4, 8, 16, 64)),
        *(f"Standard_NC{n}ads_A100_v4" for n in (24, 48, 96)),
        "Standard_NC40ads_H100_v5",
        "Standard_NC80adis_H100_v5",
        "Standard_ND96asr_v4",
        "Standard_ND96amsr_A100_v4",
        "Standard_ND96isr_H100_v5",
    ],
    "alibaba": [
        *(
            f"ecs.gn7i-c{c}g1.{s}"
            for c, s in (("8", "2xlarge"), ("16", "4xlarge"), ("32", "8xlarge"))
        ),
        "ecs.gn7i-2x.8xlarge",
        *(
            f"ecs.gn6i-c{c}g1.{s}"
            for c, s in (("4", "xlarge"), ("8", "2xlarge"), ("16", "4xlarge"))
        ),
        "ecs.gn7e-c16g1.4xlarge",
        "ecs.gn7e-c16g1.8xlarge",
        *(f"ecs.gn6e-c12g1.{s}" for s in ("3xlarge", "12xlarge", "24xlarge")),
    ],
    "lambda": [
        "gpu_1x_h100_pcie",
        *(f"gpu_{n}x_h100_sxm5" for n in (1, 2, 4, 8)),
        "gpu_8x_a100_80gb_sxm4",
        "gpu_1x_gh200",
        "gpu_1x_b200_sxm6",
    ],
}


@pytest.mark.parametrize("provider", sorted(FAMILIES))
def test_every_size_of_the_families_users_rent_has_its_own_row_for_sale(provider: str) -> None:
    for instance in FAMILIES[provider]:
        row = find_instance(ROWS, provider=provider, instance=instance, market="on-demand")
        assert row is not None, instance
        assert not row.not_for_sale, row
        assert row.gpu_model in KNOWN_MODELS, row


def test_runpod_prices_the_gpus_people_rent_on_both_clouds() -> None:
    for model in ("H100-80GB", "H100-NVL", "A100-80GB", "H200", "L40S", "RTX-4090", "B200"):
        for cloud in ("community", "secure"):
            row = CATALOG.find(provider="runpod", market="on-demand", model=model, instance=cloud)
            assert row is not None, (model, cloud)
            assert row.instance == cloud


def test_shares_and_base_add_up_to_the_instance_price_exactly() -> None:
    for row in ROWS:
        pricing = whole_instance(row)
        share = pricing.per_gpu.per_gpu_hour
        assert share * row.gpus + pricing.base_per_hour == row.per_hour
        assert 0 <= pricing.base_per_hour < Decimal("0.000001") * row.gpus


#: one detected multi-GPU machine per provider, its row's price, and the price per GPU of
#: the provider's per-GPU row (what it would cost if the size's own row were missing)
MULTI_GPU = [
    ("aws", "g5.24xlarge", 4, "8.144", "1.006"),
    ("gcp", "g2-standard-24", 2, "2.0008", "0.70683"),
    ("azure", "Standard_NC96ads_A100_v4", 4, "19.108", "3.673"),
    ("azure", "Standard_NC80adis_H100_v5", 2, "17.64", "6.98"),
    ("alibaba", "ecs.gn7i-2x.8xlarge", 2, "20.2707", "9.6166"),
    ("lambda", "gpu_4x_h100_sxm5", 4, "16.36", "4.29"),
]


#: the region the machine is detected in, where the provider's rows are per region
MULTI_GPU_REGION = {"aws": "us-east-1", "gcp": "us-central1"}


@pytest.mark.parametrize(("provider", "instance", "gpus", "price", "per_gpu_row"), MULTI_GPU)
def test_a_detected_multi_gpu_machine_is_priced_from_its_own_row(
    provider: str, instance: str, gpus: int, price: str, per_gpu_row: str
) -> None:
    plan = _plan(
        AdminPrices(),
        provider=provider,
        instance_type=instance,
        market="on-demand",
        shared=False,
        region=MULTI_GPU_REGION.get(provider, ""),
    )
    assert plan.whole is not None, plan.note
    assert (plan.whole.row.gpus, plan.whole.row.per_hour) == (gpus, Decimal(price))
    # its GPUs together cost what the provider bills for the machine
    share = plan.whole.per_gpu.per_gpu_hour
    assert share * gpus + plan.whole.base_per_hour == Decimal(price)
    # which is not the per-GPU row times its GPUs (the provider does not price linearly)
    assert share != Decimal(per_gpu_row)
    # in the provider's currency
    assert plan.whole.per_gpu.currency == CATALOG.currency_of(provider)


def test_azure_s_multi_gpu_a100_costs_more_per_gpu_than_the_per_gpu_row() -> None:
    plan = _plan(
        AdminPrices(),
        provider="azure",
        instance_type="Standard_NC48ads_A100_v4",
        market="on-demand",
        shared=False,
    )
    assert plan.whole is not None
    assert plan.whole.per_gpu.per_gpu_hour == Decimal("4.777")
    assert "Standard_NC48ads_A100_v4 on-demand eastus: 9.554 USD/h per instance / 2 GPU(s)" in (
        plan.whole.per_gpu.source
    )


def test_an_alibaba_machine_is_priced_whole_in_yuan() -> None:
    plan = _plan(
        AdminPrices(),
        provider="alibaba",
        instance_type="ecs.gn6e-c12g1.24xlarge",
        market="on-demand",
        shared=False,
    )
    assert plan.whole is not None
    assert plan.whole.per_gpu.per_gpu_hour == Decimal("19.75")
    assert plan.whole.per_gpu.currency == "CNY"
    assert "158 CNY/h per instance / 8 GPU(s)" in plan.whole.per_gpu.source


@pytest.mark.parametrize(
    ("provider", "instance", "why"),
    [
        ("azure", "Standard_NC6s_v3", "retired on 2025-09-30"),
        ("gcp", "a3-highgpu-1g", "sold as Spot or Flex-start only"),
        ("gcp", "a3-highgpu-4g", "sold as Spot or Flex-start only"),
    ],
)
def test_a_shape_that_is_not_for_sale_never_prices_a_detected_machine(
    provider: str, instance: str, why: str
) -> None:
    plan = _plan(
        AdminPrices(), provider=provider, instance_type=instance, market="on-demand", shared=False
    )
    assert plan.whole is None
    assert plan.note.startswith(f"{instance} is not sold on-demand ({why}")
    assert plan.note.endswith(": per-GPU prices")


def test_a_catalog_that_mixes_a_provider_s_currencies_is_refused(tmp_path: Path) -> None:
    from jupyter_gpucost.core.catalog import CatalogError

    path = tmp_path / "prices.toml"
    path.write_text(
        '[[price]]\nprovider = "alibaba"\nmodel = "A10"\nprice_per_gpu_hour = "9.6166"\n'
        'currency = "CNY"\nmarket = "on-demand"\n'
        '[[instance]]\nprovider = "alibaba"\ninstance = "ecs.gn7i-2x.8xlarge"\n'
        'gpu_model = "A10"\ngpus = 2\nusd_per_hour = "2.797356"\nmarket = "on-demand"\n'
    )
    with pytest.raises(CatalogError, match="priced in USD, the provider's prices in CNY"):
        load_instance_rows(path)


def _plan(admin: AdminPrices, **machine: Any) -> Any:
    return plan_prices(admin, providers=CATALOG.providers, rows=ROWS, **machine)


def test_a_detected_instance_with_a_row_is_priced_whole() -> None:
    plan = _plan(
        AdminPrices(),
        provider="aws",
        instance_type="g5.xlarge",
        market="on-demand",
        shared=False,
        region="us-east-1",
    )
    assert plan.whole is not None
    assert plan.whole.row.per_hour == Decimal("1.006")
    assert (plan.provider, plan.market, plan.note) == ("aws", "on-demand", "")


def test_the_admin_s_price_settings_always_win() -> None:
    for admin in (
        AdminPrices(provider="gcp"),
        AdminPrices(instance="community"),
        AdminPrices(base_set=True),
    ):
        plan = _plan(
            admin, provider="aws", instance_type="g5.xlarge", market="on-demand", shared=False
        )
        assert plan.whole is None, admin
    plan = _plan(
        AdminPrices(market="on-demand"),
        provider="gcp",
        instance_type="a3-highgpu-1g",
        market="spot",
        shared=False,
    )
    assert plan.market == "on-demand"
    # GCP sells this shape as Spot or Flex-start only: per-GPU on-demand prices, and why
    assert plan.whole is None
    assert plan.note == (
        "a3-highgpu-1g is not sold on-demand (sold as Spot or Flex-start only): per-GPU prices"
    )


def test_a_detected_spot_market_does_not_lower_the_admin_s_prices() -> None:
    for admin in (
        AdminPrices(provider="gcp"),
        AdminPrices(instance="community"),
        AdminPrices(base_set=True),
    ):
        plan = _plan(
            admin, provider="gcp", instance_type="a3-highgpu-1g", market="spot", shared=False
        )
        assert plan.market == "on-demand", admin
    # the admin's own price_market still says spot where they want it
    plan = _plan(
        AdminPrices(provider="gcp", market="spot"),
        provider="gcp",
        instance_type="a3-highgpu-1g",
        market="on-demand",
        shared=False,
    )
    assert plan.market == "spot"


def test_no_row_and_a_shared_node_fall_back_to_per_gpu_prices_and_say_so() -> None:
    spot = _plan(
        AdminPrices(), provider="aws", instance_type="g5.xlarge", market="spot", shared=False
    )
    # no spot row: the same instance on-demand, the most a spot instance can cost
    assert spot.whole is not None
    assert spot.whole.row.market == "on-demand"
    assert spot.whole.per_gpu.upper_bound
    assert spot.market == "spot"
    assert spot.note == (
        "no whole-instance price for g5.xlarge spot: priced at on-demand, the most it can cost"
    )
    unknown = _plan(
        AdminPrices(), provider="aws", instance_type="g9.mystery", market="spot", shared=False
    )
    assert unknown.whole is None
    assert unknown.note == "no whole-instance price for g9.mystery spot: per-GPU prices"
    pod = _plan(
        AdminPrices(), provider="aws", instance_type="p5.48xlarge", market="on-demand", shared=True
    )
    assert pod.whole is None
    assert "Kubernetes" in pod.note
    vast = _plan(AdminPrices(), provider="vast", instance_type="", market="", shared=False)
    assert vast.provider == "aws"
    assert "no vast prices" in vast.note


# -- the server ---------------------------------------------------------------------------


class TestADetectedAwsInstance:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud())

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        return {
            "telemetry": "simulated",
            "simulated_trace": "h100-live",
            "sample_interval_s": 0.2,
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "ledger_url": "none",
        }

    async def test_the_status_names_the_instance_and_prices_it_from_its_row(
        self, jp_fetch: Any
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        machine = status["machine"]
        assert {k: machine[k] for k in ("provider", "instance_type", "region", "market")} == {
            "provider": "aws",
            "instance_type": "p5.48xlarge",
            "region": "us-east-1",
            "market": "on-demand",
        }
        assert machine["instance_id"] == "i-0123456789abcdef0"
        assert machine["source"] == "dmi+metadata"
        assert machine["label"] == "p5.48xlarge, on-demand, us-east-1 (detected)"
        assert machine["priced"] == "instance"
        assert machine["instance_price_usd_per_hour"] == 55.04
        gpu = status["gpus"][0]
        # one of the instance's eight shares of 55.04 USD/h
        assert gpu["price_usd_per_hour"] == 6.88
        assert "p5.48xlarge" in gpu["price_source"]
        assert status["prices"]["provider"] == "aws"
        codes = [w["code"] for w in status["warnings"]]
        assert "instance-gpus" in codes
        # the session token never leaves the server
        assert "secret" not in json.dumps(status)


class TestAdminPricesBeatDetection:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud())

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        return {
            "telemetry": "simulated",
            "simulated_trace": "h100-live",
            "sample_interval_s": 0.2,
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "ledger_url": "none",
            "price_provider": "gcp",
        }

    async def test_the_machine_is_named_but_priced_by_the_admin_s_settings(
        self, jp_fetch: Any
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"]["instance_type"] == "p5.48xlarge"
        assert status["machine"]["priced"] == "gpu"
        assert status["prices"]["provider"] == "gcp"
        assert "p5.48xlarge" not in (status["gpus"][0]["price_source"] or "")


class TestDetectionTurnedOff:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud())

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "ledger_url": "none",
            "detect_machine": False,
        }

    async def test_nothing_is_asked_and_no_machine_is_shown(
        self, jp_fetch: Any, standin: StandIn
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"] is None
        assert standin.cloud.requests == []


def test_the_sdks_own_variables_name_the_metadata_endpoints() -> None:
    assert Endpoints.from_environ({}, azure_imds="") == Endpoints()
    named = Endpoints.from_environ(
        {
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:1338",
            "GCE_METADATA_HOST": "127.0.0.1:1339",
        },
        azure_imds="http://127.0.0.1:1340",
    )
    assert named.aws_imds == "http://127.0.0.1:1338"
    assert named.gce_base() == "http://127.0.0.1:1339"
    assert named.azure_imds == "http://127.0.0.1:1340"
    # the documented endpoints are the defaults (asked only where DMI names the cloud)
    assert Endpoints().aws_imds == "http://169.254.169.254"
    assert Endpoints().gce_base() == "http://metadata.google.internal"


class TestADetectedGcpSpotVm:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud())

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("GCE_METADATA_HOST", standin.host)
        return {
            "telemetry": "simulated",
            "simulated_trace": "h100-live",
            "sample_interval_s": 0.2,
            "dmi_path": write_dmi(tmp_path / "dmi", "gcp"),
            "ledger_url": "none",
        }

    async def test_it_is_priced_whole_at_its_spot_price(self, jp_fetch: Any) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"]["label"] == "a3-highgpu-1g, spot, us-central1 (detected)"
        assert status["machine"]["priced"] == "instance"
        assert status["prices"]["provider"] == "gcp"
        assert status["prices"]["market"] == "spot"
        # the VM's spot price, its one H100 included
        assert status["gpus"][0]["price_usd_per_hour"] == 6.57
        assert status["rate_usd_per_hour"] == 6.57
        assert "instance-gpus" not in [w["code"] for w in status["warnings"]]


# -- what a user can set does not lower the admin's price -----------------------------------

#: what a user of a single-user server can put in its environment: a cloud's variables and
#: an IMDS endpoint of their own that claims a cheap spot instance
USER_VARIABLES = {
    "RUNPOD_POD_ID": "cheap-pod",
    "RUNPOD_DC_ID": "EU-RO-1",
    "VAST_CONTAINERLABEL": "C.123456",
}
#: the admin's config, the DMI the machine shows, and the price per H100-hour in force
ADMIN_CASES = {
    # a GCP VM the stand-in calls spot: the admin's provider is priced at its market
    # (on-demand unless price_market says spot), never at the detected spot price
    "gcp-provider": ({"price_provider": "gcp"}, "gcp", ("gcp", "on-demand", "")),
    # a machine with no DMI and a RunPod/Vast.ai environment: the admin's row holds
    "runpod-instance": (
        {"price_provider": "runpod", "price_instance": "secure"},
        "",
        ("runpod", "on-demand", "secure"),
    ),
    # an AWS machine whose IMDS endpoint the user points at a stand-in: the admin's
    # override of the H100's price holds against the whole-instance row
    "override": ({"price_overrides": {"H100-80GB": 9.99}}, "aws", None),
}


class TestAUserCannotLowerTheAdminsPrice:
    @pytest.fixture(params=sorted(ADMIN_CASES))
    def case(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        cloud = Cloud()
        cloud.aws_life_cycle = "spot"
        yield from serve(cloud)

    @pytest.fixture
    def gpucost_config(
        self, case: str, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        admin, dmi, _ = ADMIN_CASES[case]
        for name, value in USER_VARIABLES.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        monkeypatch.setenv("GCE_METADATA_HOST", standin.host)
        config: dict[str, object] = {
            "telemetry": "simulated",
            "simulated_trace": "h100-live",
            "sample_interval_s": 0.2,
            "ledger_url": "none",
            **admin,
        }
        if dmi:
            config["dmi_path"] = write_dmi(tmp_path / "dmi", dmi)
        return config

    async def test_the_price_in_force_is_the_admin_s(self, case: str, jp_fetch: Any) -> None:
        from jupyter_gpucost.core.catalog import PricePolicy

        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        gpu = status["gpus"][0]
        _, dmi, expected = ADMIN_CASES[case]
        # the machine is still named as detected
        assert status["machine"]["provider"] == (dmi or "runpod")
        if expected is None:
            assert gpu["price_usd_per_hour"] == 9.99
            assert "admin override" in gpu["price_source"]
            return
        provider, market, instance = expected
        assert status["machine"]["priced"] == "gpu"
        assert (status["prices"]["provider"], status["prices"]["market"]) == (provider, market)
        # at the detected machine's region, as the server prices it
        region = status["machine"].get("region") or ""
        policy = PricePolicy(CATALOG, provider, market, instance, region=region)
        price = policy.price_for(gpu["name"], None)
        assert price is not None
        assert gpu["price_usd_per_hour"] == float(price.per_gpu_hour)
