import { Notification } from '@jupyterlab/apputils';

import { bindingBudget, localizeRunOut } from './format';
import { IBudgetEvent, IBudgetStatus } from './tokens';

/**
 * Whether a threshold warning still holds for the budget now: the same budget
 * (kind, amount, scope) with at least the warning's share spent. A share not
 * known keeps the warning.
 */
export function warningHolds(
  event: IBudgetEvent,
  status: IBudgetStatus
): boolean {
  const budget =
    event.budget_kind === 'hard'
      ? status.hard
      : event.budget_kind === 'soft'
        ? status.soft
        : event.budget_kind === 'hub'
          ? (status.hub?.budgets.find(
              b => b.amount === event.amount && b.scope === event.scope
            ) ?? null)
          : bindingBudget(status);
  if (!budget) {
    return false;
  }
  if (
    (event.amount !== undefined && budget.amount !== event.amount) ||
    (event.scope !== undefined && budget.scope !== event.scope)
  ) {
    return false;
  }
  if (event.threshold_pct !== undefined && budget.share !== null) {
    // to millionths, as the share shown, so that 0.95 is 95 %
    return Math.round(budget.share * 1_000_000) >= event.threshold_pct * 10_000;
  }
  return true;
}

/**
 * The threshold warnings shown, each dismissed once it no longer holds.
 */
export class ThresholdWarnings {
  /**
   * Show a threshold warning; `after` is the number of the last budget seen.
   */
  show(event: IBudgetEvent, after: number): void {
    const id = Notification.warning(
      localizeRunOut(event.message, event.runs_out_at),
      { autoClose: false }
    );
    this._shown.push({ id, event, after });
  }

  /**
   * Dismiss the warnings that no longer hold: their budget was removed or
   * changed (another amount or scope), or its share fell back under the
   * warning's threshold. Only a budget received after a warning was shown
   * (`asked`, its number) can dismiss it.
   */
  dismissStale(status: IBudgetStatus, asked: number): void {
    this._shown = this._shown.filter(warning => {
      if (warning.after >= asked) {
        return true;
      }
      if (!warningHolds(warning.event, status)) {
        Notification.dismiss(warning.id);
        return false;
      }
      // dismissed by the person: nothing left to follow
      return Notification.manager.notifications.some(n => n.id === warning.id);
    });
  }

  private _shown: { id: string; event: IBudgetEvent; after: number }[] = [];
}
