"""The training-loop guard's parts: what it reports, how it shows itself and its side of a
spot interruption. The guard itself (its arithmetic and its stop) is
:mod:`jupyter_gpucost.kernel.guard`, the callable module ``from jupyter_gpucost import
guard`` gives, and its trainer callbacks :mod:`jupyter_gpucost.kernel.guard_callbacks`:
both stay at the top of ``kernel/``, where their classes pickle by the names users import.

* :mod:`.summary`: :class:`~.summary.GuardSummary` (the live line, the table),
  :class:`~.summary.BudgetExceeded` and :class:`~.summary.BudgetWarning`;
* :mod:`.display`: the line redrawn in IPython or printed now and then, the warning;
* :mod:`.interrupt`: the notice looked for at each step, the checkpoint's answer,
  :class:`~.interrupt.MachineInterrupted`.
* :mod:`.old_names`: the figures' deprecated names from before currencies
  (``budget_usd``, ``spent_usd``...), read-only, for the guard and its summary.

May import: ``jupyter_gpucost.core`` only (and IPython, when the guard runs in it); never
the rest of the kernel (:mod:`..cell`, :mod:`..link`, the guard, the magics).
"""
