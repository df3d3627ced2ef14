"""Checkpoint export through a real server to a real S3 server on loopback and a folder."""

from __future__ import annotations

import asyncio
import getpass
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from s3_server import BUCKET, free_port, start_moto
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.server.export.jobs import manifest_user

#: a secret that must never reach the browser or the log
SECRET = "s3cr3t-never-shown-0xC0FFEE"


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")


@pytest.fixture
def export_folder(tmp_path: Path) -> Path:
    return tmp_path / "exports"


@pytest.fixture
def gpucost_config(s3_endpoint: str, export_folder: Path) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "export_folder": str(export_folder),
        "export_part_size_mb": 5,
        "export_retries": 1,
        "export_targets": {
            "s3": {
                "url": f"s3://{BUCKET}/runs",
                "label": "Team bucket",
                "options": {
                    "endpoint_url": s3_endpoint,
                    "key": "testing",
                    "secret": SECRET,
                    "region_name": "us-east-1",
                },
            }
        },
        "export_default_target": "local",
    }


def write_random(path: Path, size: int) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def sparse(path: Path, size: int) -> None:
    """A large file that costs no disk (zeros)."""
    with open(path, "wb") as f:
        f.truncate(size)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def start(jp_fetch: Any, paths: list[str], target: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"paths": paths}
    if target is not None:
        body["target"] = target
    response = await jp_fetch("gpucost", "api", "exports", method="POST", body=json.dumps(body))
    assert response.code == 202
    return json.loads(response.body)


async def job(jp_fetch: Any, job_id: str) -> dict[str, Any]:
    response = await jp_fetch("gpucost", "api", "exports", job_id)
    return json.loads(response.body)


async def first_bytes(jp_fetch: Any, job_id: str) -> dict[str, Any]:
    """The job as soon as its first bytes have landed (or after 12 s)."""
    for _ in range(600):
        state = await job(jp_fetch, job_id)
        if state["bytes_done"] > 0:
            break
        await asyncio.sleep(0.02)
    return state


async def finished(jp_fetch: Any, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
    for _ in range(int(timeout_s / 0.1)):
        state = await job(jp_fetch, job_id)
        if state["state"] in ("done", "failed", "cancelled"):
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"export {job_id} did not end in {timeout_s}s: {state}")


async def refused(call: Any, code: int) -> str:
    with pytest.raises(HTTPClientError) as e:
        await call
    assert e.value.code == code, e.value
    assert e.value.response is not None
    return str(json.loads(e.value.response.body)["message"])


def objects(s3: Any, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


def in_progress_uploads(s3: Any, prefix: str) -> list[str]:
    listed = s3.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    return [u["Key"] for u in listed.get("Uploads", [])]


async def test_targets_are_listed_without_credentials(jp_fetch: Any) -> None:
    response = await jp_fetch("gpucost", "api", "exports")
    text = response.body.decode()
    assert SECRET not in text
    payload = json.loads(text)
    assert payload["default_target"] == "local"
    by_name = {t["name"]: t for t in payload["targets"]}
    assert by_name["s3"]["url"] == f"s3://{BUCKET}/runs"
    assert by_name["s3"]["label"] == "Team bucket"
    assert by_name["s3"]["kind"] == "s3"
    assert by_name["local"]["kind"] == "local"
    assert by_name["local"]["default"] is True
    assert set(by_name["s3"]) == {"name", "label", "kind", "url", "default"}
    assert payload["jobs"] == []


async def test_a_multipart_export_lands_whole_with_its_manifest(
    jp_fetch: Any, jp_root_dir: Path, s3: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # 12 MiB + 1 byte: three 5 MiB parts, the last one short
    data = write_random(jp_root_dir / "runs" / "model.pt", 12 * 1024 * 1024 + 1)
    started = await start(jp_fetch, ["runs/model.pt"], "s3")
    assert started["state"] in ("queued", "running", "done")
    assert started["bytes_total"] == len(data)
    ended = await finished(jp_fetch, started["id"])
    assert ended["state"] == "done", ended
    assert ended["bytes_done"] == len(data)
    assert ended["progress"] == 1.0
    assert ended["rate_bytes_per_s"] > 0
    [result] = ended["results"]
    assert result["url"] == f"s3://{BUCKET}/runs/model.pt"
    assert result["manifest_url"] == f"s3://{BUCKET}/runs/model.pt.manifest.json"
    sha = hashlib.sha256(data).hexdigest()
    assert result["sha256"] == sha
    # the object, read back, is the file byte for byte
    landed = s3.get_object(Bucket=BUCKET, Key="runs/model.pt")["Body"].read()
    assert landed == data
    assert in_progress_uploads(s3, "runs/") == []
    manifest = json.loads(
        s3.get_object(Bucket=BUCKET, Key="runs/model.pt.manifest.json")["Body"].read()
    )
    assert manifest["source_path"] == "runs/model.pt"
    assert manifest["size_bytes"] == len(data)
    assert manifest["sha256"] == sha
    assert manifest["kind"] == "file"
    assert manifest["url"] == result["url"]
    assert manifest["session"]["cost_usd"] > 0
    # the session's cost and rate under their currency-neutral names too, the same values
    assert manifest["session"]["cost"] == manifest["session"]["cost_usd"]
    assert manifest["session"]["rate_per_hour"] == manifest["session"]["rate_usd_per_hour"] == 6.862
    assert manifest["session"]["currency"] == "USD"
    assert manifest["session"]["simulated"] is True
    assert [g["name"] for g in manifest["gpus"]] == ["NVIDIA A100-SXM4-80GB"] * 2
    assert manifest["software"]["torch"]  # the test environment has CPU torch
    assert manifest["exported_at"].endswith("+00:00")
    # outside JupyterHub: the operating system's user, not the token's random id
    assert manifest["user"] == getpass.getuser()
    assert "CRC32" in manifest["verified"]
    assert SECRET not in caplog.text


async def test_a_folder_goes_to_the_local_default_target(
    jp_fetch: Any, jp_root_dir: Path, export_folder: Path
) -> None:
    a = write_random(jp_root_dir / "ckpt" / "step-100" / "model.safetensors", 300_000)
    b = write_random(jp_root_dir / "ckpt" / "optimizer.pt", 1000)
    write_random(jp_root_dir / "ckpt" / ".cache" / "junk.bin", 10)
    started = await start(jp_fetch, ["ckpt"])
    assert started["target"] == "local"
    ended = await finished(jp_fetch, started["id"])
    assert ended["state"] == "done", ended
    [result] = ended["results"]
    assert result["url"] == (export_folder / "ckpt").as_uri()
    assert (export_folder / "ckpt" / "step-100" / "model.safetensors").read_bytes() == a
    assert (export_folder / "ckpt" / "optimizer.pt").read_bytes() == b
    # hidden files stay behind, and no temporary name is left
    assert names(export_folder) == ["ckpt", "ckpt.manifest.json"]
    assert not (export_folder / "ckpt" / ".cache").exists()
    manifest = json.loads((export_folder / "ckpt.manifest.json").read_text())
    assert manifest["kind"] == "folder"
    assert {f["path"]: f["sha256"] for f in manifest["files"]} == {
        "optimizer.pt": hashlib.sha256(b).hexdigest(),
        "step-100/model.safetensors": hashlib.sha256(a).hexdigest(),
    }
    assert manifest["size_bytes"] == len(a) + len(b)


async def test_a_second_export_of_the_same_name_does_not_overwrite_the_first(
    jp_fetch: Any, jp_root_dir: Path, export_folder: Path
) -> None:
    first = write_random(jp_root_dir / "model.pt", 100)
    assert (await finished(jp_fetch, (await start(jp_fetch, ["model.pt"]))["id"]))[
        "state"
    ] == "done"
    second = write_random(jp_root_dir / "model.pt", 200)
    ended = await finished(jp_fetch, (await start(jp_fetch, ["model.pt"]))["id"])
    assert ended["results"][0]["url"] == (export_folder / "model-2.pt").as_uri()
    assert (export_folder / "model.pt").read_bytes() == first
    assert (export_folder / "model-2.pt").read_bytes() == second
    assert json.loads((export_folder / "model-2.pt.manifest.json").read_text())["size_bytes"] == 200


async def test_cancel_mid_upload_leaves_nothing_at_the_final_key(
    jp_fetch: Any, jp_root_dir: Path, s3: Any
) -> None:
    sparse(jp_root_dir / "big.ckpt", 400 * 1024 * 1024)
    started = await start(jp_fetch, ["big.ckpt"], "s3")
    state = await first_bytes(jp_fetch, started["id"])
    assert state["state"] == "running"
    assert state["bytes_done"] < state["bytes_total"]
    response = await jp_fetch("gpucost", "api", "exports", started["id"], method="DELETE")
    assert response.code == 200
    ended = await finished(jp_fetch, started["id"])
    assert ended["state"] == "cancelled"
    assert ended["error"] is None
    assert ended["results"] == []
    assert objects(s3, "runs/big") == []
    assert in_progress_uploads(s3, "runs/") == []
    # cancelling again: it has already ended
    again = jp_fetch("gpucost", "api", "exports", started["id"], method="DELETE")
    assert "already ended" in await refused(again, 409)


class TestStoreGoingAway:
    @pytest.fixture
    def flaky_port(self) -> int:
        return free_port()

    @pytest.fixture
    def gpucost_config(
        self, gpucost_config: dict[str, Any], flaky_port: int, s3_endpoint: str
    ) -> dict[str, object]:
        targets = dict(gpucost_config["export_targets"])
        targets["flaky"] = {
            "url": f"s3://{BUCKET}/flaky",
            "options": {"endpoint_url": f"http://127.0.0.1:{flaky_port}"},
        }
        return {**gpucost_config, "export_targets": targets}

    async def test_the_job_fails_with_a_clear_error_and_no_object(
        self, jp_fetch: Any, jp_root_dir: Path, flaky_port: int, s3: Any
    ) -> None:
        server = start_moto(flaky_port)
        sparse(jp_root_dir / "big.ckpt", 400 * 1024 * 1024)
        try:
            started = await start(jp_fetch, ["big.ckpt"], "flaky")
            state = await first_bytes(jp_fetch, started["id"])
            assert state["state"] == "running"
        finally:
            server.stop()
        ended = await finished(jp_fetch, started["id"])
        assert ended["state"] == "failed"
        assert f"127.0.0.1:{flaky_port} could not be reached" in ended["error"]
        assert "check that it is running" in ended["error"]
        assert ended["results"] == []
        # the same (in-process) store, back on another port: nothing at the final key
        assert objects(s3, "flaky/") == []


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        ("../outside.pt", 403, "'..' is not allowed"),
        ("runs/../../outside.pt", 403, "'..' is not allowed"),
        ("/etc/passwd", 403, "relative to the Jupyter root folder"),
        (".secret/model.pt", 403, "hidden"),
        ("missing.pt", 404, "does not exist"),
        # a % in a name is written as it is, never doubled by a log format
        ("50%.pt", 404, "'50%.pt' does not exist"),
        ("link-out", 403, "outside the Jupyter root folder"),
        ("link-file.pt", 403, "outside the Jupyter root folder"),
        ("with-link", 403, "a symlink leading outside"),
        ("", 400, "non-empty string"),
    ],
)
async def test_paths_outside_the_root_dir_are_refused(
    jp_fetch: Any, jp_root_dir: Path, tmp_path: Path, path: str, code: int, message: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.pt").write_bytes(b"x")
    write_random(jp_root_dir / ".secret" / "model.pt", 10)
    os.symlink(outside, jp_root_dir / "link-out")
    os.symlink(outside / "secret.pt", jp_root_dir / "link-file.pt")
    write_random(jp_root_dir / "with-link" / "ok.pt", 10)
    os.symlink(outside / "secret.pt", jp_root_dir / "with-link" / "escape.pt")
    call = jp_fetch("gpucost", "api", "exports", method="POST", body=json.dumps({"paths": [path]}))
    assert message in await refused(call, code)
    listed = json.loads((await jp_fetch("gpucost", "api", "exports")).body)
    assert listed["jobs"] == []


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"paths": ["model.pt"], "target": "nope"}, 400, "there is no export target 'nope'"),
        ({"paths": ["model.pt"], "target": "s3://elsewhere/x"}, 403, "configured targets only"),
        ({"paths": []}, 400, "non-empty list"),
        ({"paths": "model.pt"}, 400, "non-empty list"),
        ({"paths": ["model.pt"], "bucket": "x"}, 400, "unknown field(s) bucket"),
    ],
)
async def test_bad_requests_get_a_clear_message(
    jp_fetch: Any, jp_root_dir: Path, body: dict[str, Any], code: int, message: str
) -> None:
    write_random(jp_root_dir / "model.pt", 10)
    call = jp_fetch("gpucost", "api", "exports", method="POST", body=json.dumps(body))
    assert message in await refused(call, code)


async def test_an_unknown_job_is_not_found(jp_fetch: Any) -> None:
    call = jp_fetch("gpucost", "api", "exports", "0123456789ab")
    assert "no export" in await refused(call, 404)


async def test_a_cookie_request_without_xsrf_is_refused(
    http_server_client: Any, jp_base_url: str, jp_serverapp: Any, jp_root_dir: Path
) -> None:
    write_random(jp_root_dir / "model.pt", 10)
    token = jp_serverapp.identity_provider.token
    login = await http_server_client.fetch(
        f"{jp_base_url}?token={token}", follow_redirects=False, raise_error=False
    )
    cookies = "; ".join(
        c.split(";", 1)[0] for c in login.headers.get_list("Set-Cookie") if "=" in c
    )
    url = f"{jp_base_url}gpucost/api/exports"
    ok = await http_server_client.fetch(url, headers={"Cookie": cookies}, raise_error=False)
    assert ok.code == 200
    response = await http_server_client.fetch(
        url,
        method="POST",
        body=json.dumps({"paths": ["model.pt"]}),
        headers={"Cookie": cookies},
        raise_error=False,
    )
    assert response.code == 403
    after = await http_server_client.fetch(url, headers={"Cookie": cookies})
    assert json.loads(after.body)["jobs"] == []


@pytest.mark.parametrize(
    ("environ", "username", "expected"),
    [
        ({"JUPYTERHUB_USER": "alice"}, "alice", "alice"),
        ({"JUPYTERHUB_USER": "alice"}, "0123456789abcdef0123456789abcdef", "alice"),
        ({}, "0123456789abcdef0123456789abcdef", getpass.getuser()),
        ({}, None, getpass.getuser()),
        ({}, "bob", "bob"),
    ],
)
def test_the_manifest_names_a_stable_user(
    environ: dict[str, str], username: str | None, expected: str
) -> None:
    assert manifest_user(environ, username) == expected
