"""Invalid settings stop the server at start-up with a message naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start_server(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--ServerApp.jpserver_extensions={'jupyter_gpucost': True}",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",
            "--ServerApp.open_browser=False",
            "--allow-root",
            f"--ServerApp.root_dir={tmp_path}",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        (
            "--GpuCost.telemetry=bogus",
            "c.GpuCost.telemetry = 'bogus' is not valid: use one of auto, nvml, simulated, none",
        ),
        (
            "--GpuCost.price_market=reserved",
            "c.GpuCost.price_market = 'reserved' is not valid: use one of on-demand, spot",
        ),
        (
            "--GpuCost.sample_interval_s=0",
            "c.GpuCost.sample_interval_s = 0.0 is not valid: use a number of seconds from 0.1 to 3600",
        ),
        ("--GpuCost.minimum_charge_s=-5", "c.GpuCost.minimum_charge_s = -5 is not valid"),
        ("--GpuCost.billing_granularity_s=0", "c.GpuCost.billing_granularity_s = 0 is not valid"),
        (
            "--GpuCost.base_price_usd_per_hour=-1",
            "c.GpuCost.base_price_usd_per_hour: -1.0 must be a finite number >= 0",
        ),
        (
            "--GpuCost.price_provider=moon",
            "c.GpuCost.price_provider = 'moon' is not valid: use one of aws, gcp, azure, lambda, runpod",
        ),
        ("--GpuCost.price_instance=nope", "c.GpuCost.price_instance = 'nope' is not valid for aws"),
        (
            "--GpuCost.price_catalog_path=/nonexistent/prices.toml",
            "c.GpuCost.price_catalog_path: cannot read price catalog",
        ),
        (
            "--GpuCost.currency=EUR",
            "c.GpuCost.currency = 'EUR': the catalog has no price in EUR, so a GPU without a "
            "price cannot be priced at an upper bound: set c.GpuCost.unknown_gpu_usd_per_hour",
        ),
        (
            "--GpuCost.unknown_gpu_usd_per_hour=0",
            "c.GpuCost.unknown_gpu_usd_per_hour = 0.0 is not valid: use a price per hour above 0",
        ),
        (
            "--GpuCost.export_part_size_mb=1",
            "c.GpuCost.export_part_size_mb = 1 is not valid: use a whole number of MiB from 5",
        ),
        (
            "--GpuCost.export_default_target=nope",
            "c.GpuCost.export_default_target = 'nope' is not a configured target: use one of local",
        ),
        (
            "--GpuCost.export_folder=relative/folder",
            "use an absolute folder or a URL",
        ),
    ],
)
def test_invalid_setting_stops_the_server_with_a_clear_message(
    tmp_path: Path, arg: str, expected: str
) -> None:
    extra = [] if "telemetry" in arg else ["--GpuCost.telemetry=none"]
    result = start_server(tmp_path, arg, *extra)
    assert result.returncode != 0
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_invalid_override_in_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "jupyter_server_config.py"
    config.write_text("c.GpuCost.price_overrides = {'A100-80GB': 'free'}\n")
    result = start_server(tmp_path, f"--config={config}", "--GpuCost.telemetry=none")
    assert result.returncode != 0
    assert "c.GpuCost.price_overrides['A100-80GB']: 'free' is not a number" in result.stderr


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        ("{'team': 'ftp://host/x'}", "the scheme 'ftp' is not supported; use one of file://"),
        ("{'team': 's3://'}", "the URL names no bucket"),
        ("{'team': {'path': 's3://b'}}", "give a URL, or {'url': ..., 'options'"),
        ("{'team': {'url': 's3://b', 'secret': 'x'}}", "unknown key(s) secret"),
    ],
)
def test_invalid_export_target_in_a_config_file(
    tmp_path: Path, targets: str, expected: str
) -> None:
    config = tmp_path / "jupyter_server_config.py"
    config.write_text(f"c.GpuCost.export_targets = {targets}\n")
    result = start_server(tmp_path, f"--config={config}", "--GpuCost.telemetry=none")
    assert result.returncode != 0
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
