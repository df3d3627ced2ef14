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
"""

from __future__ import annotations

import importlib.util
import logging
import os

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
