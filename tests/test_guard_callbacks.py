"""The trainer callbacks in real Lightning and Transformers training loops, on the CPU.

The loops that stop run on a clock the model drives: each forward pass takes one second of
it, so the steps, the spend and the stop are exact. The loops that run to the end use the
real clock with a budget they cannot reach.
"""

from __future__ import annotations

import pickle
import re
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import lightning
import pytest
import torch
import transformers
from torch.utils.data import DataLoader, Dataset, TensorDataset

from jupyter_gpucost.guard import BudgetExceeded, BudgetWarning
from jupyter_gpucost.guard_callbacks import LightningBudgetGuard, TrainerBudgetGuard

# Lightning's own use of torch's pytree, not ours
pytestmark = pytest.mark.filterwarnings("ignore:`isinstance.treespec, LeafSpec.` is deprecated")

#: $3600/h: a dollar for each second of the driven clock
DOLLAR_A_SECOND = 3600
ROWS = 64
BATCH = 4  # 16 batches an epoch


class Clock:
    """A monotonic clock that moves only when the model runs: a second a forward pass."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def tick(self) -> None:
        self.t += 1.0


def _pairs() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, 4, generator=gen)
    return x, x.sum(dim=1, keepdim=True)


class Regression(lightning.LightningModule):
    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.clock = clock

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.clock is not None:
            self.clock.tick()
        x, y = batch
        return torch.nn.functional.mse_loss(self.linear(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _fit(
    tmp_path: Path, callback: Any, clock: Clock | None = None, **trainer: Any
) -> lightning.Trainer:
    options: dict[str, Any] = {
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "accelerator": "cpu",
        "devices": 1,
        "default_root_dir": tmp_path,
        **trainer,
    }
    fit = lightning.Trainer(callbacks=[callback], **options)
    fit.fit(Regression(clock), DataLoader(TensorDataset(*_pairs()), batch_size=BATCH))
    return fit


class Pairs(Dataset[dict[str, torch.Tensor]]):
    def __init__(self) -> None:
        self.x, self.y = _pairs()

    def __len__(self) -> int:
        return ROWS

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class TinyRegression(torch.nn.Module):
    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.clock = clock

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.clock is not None:
            self.clock.tick()
        return {"loss": torch.nn.functional.mse_loss(self.linear(x), labels)}


def _train(
    tmp_path: Path, callback: Any, clock: Clock | None = None, **arguments: Any
) -> transformers.Trainer:
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        per_device_train_batch_size=BATCH,
        logging_strategy="no",
        disable_tqdm=True,
        **arguments,
    )
    trainer = transformers.Trainer(
        model=TinyRegression(clock), args=args, train_dataset=Pairs(), callbacks=[callback]
    )
    trainer.train()
    return trainer


# -- Lightning --------------------------------------------------------------------------


def test_lightning_stops_fit_before_the_budget_is_spent(tmp_path: Path) -> None:
    clock = Clock()
    stops: list[int] = []
    callback = LightningBudgetGuard(
        budget_usd="9.5",
        warmup_steps=3,
        on_stop=lambda g: stops.append(g.steps),
        display=False,
        usd_per_hour=DOLLAR_A_SECOND,
        clock=clock,
    )
    # after 3 steps of 1 s: 3 s + 97 more steps = $100 for the 100 steps
    with pytest.warns(BudgetWarning, match=r"projected to cost \$100\.00 for 100 steps"):
        trainer = _fit(tmp_path, callback, clock, max_steps=100, enable_checkpointing=True)
    # $9 spent after 9 steps; a tenth would take it to $10, over $9.50
    assert trainer.global_step == 9
    assert trainer.should_stop  # what the guard asked; fit then returned normally
    assert trainer.state.finished
    assert isinstance(callback.stopped, BudgetExceeded)
    assert "stopped after step 9 of 100: $9.00 spent" in str(callback.stopped)
    assert callback.stopped.summary.steps == 9
    assert stops == [9]
    assert callback.guard.total_steps == 100  # from the trainer
    assert callback.guard.spent_usd == Decimal("9.000000")
    # Lightning's own checkpoint, written as the stopped epoch ends
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["epoch=0-step=9.ckpt"]


def test_lightning_within_budget_runs_every_step(tmp_path: Path) -> None:
    stops: list[int] = []
    callback = LightningBudgetGuard(
        budget_usd=1000,
        warmup_steps=5,
        on_stop=lambda g: stops.append(g.steps),
        display=False,
        usd_per_hour=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        trainer = _fit(tmp_path, callback, max_epochs=2)
    assert trainer.global_step == 32
    assert callback.stopped is None
    assert stops == []
    assert callback.guard.total_steps == 32  # 2 epochs of 16 batches, from the trainer
    assert callback.guard.steps == 32
    assert not callback.guard.stopped
    assert not callback.guard.warned


def test_lightning_counts_optimizer_steps_not_batches(tmp_path: Path) -> None:
    clock = Clock()
    callback = LightningBudgetGuard(
        budget_usd=1000, warmup_steps=2, display=False, usd_per_hour=DOLLAR_A_SECOND, clock=clock
    )
    trainer = _fit(tmp_path, callback, clock, max_epochs=1, accumulate_grad_batches=2)
    assert trainer.global_step == 8
    assert callback.guard.total_steps == 8
    assert callback.guard.steps == 8
    assert callback.guard.seconds_per_step == 2.0  # two batches a step
    assert callback.guard.spent_usd == Decimal("16.000000")


def test_lightning_without_an_end_needs_total_steps_and_is_then_stopped(tmp_path: Path) -> None:
    unbounded = {"max_epochs": -1, "max_steps": -1}
    callback = LightningBudgetGuard(budget_usd=1, display=False, usd_per_hour=1)
    with pytest.raises(ValueError, match=r"does not say how many steps.*give total_steps="):
        _fit(tmp_path, callback, **unbounded)

    clock = Clock()
    callback = LightningBudgetGuard(
        budget_usd="9.5",
        total_steps=50,
        warmup_steps=3,
        display=False,
        usd_per_hour=DOLLAR_A_SECOND,
        clock=clock,
    )
    with pytest.warns(BudgetWarning, match=r"projected to cost \$50\.00 for 50 steps"):
        trainer = _fit(tmp_path, callback, clock, **unbounded)
    assert trainer.global_step == 9
    assert isinstance(callback.stopped, BudgetExceeded)
    assert callback.guard.total_steps == 50


# -- Transformers -----------------------------------------------------------------------


def test_transformers_saves_a_checkpoint_and_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    stops: list[int] = []
    callback = TrainerBudgetGuard(
        budget_usd="9.5",
        warmup_steps=3,
        on_stop=lambda g: stops.append(g.steps),
        usd_per_hour=DOLLAR_A_SECOND,
        clock=clock,
    )
    with pytest.warns(BudgetWarning, match=r"projected to cost \$100\.00 for 100 steps"):
        trainer = _train(tmp_path, callback, clock, max_steps=100, save_strategy="no")
    assert trainer.state.global_step == 9
    assert isinstance(callback.stopped, BudgetExceeded)
    assert "stopped after step 9 of 100: $9.00 spent" in str(callback.stopped)
    assert stops == [9]
    assert callback.guard.total_steps == 100  # from the trainer
    assert callback.guard.spent_usd == Decimal("9.000000")
    # saved although the arguments save nothing: the guard asked for it
    assert [p.name for p in tmp_path.glob("checkpoint-*")] == ["checkpoint-9"]
    assert (tmp_path / "checkpoint-9" / "trainer_state.json").is_file()
    # outside IPython the guard prints its lines
    lines = [s for s in capsys.readouterr().out.splitlines() if s.startswith("jupyter-gpucost:")]
    assert lines[1].startswith("jupyter-gpucost: budget warning: the loop is projected to cost")
    assert lines[-1].startswith("jupyter-gpucost: step 9/100 · $9.00 spent of $9.50")
    assert lines[-1].endswith("stopped before the budget ran out")


def test_transformers_within_budget_runs_every_step(tmp_path: Path) -> None:
    callback = TrainerBudgetGuard(budget_usd=1000, warmup_steps=5, display=False, usd_per_hour=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        trainer = _train(tmp_path, callback, num_train_epochs=2, save_strategy="no")
    assert trainer.state.global_step == 32
    assert callback.stopped is None
    assert callback.guard.total_steps == 32  # 2 epochs of 16 batches, from the trainer
    assert callback.guard.steps == 32
    assert not callback.guard.warned
    assert list(tmp_path.glob("checkpoint-*")) == []


def test_transformers_counts_optimizer_steps_not_batches(tmp_path: Path) -> None:
    clock = Clock()
    callback = TrainerBudgetGuard(
        budget_usd=1000,
        total_steps=6,
        warmup_steps=2,
        tokens_per_step=2 * BATCH,
        display=False,
        usd_per_hour=DOLLAR_A_SECOND,
        clock=clock,
    )
    trainer = _train(
        tmp_path, callback, clock, max_steps=6, gradient_accumulation_steps=2, save_strategy="no"
    )
    assert trainer.state.global_step == 6
    assert callback.guard.steps == 6
    assert callback.guard.seconds_per_step == 2.0
    # $2 a step for 8 rows
    assert callback.guard.usd_per_1k_tokens == Decimal("250.000000000")


# -- both -------------------------------------------------------------------------------

BOTH = [LightningBudgetGuard, TrainerBudgetGuard]


@pytest.mark.parametrize("callback_class", BOTH)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budget_usd": -1}, "budget_usd must be more than 0, not -1"),
        ({"budget_usd": "five"}, "budget_usd must be a number of dollars, not 'five'"),
        ({"budget_usd": 5, "warmup_steps": 0}, "warmup_steps must be at least 1, not 0"),
        ({"budget_usd": 5, "total_steps": 2.5}, "total_steps must be a whole number, not 2.5"),
        ({"budget_usd": 5, "usd_per_hour": -1}, "usd_per_hour cannot be negative, not -1"),
        ({"budget_usd": 5, "total_steps": 0}, "total_steps must be at least 1, not 0"),
        (
            {"budget_usd": 5, "on_stop": "save"},
            "on_stop must be a function taking the guard, not 'save'",
        ),
        (
            {"budget_usd": 5, "tokens_per_step": 2.5},
            "tokens_per_step must be a whole number >= 0, not 2.5",
        ),
    ],
)
def test_bad_arguments_are_refused_when_the_callback_is_made(
    callback_class: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        callback_class(**kwargs)


def test_a_callback_survives_pickling(tmp_path: Path) -> None:
    # strategy="ddp_spawn" and other process launchers pickle the trainer with its callbacks
    callback = LightningBudgetGuard(budget_usd="2.5", warmup_steps=2, display=False, usd_per_hour=2)
    copy = pickle.loads(pickle.dumps(callback))
    assert type(copy) is LightningBudgetGuard
    _fit(tmp_path, copy, max_steps=3)
    assert copy.guard.steps == 3
    assert copy.guard.budget_usd == Decimal("2.5")
    assert copy.guard.usd_per_hour == 2
    hf = TrainerBudgetGuard(budget_usd=1, total_steps=4, usd_per_hour=2)
    assert type(pickle.loads(pickle.dumps(hf))) is TrainerBudgetGuard
