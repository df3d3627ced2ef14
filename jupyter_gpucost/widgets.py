"""The public name of the live cost ticker (``from jupyter_gpucost import CostTicker``).

The code runs in the kernel and lives in :mod:`jupyter_gpucost.kernel.widgets`; importing this
name gives that very module, so its classes pickle and compare as one.
"""

import sys

from .kernel import widgets as _module

sys.modules[__name__] = _module
