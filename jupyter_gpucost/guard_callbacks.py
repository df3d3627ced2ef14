"""The public name of the budget guard's Lightning and Transformers callbacks.

The code runs in the kernel and lives in
:mod:`jupyter_gpucost.kernel.guard_callbacks`; importing this name
gives that very module, so its classes pickle and compare as one.
"""

import sys

from .kernel import guard_callbacks as _module

sys.modules[__name__] = _module
