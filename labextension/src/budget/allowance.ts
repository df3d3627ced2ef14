import { formatMoney } from '../format';
import { trans } from '../i18n';
import { formatLocalTime } from './format';
import { formatAhead } from './time-left';
import { IBudgetStatus, IHubAllowance } from './tokens';

/**
 * The period as the sentence ends: `this week`, `today`, `in the last 7 days`,
 * `until it tops up` (the hub's own wording, `jupyter_gpucost.hub.allowance.words`).
 */
export function allowancePeriod(period: string): string {
  switch (period) {
    case 'day':
      return trans().__('today');
    case 'week':
      return trans().__('this week');
    case 'month':
      return trans().__('this month');
    case 'balance':
      return trans().__('until it tops up');
  }
  const days = /^(\d+) days?$/.exec(period);
  return days
    ? trans().__('in the last %1 days', days[1])
    : trans().__('per %1', period);
}

/**
 * What is left: `6 h 20 min of GPU time left this week`, `$12.40 left this
 * month` (GPU time in the server's duration words, `about-rule.json`).
 */
export function allowanceLeft(a: IHubAllowance, symbol: string): string {
  const period = allowancePeriod(a.period);
  if (a.unit === 'gpu_hours') {
    return trans().__(
      '%1 of GPU time left %2',
      formatAhead(Math.max(0, a.left) * 3600),
      period
    );
  }
  return trans().__(
    '%1 left %2',
    formatMoney(Math.max(0, a.left), symbol),
    period
  );
}

/**
 * When it fills: `tops up at Mon 09:00` (a balance), `fills up again at …`
 * (a period's end, a rolling window's next slide).
 */
export function allowanceRefill(
  a: IHubAllowance,
  now: number = Date.now()
): string {
  const at = formatLocalTime(a.refill_at, now);
  return a.period === 'balance'
    ? trans().__('tops up at %1', at)
    : trans().__('fills up again at %1', at);
}

/**
 * Who set it, and that it cannot be changed here: `set by your hub admin,
 * read-only`, or the group's.
 */
export function allowanceSource(a: IHubAllowance): string {
  return a.source.startsWith('group:')
    ? trans().__(
        'group %1, set by your hub admin (read-only)',
        a.source.slice('group:'.length)
      )
    : trans().__('set by your hub admin (read-only)');
}

/**
 * The whole line: `6 h 20 min of GPU time left this week · fills up again at
 * Mon 00:00 · set by your hub admin (read-only)`.
 */
export function allowanceLine(
  a: IHubAllowance,
  symbol: string,
  now: number = Date.now()
): string {
  return [
    allowanceLeft(a, symbol),
    allowanceRefill(a, now),
    allowanceSource(a)
  ].join(' · ');
}

/**
 * The hub's allowances, one line each, for the status bar's tooltip.
 */
export function allowanceLines(
  status: Pick<IBudgetStatus, 'hub'> | null,
  symbol: string,
  now: number = Date.now()
): string[] {
  return (status?.hub?.allowances ?? []).map(a =>
    trans().__('Hub allowance: %1.', allowanceLine(a, symbol, now))
  );
}
