"""``scripts/gcp_prices.py`` against a loopback stand-in serving the recorded datasets
(tests/data/gcp_prices: trimmed real files, README there says from which commit): its
output is the block of GCP N1 rows the shipped catalog has, and what it cannot price it
names."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest
from gcp_prices_standin import Raw, serve

from jupyter_gpucost.core.attached_gpus import find_vm, load_vm_rows
from jupyter_gpucost.core.catalog import load_catalog
from jupyter_gpucost.core.instance_prices import find_instance, load_instance_rows

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "jupyter_gpucost" / "data" / "prices.toml"
#: the day the SkyPilot file (undated) was first read for the shipped catalog
READ = "2026-11-27"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gpucost_gcp_prices", ROOT / "scripts" / "gcp_prices.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


GCP = _script()
sys.path.insert(0, str(ROOT / "scripts"))  # gcp_accelerator_vms imports gcp_prices
VMS = importlib.import_module("gcp_accelerator_vms")


@pytest.fixture
def raw() -> Iterator[Raw]:
    yield from serve()


def shipped_block() -> str:
    text = SHIPPED.read_text(encoding="utf-8")
    start, end = text.index(GCP.BEGIN), text.index(GCP.END)
    return text[start : end + len(GCP.END) + 1]


def test_the_output_is_the_shipped_catalogs_block(
    raw: Raw, capsys: pytest.CaptureFixture[str]
) -> None:
    code = GCP.main(["--raw", raw.url, "--gpus-as-of", READ, "--all-regions"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == shipped_block()
    # both datasets at their pinned commits, nothing else asked
    assert sorted(raw.seen) == sorted(GCP_PATHS)
    # what it leaves out it names: prices finer than a micro-dollar, never rounded
    assert "left out, finer than a micro-dollar: n1-standard-1 on-demand in us-central1" in err
    assert "n1-highcpu-8 on-demand in us-central1: '0.2833944'" in err


GCP_PATHS = [
    "/skypilot-org/skypilot-catalog/006059e0f18acb1341e22a27751e9f80df6ba92f/catalogs/v8/gcp/vms.csv",
    "/Cyclenerd/google-cloud-pricing-cost-calculator/fd66b26ff84fee5cdd94f341ea89206e76c06b99/pricing.yml",
]


def test_the_shipped_rows_price_an_n1_standard_8_with_a_t4() -> None:
    t4 = load_catalog().find(provider="gcp", market="on-demand", model="T4", region="us-central1")
    vm = find_vm(
        load_vm_rows(),
        provider="gcp",
        machine_type="n1-standard-8",
        market="on-demand",
        region="us-central1",
    )
    assert t4 is not None
    assert vm is not None
    assert (t4.per_gpu_hour, vm.per_hour) == (Decimal("0.35"), Decimal("0.379998"))
    assert "006059e0" in t4.source
    assert "fd66b26f" in vm.source
    assert t4.as_of == READ
    assert vm.as_of == "2026-07-30"  # the dataset's own generation date


def test_write_reproduces_the_shipped_catalog(raw: Raw, tmp_path: Path) -> None:
    copy = tmp_path / "prices.toml"
    copy.write_text(SHIPPED.read_text(encoding="utf-8"), encoding="utf-8")
    assert (
        GCP.main(
            [
                *("--raw", raw.url, "--gpus-as-of", READ, "--all-regions"),
                *("--catalog", str(copy), "--write"),
            ]
        )
        == 0
    )
    assert copy.read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")


def test_another_region_gets_its_own_rows(raw: Raw, capsys: pytest.CaptureFixture[str]) -> None:
    code = GCP.main(["--raw", raw.url, "--gpus-as-of", READ, "--region", "europe-west4"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = tomllib.loads(out)
    t4 = [r for r in data["price"] if r["model"] == "T4"]
    assert [(r["market"], r["usd_per_gpu_hour"], r["region"]) for r in t4] == [
        ("on-demand", "0.3675", "europe-west4"),
        ("spot", "0.175", "europe-west4"),
    ]
    vm = {(r["machine_type"], r["market"]): r["usd_per_hour"] for r in data["vm"]}
    assert all(r["region"] == "europe-west4" for r in data["vm"])
    assert ("n1-standard-8", "on-demand") in vm


def test_a_region_without_a_gpu_price_is_named_and_exits_1(
    raw: Raw, capsys: pytest.CaptureFixture[str]
) -> None:
    code = GCP.main(["--raw", raw.url, "--region", "asia-east1"])
    err = capsys.readouterr().err
    assert code == 1
    # the dataset sells no P4 in Taiwan: a region asked for by name must price every GPU
    assert "no price: P4 on-demand in asia-east1: no price" in err


def test_all_regions_are_the_regions_selling_a_gpu_and_a_gpu_not_sold_there_has_no_row(
    raw: Raw, capsys: pytest.CaptureFixture[str]
) -> None:
    code = GCP.main(["--raw", raw.url, "--gpus-as-of", READ, "--all-regions"])
    out, err = capsys.readouterr()
    assert code == 0, err
    prices = tomllib.loads(out)["price"]
    regions = {r["region"] for r in prices}
    assert {"us-central1", "europe-west4", "asia-east1", "southamerica-east1"} <= regions
    # a region is there because it sells one of the GPUs, and has rows of those it sells
    assert {r["model"] for r in prices if r["region"] == "asia-east1"} == {"T4", "V100", "P100"}
    assert "not sold there (the dataset lists none): P4 in asia-east1" in err
    t4 = {(r["region"], r["market"]): r["usd_per_gpu_hour"] for r in prices if r["model"] == "T4"}
    assert t4[("southamerica-east1", "on-demand")] == "0.48"
    assert t4[("us-west2", "on-demand")] == "0.42074"
    # an N1 price finer than a micro-dollar is left out there, never rounded
    assert "n1-standard-8 on-demand in asia-southeast2: '0.51096148'" in err
    assert not [
        r
        for r in tomllib.loads(out)["vm"]
        if (r["region"], r["machine_type"]) == ("asia-southeast2", "n1-standard-8")
    ]


def test_all_regions_and_a_region_exclude_each_other(raw: Raw) -> None:
    with pytest.raises(SystemExit) as refused:
        GCP.main(["--raw", raw.url, "--all-regions", "--region", "us-central1"])
    assert refused.value.code == 2


def test_a_dataset_that_cannot_be_read_exits_2_naming_it(
    raw: Raw, capsys: pytest.CaptureFixture[str]
) -> None:
    code = GCP.main(["--raw", raw.url, "--skypilot-commit", "0" * 40])
    err = capsys.readouterr().err
    assert code == 2
    assert "gcp_prices: cannot read" in err
    assert "vms.csv" in err


def test_zones_that_disagree_are_not_averaged() -> None:
    csv_text = (
        "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,"
        "AvailabilityZone,Price,SpotPrice\n"
        ",,,T4,1,x,us-central1,us-central1-a,0.35,0.175\n"
        ",,,T4,1,x,us-central1,us-central1-b,0.36,0.175\n"
    )
    rows, missing = GCP.accelerator_rows(
        csv_text, ["us-central1"], commit=GCP.SKYPILOT_COMMIT, as_of=GCP.date(2026, 11, 27)
    )
    assert "T4 on-demand in us-central1: zones disagree" in missing
    assert [dict(r.fields)["market"] for r in rows if dict(r.fields)["model"] == "T4"] == ["spot"]


def shipped_vms_block() -> str:
    text = SHIPPED.read_text(encoding="utf-8")
    start, end = text.index(VMS.VMS_BEGIN + "\n"), text.index(VMS.VMS_END + "\n")
    return text[start : end + len(VMS.VMS_END) + 1]


def test_the_accelerator_vms_output_is_the_shipped_block(
    raw: Raw, capsys: pytest.CaptureFixture[str]
) -> None:
    code = VMS.main(["--raw", raw.url])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == shipped_vms_block()
    assert raw.seen == [GCP_PATHS[1]]  # pricing.yml only, at its pinned commit


def test_accelerator_vms_write_reproduces_the_shipped_catalog(raw: Raw, tmp_path: Path) -> None:
    copy = tmp_path / "prices.toml"
    copy.write_text(SHIPPED.read_text(encoding="utf-8"), encoding="utf-8")
    args = ["--raw", raw.url, "--catalog", str(copy), "--write"]
    assert VMS.main(args) == 0
    assert copy.read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")


def test_an_a2_in_europe_and_tokyo_is_priced_at_its_regions_row() -> None:
    rows = load_instance_rows()
    # pricing.yml: a2-highgpu-1g europe-west4 hour 3.747972, asia-northeast1 4.049590926
    europe = find_instance(
        rows, provider="gcp", instance="a2-highgpu-1g", market="on-demand", region="europe-west4"
    )
    assert europe is not None
    assert (europe.region, europe.per_hour) == ("europe-west4", Decimal("3.747972"))
    assert "rounded" not in europe.source
    tokyo = find_instance(
        rows, provider="gcp", instance="a2-highgpu-1g", market="on-demand", region="asia-northeast1"
    )
    assert tokyo is not None
    # 4.049590926 has 9 decimals: rounded half up to the micro-dollar, and said so
    assert (tokyo.region, tokyo.per_hour) == ("asia-northeast1", Decimal("4.049591"))
    assert tokyo.source.startswith("4.049590926, rounded half up to the micro-dollar: ")
    assert "cost.asia-northeast1.hour" in tokyo.source
    # the per-GPU row of an 8-GPU VM: 88.4899999025753 / 8 in us-central1 is the shipped
    # hand row; Tokyo's is the VM's price over its GPUs, rounded half up
    h100 = load_catalog().find(
        provider="gcp", market="on-demand", model="H100-80GB", region="asia-northeast1"
    )
    assert h100 is not None
    assert (h100.instance, h100.region) == ("a3-highgpu-8g", "asia-northeast1")
    assert "USD per VM / 8 GPUs, rounded half up to the micro-dollar" in h100.source


def test_a_g2_has_rows_where_it_is_sold_and_none_where_it_is_only_priced() -> None:
    rows = [
        r for r in load_instance_rows() if r.provider == "gcp" and r.instance == "g2-standard-4"
    ]
    regions = {(r.region, r.market) for r in rows}
    sold = VMS.SOLD_IN["g2-standard-4"]
    assert regions == {(region, m) for region in sold for m in ("on-demand", "spot")}
    assert len(rows) == len(regions)  # the hand-written us-central1 row is not written twice
    # pricing.yml prices an a2-highgpu-1g in Johannesburg, where GCP sells none: no row, and
    # a machine there is priced at the dearest region's row, which says it is another region
    priced = yaml_regions("a2-highgpu-1g")
    assert "africa-south1" in priced
    assert "africa-south1" not in VMS.SOLD_IN["a2-highgpu-1g"]
    row = find_instance(
        load_instance_rows(),
        provider="gcp",
        instance="a2-highgpu-1g",
        market="on-demand",
        region="africa-south1",
    )
    assert row is not None
    assert row.region != "africa-south1"
    assert row.region in VMS.SOLD_IN["a2-highgpu-1g"]


def yaml_regions(machine_type: str) -> list[str]:
    """The regions the recorded pricing.yml prices ``machine_type`` in."""
    _, instances = GCP.pricing((ROOT / "tests" / "data" / "gcp_prices" / "pricing.yml").read_text())
    entry = instances[machine_type]
    assert isinstance(entry, dict)
    return sorted(entry["cost"])
