"""The server's side of the translations: JupyterLab's language setting chooses the
language of the server's messages and of the extension's settings schemas.

``jupyterlab_server`` translates a settings schema with the gettext domain the schema names
(``jupyter.lab.internationalization.domain``), but looks for that domain's catalog only in
the installed language pack; an extension's own translations (its ``jupyterlab.locale``
entry point) reach the browser but not the schemas. This registers the extension's domain
with the shipped catalog (:mod:`jupyter_gpucost.core.i18n`), so that the Settings Editor
shows the schemas in the user's language, and the same locale change sets the language of
the server's messages, and of the kernels it starts from then on (their environment's
``JUPYTER_GPUCOST_LANGUAGE``, :mod:`jupyter_gpucost.core.protocol`).

JupyterLab's server changes its locale only when a page loads its translations or reads
its settings; a change of the setting (the Settings Editor, another tab, the settings API)
would reach the server's messages and the kernels only at the next page load.
:class:`LanguageSetting` reads the setting itself, the way JupyterLab's settings API does,
whenever its file changes (:func:`watch_jupyterlab_language`, once a second, off the loop).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from tornado.ioloop import PeriodicCallback

from ..core.i18n import DOMAIN, GettextAdapter, messages_for, set_language
from ..core.protocol import ENV_LANGUAGE


def follow_jupyterlab_language(log: logging.Logger) -> bool:
    """Register the domain with JupyterLab's translator; False when JupyterLab's server
    (``jupyterlab_server``) is not installed (messages then stay in English)."""
    try:
        from jupyterlab_server import translation_utils
    except ImportError:
        return False

    class Bundle(translation_utils.TranslationBundle):
        """The domain's translations, from the package's own catalog."""

        def update_locale(self, locale_: str) -> None:
            # JupyterLab serves an extension's translations to the browser only for a
            # language whose language pack is installed: the server speaks the same
            language = locale_ if _has_language_pack(locale_) else "en"
            self._locale = locale_
            self._translator = GettextAdapter(messages_for(language))
            set_language(language)
            # kernels started from now on write their own output in it (kernel.link)
            os.environ[ENV_LANGUAGE] = language

    translator = translation_utils.translator
    registry = getattr(translator, "_TRANSLATORS", None)
    if not isinstance(registry, dict):
        log.warning("jupyter-gpucost: JupyterLab's translator has changed; messages in English")
        return False
    registry[DOMAIN] = Bundle(DOMAIN, str(getattr(translator, "_LOCALE", "en")))
    return True


def _has_language_pack(locale_: str) -> bool:
    try:
        return importlib.util.find_spec(f"jupyterlab_language_pack_{locale_}") is not None
    except (ImportError, ValueError):
        return False


#: JupyterLab's language setting (its plugin's id)
LANGUAGE_PLUGIN = "@jupyterlab/translation-extension:plugin"
#: how often the setting's file is looked at
WATCH_INTERVAL_S = 1.0


@dataclass(frozen=True)
class LabSettingsPlace:
    """Where the JupyterLab application serving the pages keeps its settings."""

    app_settings_dir: str
    schemas_dir: str
    user_settings_dir: str
    labextensions_path: tuple[str, ...]

    @property
    def language_file(self) -> str:
        """The user's language setting, as JupyterLab's settings API writes it."""
        package, plugin = LANGUAGE_PLUGIN.split(":")
        return os.path.join(self.user_settings_dir, package, f"{plugin}.jupyterlab-settings")


def lab_settings_place(serverapp: Any) -> LabSettingsPlace | None:
    """The settings of JupyterLab's application on this server (else Notebook 7's, which
    keeps the same user settings); None when neither is loaded."""
    manager = getattr(serverapp, "extension_manager", None)
    apps: dict[str, set[Any]] = getattr(manager, "extension_apps", None) or {}
    for name in ("jupyterlab", "notebook"):
        for app in apps.get(name, set()):
            try:
                return LabSettingsPlace(
                    app_settings_dir=str(app.app_settings_dir),
                    schemas_dir=str(app.schemas_dir),
                    user_settings_dir=str(app.user_settings_dir),
                    labextensions_path=tuple(
                        str(p) for p in [*app.extra_labextensions_path, *app.labextensions_path]
                    ),
                )
            except AttributeError:
                continue
    return None


class LanguageSetting:
    """JupyterLab's language setting, read as its settings API reads it (the user's file,
    the administrator's overrides, the schema's default), again whenever the file
    changes. Blocking: call it off the event loop."""

    def __init__(self, place: LabSettingsPlace) -> None:
        self.place = place
        self._overrides = _overrides(place.app_settings_dir)
        self._seen: tuple[int, int, int] | bool | None = False  # False: never looked
        self._unreadable: tuple[int, int, int] | bool | None = False

    def changed_locale(self) -> str | None:
        """The setting's locale when its file changed since the last call (or on the
        first call), else None. A file that cannot be read is read again at the next call
        (it may be half written); one that still cannot be read, unchanged, means
        JupyterLab's default, as for JupyterLab's pages."""
        try:
            info = os.stat(self.place.language_file)
            seen: tuple[int, int, int] | None = (info.st_mtime_ns, info.st_size, info.st_ino)
        except OSError:
            seen = None
        if seen == self._seen:
            return None
        try:
            settings = self._read()
        except Exception:
            if seen != self._unreadable:
                self._unreadable = seen
                return None  # again next time: the previous language until then
            settings = {}
        self._seen = seen
        return self._locale(settings)

    def locale(self) -> str:
        """The locale JupyterLab's pages load (``get_current_locale`` of its settings API)."""
        try:
            settings = self._read()
        except Exception:
            settings = {}
        return self._locale(settings)

    def _read(self) -> dict[str, object]:
        from jupyterlab_server import settings_utils as su

        settings, _warnings = su.get_settings(
            self.place.app_settings_dir,
            self.place.schemas_dir,
            self.place.user_settings_dir,
            schema_name=LANGUAGE_PLUGIN,
            overrides=self._overrides,
            labextensions_path=list(self.place.labextensions_path),
        )
        return dict(settings)

    @staticmethod
    def _locale(settings: dict[str, Any]) -> str:
        from jupyterlab_server import translation_utils as tu

        chosen = settings.get("settings", {}).get("locale") or tu.SYS_LOCALE
        if chosen == "default":
            chosen = tu.SYS_LOCALE
        if not tu.is_valid_locale(chosen):
            chosen = tu.DEFAULT_LOCALE
        return str(chosen)


def watch_jupyterlab_language(
    serverapp: Any, log: logging.Logger, interval_s: float = WATCH_INTERVAL_S
) -> PeriodicCallback | None:
    """Follow JupyterLab's language setting from its file, within ``interval_s`` of a
    change, for every tab and for kernels started next; None without JupyterLab's server."""
    try:
        from jupyterlab_server.translation_utils import translator
    except ImportError:
        return None
    setting: list[LanguageSetting] = []

    def look() -> str | None:
        if not setting:
            # the JupyterLab application is loaded after or before this extension
            place = lab_settings_place(serverapp)
            if place is None:
                return None
            setting.append(LanguageSetting(place))
        return setting[0].changed_locale()

    async def follow() -> None:
        try:
            locale_ = await to_thread.run_sync(look)
        except Exception:
            log.exception("jupyter-gpucost: reading JupyterLab's language setting failed")
            return
        if locale_ is not None:
            set_locale: Callable[[str], None] = translator.set_locale
            set_locale(locale_)

    watch = PeriodicCallback(follow, interval_s * 1000)
    watch.start()
    return watch


def _overrides(app_settings_dir: str) -> dict[str, object]:
    """The administrator's overrides of settings' defaults, as JupyterLab loads them."""
    from jupyterlab_server import settings_utils as su

    load = getattr(su, "_get_overrides", None)
    if load is None:
        return {}
    try:
        found, _error = load(app_settings_dir)
    except Exception:
        return {}
    return dict(found)
