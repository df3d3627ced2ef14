"""The web: the service's HTTP endpoints (the report route, the pages, the CSV, metrics),
what the pages show, and the Hub's REST API client.

May import: everything below it (the core, :mod:`..service`, :mod:`..ledger`,
:mod:`..profiles`, :mod:`..cluster`, :mod:`..idle`); never the app (:mod:`..app`,
:mod:`..settings`, :mod:`..wiring`, :mod:`..runner`).
"""
