"""Currencies: which one a session's prices are in, and the symbol written before amounts.

No conversion is ever done: a provider's catalog rows and the admin's overrides are in one
currency, and every amount of the session (cost, budgets, ledger rows, metrics) is in
whole micro-units of it. The amounts' names in the API keep their historical ``_usd``
suffix; the status's ``currency`` field names the unit.

The symbols are those ``Intl.NumberFormat`` writes in English (``CN¥``, ``€``, ``$``), so
that the browser, which writes a currency in the UI's language (``¥`` in Chinese), can
tell a symbol the admin chose from the currency's own.
"""

from __future__ import annotations

import re

#: the currency of prices when a catalog row or the admin names none
DEFAULT_CURRENCY = "USD"

#: ISO 4217 code -> the symbol ``Intl.NumberFormat("en", {currency})`` writes
_SYMBOLS_EN = {
    "USD": "$",
    "EUR": "€",
    "GBP": "£",
    "CNY": "CN¥",
    "JPY": "¥",
    "KRW": "₩",
    "INR": "₹",
    "CAD": "CA$",
    "AUD": "A$",
    "HKD": "HK$",
    "NZD": "NZ$",
    "TWD": "NT$",
    "BRL": "R$",
    "MXN": "MX$",
    "ILS": "₪",
    "VND": "₫",
    "PHP": "₱",
}

#: language -> the symbols that differ from English in it
_SYMBOLS_BY_LANGUAGE = {
    "zh": {"CNY": "¥", "USD": "US$", "JPY": "JP¥"},
}

_CODE = re.compile(r"[A-Z]{3}")


def is_currency_code(code: str) -> bool:
    """Whether ``code`` has the shape of an ISO 4217 code (three capital letters)."""
    return bool(_CODE.fullmatch(code))


def in_language(shown: str, language: str) -> str:
    """A currency's own symbol (the English one: ``$``, ``CN¥``) as a reader of
    ``language`` knows it (``US$``, ``¥`` in Chinese), as ``Intl.NumberFormat`` writes it
    in the browser; a symbol the admin chose is kept as it is."""
    for code, english in _SYMBOLS_EN.items():
        if english == shown:
            return symbol(code, language)
    return shown


def symbol(code: str, language: str = "en") -> str:
    """The symbol written before amounts in ``code`` for a reader of ``language``:
    ``symbol("CNY")`` is ``CN¥``, ``symbol("CNY", "zh_CN")`` is ``¥``; a currency with no
    symbol of its own is its code and a space (``CHF ``)."""
    base = language.replace("-", "_").split("_", 1)[0].lower()
    local = _SYMBOLS_BY_LANGUAGE.get(base, {})
    if code in local:
        return local[code]
    return _SYMBOLS_EN.get(code, f"{code} ")


def for_reader(code: str, shown: str, language: str) -> str:
    """The symbol a session in ``code`` writes before amounts (``shown``, the status's
    ``currency_symbol``) as a reader of ``language`` knows it: the currency's own symbol in
    that language (``¥`` for CNY in Chinese) unless the admin chose another one, which is
    kept as it is (an admin's ``¥`` for dollars stays ``¥``). The browser's
    ``currencySymbol`` follows the same rule."""
    if code and shown == symbol(code):
        return symbol(code, language)
    return shown
