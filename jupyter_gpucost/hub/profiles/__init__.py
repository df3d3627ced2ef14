"""Profiles: KubeSpawner's ``profile_list`` read from the hub's config, each profile and
option choice priced, pod names, and ``check-profiles``' table.

May import: the hub's core types and rules (:mod:`..model`, :mod:`..allocation`, ...),
:mod:`..ledger` and ``jupyter_gpucost.core``; never :mod:`..cluster`, :mod:`..idle`,
:mod:`..service`, :mod:`..web` or the app.
"""
