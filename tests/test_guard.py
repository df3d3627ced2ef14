"""The training budget guard: in a real kernel, and its arithmetic with a clock we drive."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from kernel_notebook import H100_SERVER_PRICES, displays, run_notebook, text

from jupyter_gpucost.core.protocol import ENV_PRICES
from jupyter_gpucost.guard import BudgetExceeded, BudgetWarning, Guard

SETUP = """\
import time
from decimal import Decimal
from jupyter_gpucost import guard
from jupyter_gpucost.guard import BudgetExceeded
saved = []
def save_checkpoint(g):
    saved.append(g.steps)
"""


def test_a_loop_projected_over_budget_warns_then_stops_before_the_money_is_spent() -> None:
    # $36/h is a cent a second: 200 steps of 50 ms would cost about $0.10, the budget is $0.02
    nb = run_notebook(
        [
            SETUP,
            "try:\n"
            "    with guard(budget_usd='0.02', total_steps=200, warmup_steps=5,\n"
            "               on_stop=save_checkpoint, usd_per_hour=36) as g:\n"
            "        for i in range(200):\n"
            "            time.sleep(0.05)\n"
            "            g.step(tokens=512)\n"
            "except BudgetExceeded as e:\n"
            "    stop = e\n"
            "    print('caught:', e)",
            "print(saved == [g.steps], 5 < g.steps < 200, g.warned, g.stopped)\n"
            "print(g.spent_usd <= g.budget_usd, g.spent_usd >= g.budget_usd * 8 / 10)\n"
            "print(g.projected_usd > g.budget_usd, stop.summary.steps == g.steps)\n"
            "print(abs(g.usd_per_1k_tokens - g.usd_per_step * 1000 / 512) < Decimal('1e-8'))",
            "print(g.summary())",
        ]
    )
    loop = nb.cells[1]
    # the warning, as Python shows warnings and as a line in the notebook
    assert "BudgetWarning: the loop is projected to cost $0." in text(loop, stream="stderr")
    assert "over its budget of $0.0200" in text(loop, stream="stderr")
    shown = displays(loop)
    assert any(s.startswith("budget warning: the loop is projected to cost") for s in shown)
    # the live line ends on the stop
    live = [s for s in shown if s.startswith("step ")]
    assert len(live) == 1
    assert "spent of $0.0200" in live[0]
    assert live[0].endswith("stopped before the budget ran out")
    assert "/1k tokens" in live[0]
    assert "caught: stopped after step" in text(loop, stream="stdout")
    assert "would go over the budget of $0.0200" in text(loop, stream="stdout")
    assert text(nb.cells[2]).split() == ["True"] * 9
    summary = text(nb.cells[3])
    assert "stopped: one more step would have gone over the budget" in summary
    assert "rate: $36/h" in summary


def test_a_loop_within_budget_runs_every_step_without_warning() -> None:
    prices = H100_SERVER_PRICES
    nb = run_notebook(
        [
            SETUP,
            "with guard(budget_usd=1, total_steps=30, warmup_steps=5,\n"
            "           on_stop=save_checkpoint) as g:\n"
            "    for i in range(30):\n"
            "        time.sleep(0.02)\n"
            "        g.step()\n"
            "print('done')",
            "print(g.steps, g.warned, g.stopped, saved, g.usd_per_hour)\n"
            "print(g.spent_usd <= g.budget_usd, g.usd_per_1k_tokens)\n"
            "print(abs(g.projected_usd - g.spent_usd) < Decimal('0.0001'))",
        ],
        env={ENV_PRICES: prices},
    )
    loop = nb.cells[1]
    assert "BudgetWarning" not in text(loop)
    assert not any(s.startswith("budget warning") for s in displays(loop))
    assert text(loop, stream="stdout").strip() == "done"
    live = [s for s in displays(loop) if s.startswith("step ")]
    assert live[0].startswith("step 30/30 · $0.")
    assert "projected $0." in live[0]
    assert text(nb.cells[2]).splitlines() == ["30 False False [] 7.38", "True None", "True"]


def test_bad_arguments_say_what_is_wrong() -> None:
    nb = run_notebook(
        [
            "from jupyter_gpucost import guard\n"
            "for kwargs in [dict(budget_usd=-1, total_steps=10),\n"
            "               dict(budget_usd=5, total_steps=0),\n"
            "               dict(budget_usd='five', total_steps=10),\n"
            "               dict(budget_usd=5, total_steps=10, warmup_steps=0),\n"
            "               dict(budget_usd=5, total_steps=2.5)]:\n"
            "    try:\n"
            "        guard(**kwargs)\n"
            "    except ValueError as e:\n"
            "        print(e)",
            "g = guard(budget_usd=5, total_steps=10)\ng.step()  # raises",
        ]
    )
    assert text(nb.cells[0]).splitlines() == [
        "budget_usd must be more than 0, not -1",
        "total_steps must be at least 1, not 0",
        "budget_usd must be a number of dollars, not 'five'",
        "warmup_steps must be at least 1, not 0",
        "total_steps must be a whole number, not 2.5",
    ]
    assert "RuntimeError: g.step() belongs inside `with guard(...) as g:`" in text(nb.cells[1])


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.wall0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def __call__(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return self.wall0 + timedelta(seconds=self.t - 1000.0)


def test_projection_leaves_out_the_first_step_and_stops_at_the_budget() -> None:
    clock = Clock()
    stops: list[int] = []
    # $3600/h: a dollar a second
    g = Guard(
        10,
        100,
        warmup_steps=3,
        usd_per_hour=3600,
        display=False,
        on_stop=lambda guard: stops.append(guard.steps),
        clock=clock,
        wall_clock=clock.wall,
    )
    with g:
        clock.t += 5  # the first step compiles: 5 s
        g.step(tokens=500)
        assert g.projected is None
        assert g.per_step == Decimal("5.000000000")
        clock.t += 1
        g.step(tokens=500)
        assert g.projected is None  # still warming up
        clock.t += 1
        with pytest.warns(BudgetWarning, match=r"projected to cost \$104\.00 for 100 steps"):
            g.step(tokens=500)
        # 7 s so far + 97 steps of 1 s (the first, 5 s step left out of the rate)
        assert g.projected == Decimal("104.000000")
        assert g.projected_end == clock.wall0 + timedelta(seconds=104)
        assert g.per_step == Decimal("1.000000000")
        assert g.per_1k_tokens == Decimal("2.000000000")
        assert g.seconds_per_step == 1.0
        assert g.warned
        clock.t += 1
        g.step(tokens=500)  # 8 s spent: 9 after one more
        clock.t += 1
        g.step(tokens=500)  # 9 s spent: 10 after one more, not over
        clock.t += 1
        with pytest.raises(BudgetExceeded, match=r"after step 6 of 100: \$10\.00 spent"):
            g.step(tokens=500)  # 10 s spent: 11 after one more
    assert stops == [6]
    assert g.spent == Decimal("10.000000")
    assert g.spent <= g.budget
    summary = g.summary()
    assert summary.stopped
    assert summary.steps == 6
    # a stopped guard keeps refusing steps
    with pytest.raises(RuntimeError):
        g.step()


def test_the_guard_speaks_the_language_the_server_hands_the_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jupyter_gpucost.core import i18n
    from jupyter_gpucost.core.protocol import ENV_LANGUAGE

    monkeypatch.setenv(ENV_LANGUAGE, "zh_CN")
    clock = Clock()
    try:
        g = Guard(5, 100, warmup_steps=2, usd_per_hour=3600, display=False, clock=clock)

        def run() -> None:
            with g:
                for _ in range(100):
                    clock.t += 1
                    g.step()

        with (
            pytest.warns(BudgetWarning, match="预计该循环 100 步将花费"),
            pytest.raises(BudgetExceeded, match=r"^已在第 \d+/100 步后停止"),
        ):
            run()
        line = g.summary().line()
        assert line.startswith(f"第 {g.steps}/100 步 · 已花费 $")
        assert line.endswith("已在预算用完前停止")
    finally:
        i18n.set_language("en")


def test_money_is_exact() -> None:
    clock = Clock()
    g = Guard("0.5", 10, warmup_steps=2, usd_per_hour="2.75", display=False, clock=clock)
    with g:
        for _ in range(3):
            clock.t += 0.1
            g.step()
    # 0.3 s at $2.75/h = $0.000229166..., rounded half up to the micro-dollar
    assert g.spent == Decimal("0.000229")
    # 0.1 s per step: $0.0000763888... per step, to the nano-dollar
    assert g.per_step == Decimal("0.000076389")
    # 0.3 s + 7 × 0.1 s = 1 s
    assert g.projected == Decimal("0.000764")
    assert not g.warned


def test_importing_the_package_does_not_import_torch_or_ipython() -> None:
    code = (
        "import sys, jupyter_gpucost\n"
        "g = jupyter_gpucost.guard\n"
        "print(callable(g), 'torch' in sys.modules, 'IPython' in sys.modules)\n"
        "from jupyter_gpucost import guard, BudgetExceeded\n"
        "print(guard is g, BudgetExceeded is g.BudgetExceeded)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["True", "False", "False", "True", "True"]


def test_the_trainer_callbacks_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_gpucost import guard_callbacks

    # as in an environment without the libraries: None in sys.modules makes an import fail
    for module in ("lightning", "lightning.pytorch", "pytorch_lightning", "transformers"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr(guard_callbacks, "_BUILT", {})
    with pytest.raises(ImportError, match=r"needs PyTorch Lightning.*pip install lightning"):
        from jupyter_gpucost.guard_callbacks import LightningBudgetGuard  # noqa: F401
    with pytest.raises(ImportError, match=r"needs Hugging Face Transformers.*pip install"):
        from jupyter_gpucost.guard_callbacks import TrainerBudgetGuard  # noqa: F401
