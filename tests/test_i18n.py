"""Translations: every message has its Simplified Chinese translation, shipped where
JupyterLab finds an extension's own, and the server reads the same catalog."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from jupyter_gpucost.core import i18n

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpucost_i18n", ROOT / "scripts" / "i18n.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


def test_every_message_of_the_sources_has_a_chinese_translation() -> None:
    """Fails listing each message with no zh_CN translation: run `make i18n`, translate the
    empty msgstr in jupyter_gpucost/locale/zh_CN/LC_MESSAGES/jupyter_gpucost.po, `make i18n`."""
    problems = TOOL.report()
    assert not problems, "\n".join(problems)


def test_the_extraction_finds_front_end_server_and_schema_messages() -> None:
    keys = {m.key for m in TOOL.extract()}
    assert "Raise budget" in keys  # labextension/src/budget/countdown.ts
    assert "budget spent · stop in %1" in keys  # the status item's countdown
    assert "settings\x04Budget (in the server's currency)" in keys  # schema/budget.json
    assert "Your {amount} {budget} is spent." in keys  # server/budget/messages.py


def test_jupyterlab_finds_the_translations_through_the_locale_entry_point() -> None:
    from jupyterlab_server.translation_utils import get_language_pack

    (found,) = [e for e in entry_points(group="jupyterlab.locale") if e.name == i18n.DOMAIN]
    assert found.value == "jupyter_gpucost"
    data, message = get_language_pack("zh_CN")
    assert i18n.DOMAIN in data, message
    assert data[i18n.DOMAIN]["Raise budget"] == ["提高预算"]
    assert data[i18n.DOMAIN][""]["plural_forms"] == "nplurals=1; plural=0;"


def test_the_server_reads_the_same_catalog() -> None:
    shipped = json.loads(
        (ROOT / "jupyter_gpucost/locale/zh_CN/LC_MESSAGES/jupyter_gpucost.json").read_text()
    )
    messages = i18n.messages_for("zh-CN")
    assert messages.gettext("Raise budget") == shipped["Raise budget"][0]
    assert messages.pgettext("settings", "Price every cell") == "为每个单元格计价"
    assert i18n.messages_for("fr").gettext("Raise budget") == "Raise budget"
    try:
        i18n.set_language("zh_CN")
        assert i18n._("Raise budget") == "提高预算"
    finally:
        i18n.set_language("en")
    assert i18n._("Raise budget") == "Raise budget"


def test_the_server_follows_jupyterlabs_language_and_translates_the_schemas() -> None:
    import logging

    from jupyterlab_server.translation_utils import translator

    from jupyter_gpucost.server.translations import follow_jupyterlab_language

    schema = json.loads((ROOT / "labextension/schema/budget.json").read_text())
    assert follow_jupyterlab_language(logging.getLogger("test"))
    try:
        translator.set_locale("zh_CN")
        assert i18n.current_language() == "zh_CN"
        translated = translator.translate_schema(schema)
        assert translated["title"] == "GPU 费用：预算"  # noqa: RUF001
        assert i18n._("session budget") == "会话预算"
        # a language whose pack is not installed: JupyterLab shows English, so does the server
        translator.set_locale("fr_FR")
        assert i18n.current_language() == "en"
    finally:
        translator.set_locale("en")
        i18n.set_language("en")


#: a placeholder a message fills in: Python's {name}, JupyterLab's %1 and printf's %s, %d
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z_0-9]*\}|%\d|%\([A-Za-z_]+\)[sd]|%[sd]")


def test_every_translation_fills_in_exactly_the_placeholders_of_its_message() -> None:
    """A translation that names a placeholder its message does not pass raises when it is
    formatted (a 500, a broken page), and one that drops a placeholder hides a figure."""
    from babel.messages.pofile import read_po

    po = ROOT / "jupyter_gpucost" / "locale" / "zh_CN" / "LC_MESSAGES" / "jupyter_gpucost.po"
    with po.open("rb") as f:
        catalog = read_po(f)
    wrong = []
    for message in catalog:
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        # a plural's forms may each leave out the count; none may bring a placeholder of
        # its own
        allowed = set().union(*(PLACEHOLDER.findall(i) for i in ids))
        for text in strings:
            found = set(PLACEHOLDER.findall(text))
            if found - allowed or (len(ids) == 1 and found != allowed):
                wrong.append(f"{ids[0]!r}: {sorted(found)} instead of {sorted(allowed)}")
    assert not wrong, "\n".join(wrong)


def test_every_translation_keeps_the_utc_time_the_browser_writes_in_local_time() -> None:
    """The front end finds a server message's ``{time} UTC`` and writes the reader's own
    time there (``localizeRunOut``, ``localizeActionTime``): a translation that moves the
    word ("UTC {time}") or drops it leaves the reader a UTC time in their language."""
    from babel.messages.pofile import read_po

    for po in sorted((ROOT / "jupyter_gpucost" / "locale").glob("*/LC_MESSAGES/*.po")):
        with po.open("rb") as f:
            catalog = read_po(f)
        wrong = []
        for message in catalog:
            ids = message.id if isinstance(message.id, tuple) else (message.id,)
            if not message.id or not any("{time} UTC" in i for i in ids):
                continue
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            wrong += [f"{ids[0]!r}: {text!r}" for text in strings if "{time} UTC" not in text]
        assert not wrong, f"{po}:\n" + "\n".join(wrong)


def test_a_thread_speaking_another_language_changes_no_other_thread() -> None:
    import threading

    english = "the budget ran out"
    chinese = i18n.messages_for("zh_CN").gettext(english)
    assert chinese != english
    inside = threading.Event()
    release = threading.Event()
    seen: dict[str, str] = {}

    def alerts_thread() -> None:
        with i18n.speaking("zh-CN") as language:
            seen["language"] = language
            seen["inside"] = i18n._(english)
            inside.set()
            release.wait(10)
        seen["after"] = i18n._(english)

    worker = threading.Thread(target=alerts_thread)
    worker.start()
    try:
        assert inside.wait(10)
        # meanwhile, this thread (a request handler, another alert) keeps the process's
        assert i18n.current_language() == "en"
        assert i18n._(english) == english
    finally:
        release.set()
        worker.join(10)
    assert seen == {"language": "zh_CN", "inside": chinese, "after": english}


def test_the_shipped_languages_are_english_and_the_catalogs() -> None:
    assert i18n.shipped_languages() == ("en", "zh_CN")
    assert i18n.shipped("zh-cn")
    assert i18n.shipped("en_US")
    assert not i18n.shipped("tlh")
