"""The budget guard as a PyTorch Lightning callback and a Hugging Face ``TrainerCallback``.

::

    from jupyter_gpucost.guard_callbacks import LightningBudgetGuard
    trainer = Trainer(callbacks=[LightningBudgetGuard(budget_usd=5)])

    from jupyter_gpucost.guard_callbacks import TrainerBudgetGuard
    trainer = Trainer(..., callbacks=[TrainerBudgetGuard(budget_usd=5)])

Each counts optimizer steps, takes the loop's length from the trainer (Lightning's
``estimated_stepping_batches``, Transformers' ``state.max_steps``) unless ``total_steps`` is
given, and when the guard stops (one more step would go over the budget) asks the trainer
to stop after the current step instead of raising: Lightning through
``trainer.should_stop``, Transformers through ``control.should_training_stop``, with
``control.should_save`` so the Trainer saves a checkpoint first. ``on_stop(guard)`` is
called as with :func:`jupyter_gpucost.guard`. The stop, if any, is kept in ``.stopped``
(the :class:`~jupyter_gpucost.guard.BudgetExceeded`) and the guard in ``.guard``. The
arguments are the guard's, with ``tokens_per_step`` for ``step(tokens=)`` and ``clock`` as
:class:`~jupyter_gpucost.guard.Guard`'s.

Neither library is a dependency: each class is built the first time it is imported, and
importing it without its library raises an ImportError that says what to install.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.i18n import _
from .guard import BudgetExceeded, Dollars, Guard, OnStop

_BUILT: dict[str, type] = {}


def _base(name: str, candidates: tuple[tuple[str, str], ...], install: str) -> type:
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and module_name.startswith(e.name):
                continue
            raise
        found: type = getattr(module, attr)
        return found
    raise ImportError(
        f"{name} needs {install.split(':')[0]}, which is not installed in this kernel's "
        f"environment: {install.split(':', 1)[1].strip()}"
    )


@dataclass(frozen=True)
class _GuardOptions:
    """The guard's arguments, kept until training starts and the step count is known."""

    #: in the session's currency, as the guard's ``budget_usd=`` argument
    budget: Dollars
    warmup_steps: int
    on_stop: OnStop | None
    display: bool
    per_hour: Dollars | None
    clock: Callable[[], float]


class _Adapter:
    """What both callbacks share: their arguments, and a guard started with the training loop.

    First in each callback's bases, so that its ``__init__`` is the callback's and passes
    on to the library's base class.
    """

    def __init__(
        self,
        budget_usd: Dollars,
        total_steps: int | None = None,
        *,
        warmup_steps: int = 20,
        tokens_per_step: int | None = None,
        on_stop: OnStop | None = None,
        display: bool = True,
        usd_per_hour: Dollars | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        # checked now, with the real total given when training starts
        Guard(
            budget_usd,
            1 if total_steps is None else total_steps,
            warmup_steps=warmup_steps,
            on_stop=on_stop,
            usd_per_hour=usd_per_hour,
            clock=clock,
        )
        if tokens_per_step is not None and (
            isinstance(tokens_per_step, bool)
            or not isinstance(tokens_per_step, int)
            or tokens_per_step < 0
        ):
            text = _("{what} must be a whole number >= 0, not {value}")
            raise ValueError(text.format(what="tokens_per_step", value=repr(tokens_per_step)))
        self.options = _GuardOptions(
            budget=budget_usd,
            warmup_steps=warmup_steps,
            on_stop=on_stop,
            display=display,
            per_hour=usd_per_hour,
            clock=clock,
        )
        self.total_steps = total_steps
        self.tokens_per_step = tokens_per_step
        self.guard: Guard | None = None
        self.stopped: BudgetExceeded | None = None

    def _begin(self, trainer_steps: object) -> None:
        """Start the guard; ``trainer_steps``: how many steps the trainer says it will run."""
        total = self.total_steps or _finite_count(trainer_steps)
        if not total or total < 1:
            raise ValueError(
                _("the trainer does not say how many steps it will run: give total_steps=")
            )
        options = self.options
        self.guard = Guard(
            options.budget,
            int(total),
            warmup_steps=options.warmup_steps,
            on_stop=options.on_stop,
            display=options.display,
            usd_per_hour=options.per_hour,
            clock=options.clock,
        )
        self.guard.__enter__()
        self.stopped = None

    def _step(self) -> bool:
        """One optimizer step; True when training should stop."""
        if self.guard is None or self.stopped is not None:
            return self.stopped is not None
        try:
            self.guard.step(tokens=self.tokens_per_step)
        except BudgetExceeded as e:
            self.stopped = e
            return True
        return False

    def _end(self) -> None:
        if self.guard is not None:
            self.guard.__exit__(None, None, None)


def _finite_count(value: object) -> int | None:
    """A step count the trainer gave, or None when it has none (Lightning's is inf then)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 1:
        return None
    return int(value)


def _lightning() -> type:
    base = _base(
        "LightningBudgetGuard",
        (("lightning.pytorch", "Callback"), ("pytorch_lightning", "Callback")),
        "PyTorch Lightning: pip install lightning",
    )

    class LightningBudgetGuard(_Adapter, base):  # type: ignore[misc, valid-type]
        """A Lightning ``Callback`` that stops ``trainer.fit`` before the budget is spent."""

        # the name the module gives it, so that it pickles (ddp_spawn pickles callbacks)
        __qualname__ = "LightningBudgetGuard"

        _global_step = 0  # the trainer's, at the last optimizer step counted

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            # float("inf") when the fit has no end (max_steps=-1, max_epochs=-1)
            self._begin(None if self.total_steps else trainer.estimated_stepping_batches)
            self._global_step = int(trainer.global_step)

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            step = int(trainer.global_step)
            if step == self._global_step:  # gradient accumulation: no optimizer step yet
                return
            self._global_step = step
            if self._step():
                trainer.should_stop = True

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self._end()

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self._end()

    return LightningBudgetGuard


def _transformers() -> type:
    base = _base(
        "TrainerBudgetGuard",
        (("transformers", "TrainerCallback"),),
        "Hugging Face Transformers: pip install transformers",
    )

    class TrainerBudgetGuard(_Adapter, base):  # type: ignore[misc, valid-type]
        """A Transformers ``TrainerCallback`` that saves and stops before the budget is spent."""

        __qualname__ = "TrainerBudgetGuard"

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            self._begin(getattr(state, "max_steps", None))
            return control

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if self._step():
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            self._end()
            return control

    return TrainerBudgetGuard


_FACTORIES = {"LightningBudgetGuard": _lightning, "TrainerBudgetGuard": _transformers}


def __getattr__(name: str) -> type:
    factory = _FACTORIES.get(name)
    if factory is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _BUILT:
        _BUILT[name] = factory()
    return _BUILT[name]
