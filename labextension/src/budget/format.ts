import { formatMoney } from '../format';
import { IBudgetStanding, IBudgetStatus } from './tokens';

/**
 * The value of the status item's `data-budget` attribute.
 */
export type BudgetDisplayState = 'none' | 'ok' | 'warning' | 'exceeded';

/**
 * The budget's visible state: `exceeded` from the countdown on.
 */
export function budgetDisplayState(
  status: IBudgetStatus | null
): BudgetDisplayState {
  if (!status || (!status.hard && !status.soft)) {
    return 'none';
  }
  switch (status.state) {
    case 'grace':
    case 'enforcing':
    case 'acted':
      return 'exceeded';
    case 'warning':
      return 'warning';
    default:
      return 'ok';
  }
}

/**
 * The budget that binds (least money left), or the only one.
 */
export function bindingBudget(
  status: IBudgetStatus | null
): IBudgetStanding | null {
  if (!status) {
    return null;
  }
  if (status.binding === 'hard' && status.hard) {
    return status.hard;
  }
  if (status.binding === 'soft' && status.soft) {
    return status.soft;
  }
  return status.hard ?? status.soft;
}

/**
 * `14:02` (local time) from an ISO-8601 instant.
 */
export function formatClock(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return iso;
  }
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/**
 * `1:05` from 65 seconds.
 */
export function formatCountdown(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/**
 * The short text of the budget status item, e.g. `budget 42% of $5.00`.
 */
export function budgetText(status: IBudgetStatus | null, now: number): string {
  const budget = bindingBudget(status);
  if (!status || !budget) {
    return '';
  }
  const lock = budget.locked ? '🔒 ' : '';
  const amount = formatMoney(budget.amount_usd, '$');
  if (status.state === 'grace' && status.grace) {
    const left = (new Date(status.grace.ends).getTime() - now) / 1000;
    return `${lock}budget spent · stop in ${formatCountdown(left)}`;
  }
  if (status.state === 'enforcing') {
    return `${lock}budget spent · saving and stopping`;
  }
  if (status.state === 'acted') {
    return `${lock}budget of ${amount} spent`;
  }
  const pct = budget.share === null ? '?' : Math.floor(budget.share * 100);
  return `${lock}budget ${pct}% of ${amount}`;
}

/**
 * The tooltip: each budget, the projected run-out, the last action.
 */
export function budgetTitle(status: IBudgetStatus | null): string {
  if (!status) {
    return '';
  }
  const lines: string[] = [];
  for (const budget of [status.hard, status.soft]) {
    if (!budget) {
      continue;
    }
    const who = budget.locked
      ? "Administrator's budget (locked)"
      : 'Your budget';
    const spent =
      budget.spent_usd === null
        ? 'spent: not known'
        : `${formatMoney(budget.spent_usd, '$')} spent`;
    lines.push(
      `${who}: ${formatMoney(budget.amount_usd, '$')} per ${budget.scope}, ${spent}.`
    );
    if (budget.runs_out_at) {
      lines.push(
        `At the current rate it runs out at ${formatClock(budget.runs_out_at)}.`
      );
    }
  }
  if (lines.length) {
    lines.push(
      `Warnings at ${status.thresholds_pct.join('/')} %; when spent: save notebooks, then ${status.action} after ${status.grace_s} s.`
    );
  }
  if (status.last_action?.message) {
    lines.push(`Last action: ${status.last_action.message}.`);
  }
  return lines.join('\n');
}
