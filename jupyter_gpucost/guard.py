"""The public name of the budget guard for training loops (``from jupyter_gpucost import guard``).

The code runs in the kernel and lives in :mod:`jupyter_gpucost.kernel.guard`; importing this
name gives that very module, so its classes pickle and compare as one.
"""

import sys

from .kernel import guard as _module

sys.modules[__name__] = _module
