import { allowanceLeft, allowanceLines } from './allowance';
import {
  BudgetDisplayState,
  budgetDisplayState,
  budgetText,
  budgetTitle
} from './format';
import { IBudgetStatus, IHubAllowance } from './tokens';

/**
 * What the status bar (JupyterLab) and the top bar (Notebook 7) show of the
 * budgets and the hub's allowances: one state, one line, one tooltip.
 */
export interface IBudgetShown {
  state: BudgetDisplayState;
  text: string;
  title: string;
}

/**
 * The hub allowance with the smallest share left (the one that runs out
 * first at an even pace); `null` when the hub sets none.
 */
export function tightestAllowance(
  status: Pick<IBudgetStatus, 'hub'> | null
): IHubAllowance | null {
  let tightest: IHubAllowance | null = null;
  let least = Infinity;
  for (const a of status?.hub?.allowances ?? []) {
    const share = a.amount > 0 ? a.left / a.amount : a.left > 0 ? 1 : 0;
    if (share < least) {
      least = share;
      tightest = a;
    }
  }
  return tightest;
}

/**
 * The budgets' line when one is set or a stop counts down; otherwise, where
 * the hub sets allowances only, what is left of the tightest one (`6 h 20 min
 * of GPU time left this week`), `exceeded` once it is spent.
 */
export function budgetShown(
  status: IBudgetStatus | null,
  symbol: string,
  now: number = Date.now()
): IBudgetShown {
  let state = budgetDisplayState(status);
  let text = budgetText(status, now, symbol);
  const title = [budgetTitle(status, symbol, now)]
    .concat(allowanceLines(status, symbol, now))
    .filter(line => line)
    .join('\n');
  if (state === 'none') {
    const allowance = tightestAllowance(status);
    if (allowance) {
      state = allowance.left > 0 ? 'ok' : 'exceeded';
      text = allowanceLeft(allowance, symbol);
    }
  }
  return { state, text, title };
}
