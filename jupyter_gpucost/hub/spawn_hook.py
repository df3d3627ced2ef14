"""The spawn hook at the path ``jupyterhub_config.py`` files name
(``from jupyter_gpucost.hub.spawn_hook import refuse_over_budget``); it lives in
:mod:`.web.spawn_hook`."""

from .web.spawn_hook import refuse_over_budget

__all__ = ["refuse_over_budget"]
