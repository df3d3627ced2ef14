"""The service's pages as HTML: JupyterHub's own ``page.html`` around the service's
templates, in the browser's language."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
from jupyterhub._data import DATA_FILES_PATH  # type: ignore[import-untyped]

from ...core.currency import in_language
from ...core.i18n import SOURCE_LANGUAGE, Messages, messages_for
from ...core.money import as_decimal, column_digits, status_bar
from .page_words import page_words

HERE = Path(__file__).parent


def render(
    env: jinja2.Environment,
    name: str,
    messages: Messages,
    currency_symbol: str,
    *,
    hub_prefix: str,
    service_url: str,
    user: str,
    is_admin: bool,
    xsrf_token: bytes | str,
    **values: Any,
) -> str:
    """One of the service's pages, in ``messages``' language, inside JupyterHub's own
    ``page.html`` (which needs the values a Hub page gets)."""
    return env.get_template(name).render(
        _=messages.gettext,
        **page_words(messages, in_language(currency_symbol, messages.language)),
        static_url=lambda path, include_version=True: f"{hub_prefix}static/{path}",
        base_url=hub_prefix,
        prefix=hub_prefix[: -len("hub/")] if hub_prefix.endswith("hub/") else "/",
        service_url=service_url,
        user={"name": user, "json_escaped_name": json.dumps(user)[1:-1]},
        is_admin=is_admin,
        admin_access=False,
        no_spawner_check=True,
        xsrf_token=xsrf_token,
        logout_url=f"{hub_prefix}logout",
        login_url=f"{hub_prefix}login",
        parsed_scopes={},
        services=[],
        announcement=None,
        version_hash="",
        **values,
    )


def templates(currency_symbol: str = "$") -> jinja2.Environment:
    """The pages' templates; amounts are written by the one money rule, in the currency of
    the hub's prices (``money_text``)."""
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [
                jinja2.FileSystemLoader(str(HERE / "templates")),
                jinja2.FileSystemLoader(str(Path(DATA_FILES_PATH) / "templates")),
            ]
        ),
        autoescape=True,
    )
    env.globals["money_text"] = lambda amount: status_bar(as_decimal(amount), currency_symbol)
    env.globals["currency_symbol"] = currency_symbol
    # one number of decimals for a table's column of amounts (money.column)
    env.globals["column_digits"] = lambda amounts: column_digits(
        as_decimal(str(amount)) for amount in amounts if amount is not None
    )
    # English unless the page is rendered for a browser that asks for another language
    env.globals["_"] = messages_for(SOURCE_LANGUAGE).gettext
    env.globals.update(page_words(messages_for(SOURCE_LANGUAGE), currency_symbol))
    return env
