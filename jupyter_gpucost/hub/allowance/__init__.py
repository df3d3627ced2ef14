"""Allowances in money or GPU-hours, per period or topped up on a schedule: the settings
(:mod:`.config`), where each stands from the hub ledger's usage (:mod:`.usage`), what they
say to the user (:mod:`.words`), and each poll's standings with their rates (:mod:`.book`).

May import: the hub's core types and rules (:mod:`..model`, :mod:`..accounting`,
:mod:`..enforcer`) and ``jupyter_gpucost.core``; never :mod:`..service`, :mod:`..web` or
the app.
"""
