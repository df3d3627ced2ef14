"""The one catalog of the package's user-visible messages, and their translations.

The translations ship with the package as JupyterLab reads an extension's own:
``jupyter_gpucost/locale/<language>/LC_MESSAGES/jupyter_gpucost.json`` (found through
the package's ``jupyterlab.locale`` entry point), compiled from the ``.po`` file beside it
by ``make i18n``. The browser loads that file as the ``jupyter_gpucost`` domain of
``ITranslator``; the server reads the same file here, so a message has one translation
wherever it is shown.

Server code writes ``_("Budget not set")`` (or :func:`ngettext`, :func:`pgettext`); the
server extension follows JupyterLab's language setting (:func:`set_language`), and a
language with no catalog reads English.
"""

from __future__ import annotations

import gettext
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

#: the translation domain: the front end's ``translator.load(DOMAIN)`` and the file name
DOMAIN = "jupyter_gpucost"
#: the language messages are written in
SOURCE_LANGUAGE = "en"
#: separates a message's context from its text in a compiled catalog (as gettext does)
CONTEXT_SEPARATOR = "\x04"


@dataclass(frozen=True)
class Messages:
    """One language's translations: msgid (``context\\x04msgid``) -> forms."""

    language: str
    entries: dict[str, list[str]] = field(default_factory=dict)
    #: how many plural forms the language has (1 for Chinese, 2 for English)
    plurals: int = 2

    def gettext(self, msgid: str) -> str:
        forms = self.entries.get(msgid)
        return forms[0] if forms and forms[0] else msgid

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.plural(self.entries.get(singular), singular, plural, n)

    def plural(self, forms: list[str] | None, singular: str, plural: str, n: int) -> str:
        """The form for ``n`` of a translated message (English when not translated)."""
        if forms and all(forms[: self.plurals]):
            return forms[0] if self.plurals == 1 else forms[0 if n == 1 else 1]
        return singular if n == 1 else plural

    def pgettext(self, context: str, msgid: str) -> str:
        forms = self.entries.get(f"{context}{CONTEXT_SEPARATOR}{msgid}")
        return forms[0] if forms and forms[0] else msgid


class GettextAdapter(gettext.NullTranslations):
    """:class:`Messages` as the standard library's translations object (what
    ``jupyterlab_server`` translates settings schemas with)."""

    def __init__(self, messages: Messages) -> None:
        super().__init__()
        self.messages = messages

    def gettext(self, message: str) -> str:
        return self.messages.gettext(message)

    def ngettext(self, msgid1: str, msgid2: str, n: int) -> str:
        return self.messages.ngettext(msgid1, msgid2, n)

    def pgettext(self, context: str, message: str) -> str:
        return self.messages.pgettext(context, message)

    def npgettext(self, context: str, msgid1: str, msgid2: str, n: int) -> str:
        forms = self.messages.entries.get(f"{context}{CONTEXT_SEPARATOR}{msgid1}")
        return self.messages.plural(forms, msgid1, msgid2, n)


def normalise(language: str) -> str:
    """``zh-cn`` / ``zh_CN.UTF-8`` -> ``zh_CN``; empty -> English."""
    base = language.split(".", 1)[0].replace("-", "_")
    if not base:
        return SOURCE_LANGUAGE
    head, _, region = base.partition("_")
    return f"{head.lower()}_{region.upper()}" if region else head.lower()


@cache
def messages_for(language: str) -> Messages:
    """The shipped translations into ``language`` (none for English or an unknown one)."""
    language = normalise(language)
    path = resources.files("jupyter_gpucost").joinpath(
        "locale", language, "LC_MESSAGES", f"{DOMAIN}.json"
    )
    if not path.is_file():
        return Messages(language)
    data = json.loads(path.read_text(encoding="utf-8"))
    header = data.pop("", {})
    plural_forms = str(header.get("plural_forms", "nplurals=2;"))
    plurals = 1 if "nplurals=1" in plural_forms.replace(" ", "") else 2
    entries = {k: [str(f) for f in v] for k, v in data.items() if isinstance(v, list)}
    return Messages(language, entries, plurals)


def accept_language(header: str) -> str:
    """The shipped language a browser asks for first (``Accept-Language: zh-CN,zh;q=0.9``
    -> ``zh_CN``; any Chinese is Simplified), English when it asks for none of them."""
    ranked: list[tuple[float, int, str]] = []
    for n, part in enumerate(header.split(",")):
        tag, _sep, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        if tag and quality > 0:
            ranked.append((-quality, n, tag))
    for _q, _n, tag in sorted(ranked):
        language = normalise(tag)
        if language.split("_")[0] == "en":
            return SOURCE_LANGUAGE
        if language.split("_")[0] == "zh":
            return "zh_CN"
        if messages_for(language).entries:
            return language
    return SOURCE_LANGUAGE


@dataclass
class _State:
    language: str = SOURCE_LANGUAGE


_STATE = _State()


class _Speaking(threading.local):
    """A language this thread speaks for a while (:func:`speaking`), or ``None``."""

    language: str | None = None


_SPEAKING = _Speaking()


def set_language(language: str) -> None:
    """The language of the server's messages from now on (JupyterLab's language setting)."""
    _STATE.language = normalise(language)


def current_language() -> str:
    """This thread's language inside :func:`speaking`, else the process's."""
    return _SPEAKING.language or _STATE.language


@contextmanager
def speaking(language: str) -> Iterator[str]:
    """Messages written in this thread, meanwhile, are in ``language`` (an alert for people
    whose language is not the process's); other threads keep theirs."""
    before = _SPEAKING.language
    _SPEAKING.language = normalise(language)
    try:
        yield _SPEAKING.language
    finally:
        _SPEAKING.language = before


def shipped_languages() -> tuple[str, ...]:
    """English and each language with a catalog in the package."""
    root = resources.files("jupyter_gpucost").joinpath("locale")
    found = sorted(
        entry.name
        for entry in root.iterdir()
        if entry.joinpath("LC_MESSAGES", f"{DOMAIN}.json").is_file()
    )
    return (SOURCE_LANGUAGE, *found)


def shipped(language: str) -> bool:
    """Whether messages can be written in ``language`` (English, or a shipped catalog)."""
    english = normalise(language).partition("_")[0] == SOURCE_LANGUAGE
    return english or bool(messages_for(language).entries)


def _(msgid: str) -> str:
    """A message in the current language."""
    return messages_for(current_language()).gettext(msgid)


def N_(msgid: str) -> str:
    """A message marked for the catalog but translated later, where it is shown
    (``LABEL = N_("...")`` then ``_(LABEL)``): for a constant that identifies something
    as well as naming it."""
    return msgid


def ngettext(singular: str, plural: str, n: int) -> str:
    """A message with a count, in the current language's plural form."""
    return messages_for(current_language()).ngettext(singular, plural, n)


def pgettext(context: str, msgid: str) -> str:
    """A message in a context (e.g. ``"settings"``), in the current language."""
    return messages_for(current_language()).pgettext(context, msgid)
