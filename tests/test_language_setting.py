"""A change of JupyterLab's language setting reaches the server at once: its messages and
the kernels it starts next speak the new language, with no page loaded in between."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.core import i18n
from jupyter_gpucost.core.protocol import ENV_LANGUAGE

LANGUAGE = "lab/api/settings/@jupyterlab/translation-extension:plugin"


@pytest.fixture
def jp_server_config(
    gpucost_config: dict[str, object], no_dmi: str, tmp_path: Path
) -> dict[str, object]:
    # JupyterLab's own server extension too: its settings API is how a language is chosen
    return {
        "ServerApp": {"jpserver_extensions": {"jupyterlab": True, "jupyter_gpucost": True}},
        "LabApp": {
            "user_settings_dir": str(tmp_path / "user-settings"),
            "workspaces_dir": str(tmp_path / "workspaces"),
        },
        "GpuCost": {"dmi_path": no_dmi, **gpucost_config},
    }


@pytest.fixture(autouse=True)
def english_afterwards(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from jupyterlab_server.translation_utils import translator

    monkeypatch.setenv(ENV_LANGUAGE, "")  # the server's change is undone after the test
    yield
    translator.set_locale("en")
    i18n.set_language("en")


async def budget_error(jp_fetch: Any) -> str:
    """What the server answers to a budget of 0 (a person reads it in the budget dialog)."""
    with pytest.raises(HTTPClientError) as e:
        await jp_fetch("gpucost", "api", "budget", method="PUT", body=json.dumps({"amount_usd": 0}))
    assert e.value.response is not None
    return str(json.loads(e.value.response.body)["message"])


async def kernel_language(jp_fetch: Any, jp_serverapp: Any) -> str:
    """The language a kernel started now finds in its own environment."""
    answer = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": "python3"}))
    kernel_id = json.loads(answer.body)["id"]
    try:
        pid = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
        environ = (await asyncio.to_thread(Path(f"/proc/{pid}/environ").read_bytes)).split(b"\0")
        found = [v for v in environ if v.startswith(ENV_LANGUAGE.encode() + b"=")]
        return found[0].split(b"=", 1)[1].decode() if found else ""
    finally:
        await jp_fetch("api", "kernels", kernel_id, method="DELETE")


async def until(what: str, predicate: Any, timeout_s: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out: {what}"
        await asyncio.sleep(0.2)


async def set_locale(jp_fetch: Any, locale: str) -> None:
    await jp_fetch(
        LANGUAGE.split("/")[0],
        *LANGUAGE.split("/")[1:],
        method="PUT",
        body=json.dumps({"raw": json.dumps({"locale": locale})}),
    )


async def test_a_change_of_jupyterlabs_language_reaches_the_messages_and_the_next_kernels(
    jp_fetch: Any, jp_serverapp: Any
) -> None:
    await until("the server started in English", lambda: _is(budget_error(jp_fetch), "The budget"))
    assert await kernel_language(jp_fetch, jp_serverapp) == "en"

    # the setting changes (the Settings Editor, another tab, the API): no page loads
    await set_locale(jp_fetch, "zh_CN")
    await until(
        "the budget's error in Chinese", lambda: _is(budget_error(jp_fetch), "预算必须大于 0")
    )
    assert await kernel_language(jp_fetch, jp_serverapp) == "zh_CN"

    # and back, as soon
    await set_locale(jp_fetch, "en")
    await until("the budget's error in English", lambda: _is(budget_error(jp_fetch), "The budget"))
    assert await kernel_language(jp_fetch, jp_serverapp) == "en"


async def test_a_server_started_with_chinese_set_speaks_chinese_before_any_page_loads(
    jp_fetch: Any, jp_serverapp: Any, tmp_path: Path
) -> None:
    # the setting as JupyterLab's settings API writes it, before this server read it
    folder = tmp_path / "user-settings" / "@jupyterlab" / "translation-extension"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plugin.jupyterlab-settings").write_text(
        '{\n  // chosen earlier\n  "locale": "zh_CN"\n}'
    )
    await until(
        "the budget's error in Chinese", lambda: _is(budget_error(jp_fetch), "预算必须大于 0")
    )
    assert await kernel_language(jp_fetch, jp_serverapp) == "zh_CN"


async def _is(message: Any, start: str) -> bool:
    return str(await message).startswith(start)


async def test_a_half_written_setting_keeps_the_language_until_it_can_be_read(
    jp_serverapp: Any, tmp_path: Path
) -> None:
    from jupyter_gpucost.server.translations import LanguageSetting, lab_settings_place

    place = lab_settings_place(jp_serverapp)
    assert place is not None
    assert place.user_settings_dir == str(tmp_path / "user-settings")
    setting = LanguageSetting(place)

    def check() -> None:
        file = Path(place.language_file)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text('{"locale": "zh_CN"}')
        assert setting.changed_locale() == "zh_CN"
        assert setting.changed_locale() is None  # unchanged: not read again
        # caught while JupyterLab writes it: no change yet, read again next time
        file.write_text('{"locale": "e')
        assert setting.changed_locale() is None
        file.write_text('{"locale": "en"}')
        assert setting.changed_locale() == "en"
        # a file that stays unreadable means JupyterLab's default, as for its pages
        file.write_text("{not json")
        assert setting.changed_locale() is None
        assert setting.changed_locale() == setting.locale()

    await asyncio.to_thread(check)
