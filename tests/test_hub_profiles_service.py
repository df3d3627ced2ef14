"""The hub service billing each server by the profile its user chose, priced from the hub's
own Zero to JupyterHub values (``c.GpuCostHub.profiles_from``), on a real JupyterHub.

The hub's spawner records ``user_options`` as KubeSpawner does: its spawn form posts
``profile`` and ``profile-option-<slug>--<option>`` fields and ``options_from_form`` is
KubeSpawner's (kubespawner/spawner.py); a spawn through the REST API's body sets them
directly. bob picks 2 × A100 80 GB in the form, carol a T4 profile through the API,
alice nothing (``{}``: the default CPU profile), and dave a choice that does not exist
(KubeSpawner would refuse it; this spawner starts it anyway): billed at the dearest.
"""

from __future__ import annotations

import csv
import http.cookiejar
import io
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hub_service_fixture import Hub, running_hub, spawn

VALUES = Path(__file__).parent / "data" / "profiles" / "z2jh_values.yaml"

SERVICE = """
c.GpuCostHub.price_provider = "gcp"
c.GpuCostHub.price_region = "us-central1"
c.GpuCostHub.price_overrides = {{"T4": "0.35", "A100-80GB": "5.07"}}
c.GpuCostHub.profiles_from = "{values}"
"""

SPAWNER = '''
from jupyterhub.spawner import SimpleLocalProcessSpawner


class ProfileFormSpawner(SimpleLocalProcessSpawner):
    """A local spawner with KubeSpawner's profile form and its options_from_form."""

    options_form = """
    <input type="radio" name="profile" value="small-cpu" checked>
    <input type="radio" name="profile" value="large-gpu">
    <select name="profile-option-large-gpu--gpu"><option value="l4"><option value="a100"></select>
    """

    def options_from_form(self, formdata):
        # kubespawner/spawner.py KubeSpawner.options_from_form
        profile_slug = formdata.get("profile", [None])[0]
        user_options = {}
        if profile_slug:
            user_options["profile"] = profile_slug
            prefix = f"profile-option-{profile_slug}--"
            for k, v in formdata.items():
                if k.startswith(prefix):
                    profile_option_slug = k[len(prefix):]
                    user_options[profile_option_slug] = v[0]
        return user_options


c.JupyterHub.spawner_class = ProfileFormSpawner
'''


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubprofiles")
    values = root / "values.yaml"
    shutil.copy(VALUES, values)
    with running_hub(
        root,
        budgets={},
        users=("alice", "bob", "carol", "dave", "frank"),
        groups={},
        group_budgets={},
        service_extra=SERVICE.format(values=values),
        hub_extra=SPAWNER,
    ) as hub:
        yield hub


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def spawn_from_the_form(hub: Hub, user: str, fields: dict[str, str]) -> int:
    """Log in as ``user`` through the hub's login form, then post the spawn form."""
    base = hub.api.removesuffix("/api")
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())

    def post(path: str, form: dict[str, str]) -> int:
        xsrf = next(c.value for c in jar if c.name == "_xsrf")
        data = urllib.parse.urlencode({**form, "_xsrf": xsrf}).encode()
        try:
            with opener.open(urllib.request.Request(base + path, data=data), timeout=30) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:  # the 302 that follows a post
            return e.code

    with opener.open(base + "/login", timeout=30) as r:
        assert r.status == 200
    assert post("/login", {"username": user, "password": "any"}) == 302
    with opener.open(base + "/spawn", timeout=30) as r:
        assert r.status == 200
        assert 'name="profile-option-large-gpu--gpu"' in r.read().decode()
    return post("/spawn", fields)


def running(hub: Hub, user: str) -> dict[str, Any]:
    """The user's running server as the gpucost service bills it (``api/me``)."""
    found: dict[str, Any] = {}

    def seen() -> bool:
        code, body = hub.svc("GET", "api/me", hub.token_for(user))
        assert code == 200, body
        if body["running"]:
            found.update(body["running"][0])
        return bool(found)

    hub.wait(f"the service to bill {user}'s server", seen, 30)
    return found


def test_a_profile_and_choice_from_the_spawn_form_bill_their_gpus(hub: Hub) -> None:
    code = spawn_from_the_form(
        hub, "bob", {"profile": "large-gpu", "profile-option-large-gpu--gpu": "a100"}
    )
    assert code == 302
    hub.wait("bob's server to be ready", lambda: (hub.server("bob") or {}).get("ready"), 90)
    assert hub.server("bob")["user_options"] == {"profile": "large-gpu", "gpu": "a100"}  # type: ignore[index]
    bob = running(hub, "bob")
    assert bob["profile"] == "large-gpu"
    assert bob["gpus"] == "2 × A100-80GB"
    assert bob["usd_per_hour"] == pytest.approx(10.14)
    assert "cloud.google.com/gke-accelerator=nvidia-a100-80gb" in bob["rate_source"]


def test_user_options_from_the_rest_api_bill_their_profile(hub: Hub) -> None:
    code, body = hub.call("POST", "/users/carol/server", {"profile": "t4", "image": "tensorflow"})
    assert code in (201, 202), body
    hub.wait("carol's server", lambda: (hub.server("carol") or {}).get("ready"), 90)
    carol = running(hub, "carol")
    assert (carol["gpus"], carol["usd_per_hour"]) == ("1 × T4", pytest.approx(0.35))
    # no options: KubeSpawner's default profile (the CPU one), billed no GPU
    code, body = spawn(hub, "alice")
    assert code in (201, 202), body
    alice = running(hub, "alice")
    assert alice["usd_per_hour"] == 0
    assert alice["rate_source"] == "no GPU (no nvidia.com/gpu limit, no GPU node label)"


def test_a_choice_kubespawner_would_refuse_is_billed_at_the_dearest(hub: Hub) -> None:
    code, body = hub.call("POST", "/users/dave/server", {"profile": "t4", "image": "free"})
    assert code in (201, 202), body
    hub.wait("dave's server", lambda: (hub.server("dave") or {}).get("ready"), 90)
    dave = running(hub, "dave")
    assert (dave["gpus"], dave["usd_per_hour"]) == ("1 × H100-80GB", pytest.approx(11.06125))
    assert dave["rate_source"].startswith(
        "KubeSpawner would not start these user_options (no choice 'free' for 'image')"
    )
    # the admin's view shows each server at its rate
    code, summary = hub.svc("GET", "api/admin/summary", hub.tokens["prometheus"])
    assert code == 200, summary
    rates = {u["user"]: [s["usd_per_hour"] for s in u["running"]] for u in summary["users"]}
    assert rates["bob"] == [pytest.approx(10.14)]
    assert rates["dave"] == [pytest.approx(11.06125)]


def test_a_mig_slice_is_billed_and_shown_as_its_fraction(hub: Hub) -> None:
    code, body = hub.call("POST", "/users/frank/server", {"profile": "mig"})
    assert code in (201, 202), body
    hub.wait("frank's server", lambda: (hub.server("frank") or {}).get("ready"), 90)
    frank = running(hub, "frank")
    # 1/7 of the admin's A100-80GB price (5.07/h), not a whole GPU
    assert frank["gpus"] == "1/7 × A100-80GB (MIG 1g.10gb)"
    assert frank["usd_per_hour"] == pytest.approx(0.724286)
    # the user's own list of sessions, read back from the ledger
    code, me = hub.svc("GET", "api/me", hub.token_for("frank"))
    assert code == 200, me
    assert [x["gpus"] for x in me["sessions"]] == ["1/7 × A100-80GB (MIG 1g.10gb)"]
    code, summary = hub.svc("GET", "api/admin/summary", hub.tokens["prometheus"])
    assert code == 200, summary
    shown = {u["user"]: [s["gpus"] for s in u["running"]] for u in summary["users"]}
    assert shown["frank"] == ["1/7 × A100-80GB (MIG 1g.10gb)"]
    # and in the admin's CSV
    request = urllib.request.Request(
        f"{hub.service}api/admin/users.csv",
        headers={"Authorization": f"token {hub.tokens['prometheus']}"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        rows = list(csv.DictReader(io.StringIO(r.read().decode())))
    assert {row["user"]: row["running_gpus"] for row in rows}["frank"] == (
        "1/7 × A100-80GB (MIG 1g.10gb)"
    )
