import { Widget } from '@lumino/widgets';

import { STATUS_ITEM_ID } from '../view';
import { budgetShown } from './shown';
import { IBudgetStatus } from './tokens';

/**
 * The DOM id of the budget status item.
 */
export const BUDGET_ITEM_ID = 'jp-gpucost-budget';

/**
 * The budget's status bar item (`budget 42% of $5.00`, `stop in 1:05`); it
 * also marks the cost item with the budget's state (`data-budget`).
 */
export class BudgetStatusItem extends Widget {
  constructor() {
    super();
    this.id = BUDGET_ITEM_ID;
    this.addClass('jp-gpucost-BudgetItem');
    this.node.dataset.budget = 'none';
  }

  /**
   * Show `status` with the server's currency `symbol`.
   */
  showBudget(status: IBudgetStatus | null, symbol: string): void {
    // the budgets, or what is left of the hub's allowances (read-only)
    const { state, text, title } = budgetShown(status, symbol);
    this.node.dataset.budget = state;
    this.node.textContent = text;
    this.node.title = title;
    this.node.classList.add('jp-StatusBar-TextItem');
    const costItem = document.getElementById(STATUS_ITEM_ID);
    if (costItem) {
      costItem.dataset.budget = state;
      costItem.classList.toggle(
        'jp-gpucost-budget-warning',
        state === 'warning'
      );
      costItem.classList.toggle(
        'jp-gpucost-budget-exceeded',
        state === 'exceeded'
      );
    }
    // a stop that is no budget's shows even where no budget is set
    this.setHidden(state === 'none');
  }
}
