import { formatBudget, formatMoney } from '../format';
import { trans } from '../i18n';
import {
  actedText,
  countdownReason,
  countdownText,
  stoppingText,
  stopsAt
} from './reason';
import { IBudgetStanding, IBudgetStatus } from './tokens';

/**
 * The value of the status item's `data-budget` attribute.
 */
export type BudgetDisplayState =
  'none' | 'ok' | 'warning' | 'exceeded' | 'stop';

/**
 * The budget's visible state: `exceeded` from a budget's countdown on; `stop`
 * for a stop that is no budget's (the user's own, an idle reclaim, the end of
 * a run), counting down, acting or done.
 */
export function budgetDisplayState(
  status: IBudgetStatus | null
): BudgetDisplayState {
  const reason = countdownReason(status);
  const acted =
    status?.state === 'acted' && !!actedText(status.last_action?.reason);
  if (
    acted ||
    (reason !== null && reason !== 'budget' && reason !== 'hub-budget')
  ) {
    return 'stop';
  }
  if (!status || allBudgets(status).length === 0) {
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
  const hub = status.hub?.budgets ?? [];
  if (status.binding === 'hub' && hub.length) {
    // the hub's budget with the least money left
    return hub.reduce((a, b) =>
      (b.remaining ?? Infinity) < (a.remaining ?? Infinity) ? b : a
    );
  }
  return status.hard ?? status.soft ?? hub[0] ?? null;
}

/**
 * Every budget in force: the admin's, yours, then the hub's.
 */
export function allBudgets(status: IBudgetStatus): IBudgetStanding[] {
  const out: IBudgetStanding[] = [];
  for (const budget of [status.hard, status.soft]) {
    if (budget) {
      out.push(budget);
    }
  }
  return out.concat(status.hub?.budgets ?? []);
}

/**
 * Who set a budget, as the UI says it: "Your budget", "Administrator's budget
 * (locked, set by the spawner (GPUCOST_BUDGET_USD))", "Hub budget for group
 * physics (locked, set by your hub admin)".
 */
export function budgetOwner(budget: IBudgetStanding): string {
  if (!budget.locked) {
    return trans().__('Your budget');
  }
  const source = budget.source ? `, ${budget.source}` : '';
  if (budget.kind === 'hub') {
    const group = budget.owner?.startsWith('group:')
      ? budget.owner.slice('group:'.length)
      : '';
    return group
      ? trans().__('Hub budget for group %1 (locked%2)', group, source)
      : trans().__('Hub budget (locked%1)', source);
  }
  return trans().__("Administrator's budget (locked%1)", source);
}

/**
 * A time in the browser's local time and time zone: `01:33 PM EST` (the
 * locale's clock), `01:33:57 PM EST` with `seconds`, with the date in front
 * when it is not today (`Nov 24, 01:33 PM EST`), and the year when it is not this
 * year (`Nov 24, 2025, 01:33 PM EST`). Every time of day the budget
 * and the panel show is written by this function.
 */
export function formatLocalTime(
  iso: string,
  now: number = Date.now(),
  options: { seconds?: boolean } = {}
): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return iso;
  }
  const time = date.toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit',
    ...(options.seconds ? { second: '2-digit' as const } : {}),
    timeZoneName: 'short'
  });
  if (date.toDateString() === new Date(now).toDateString()) {
    return time;
  }
  // the year too when it is not this one (`Jan 3, 2025, 01:33 PM EST`)
  const otherYear = date.getFullYear() !== new Date(now).getFullYear();
  const day = date.toLocaleDateString([], {
    month: 'short',
    day: 'numeric',
    ...(otherYear ? { year: 'numeric' as const } : {})
  });
  return `${day}, ${time}`;
}

/**
 * When a budget runs out, written by `formatLocalTime` (`01:33 PM EST`). Every
 * run-out time of the front end is written by this function.
 */
export function formatRunOut(iso: string, now: number = Date.now()): string {
  return formatLocalTime(iso, now);
}

/**
 * A server message with the time of its action (`stopped at $5.00 budget at
 * 14:02 UTC`, `已于 14:02 UTC 因 $5.00 预算停止`) written by `formatLocalTime`
 * instead, from the action's `at`: the server keeps the `HH:MM UTC` token in
 * every language. The message as it is when it has no such time.
 */
export function localizeActionTime(
  message: string,
  at: string | null | undefined,
  now: number = Date.now()
): string {
  if (!at || Number.isNaN(new Date(at).getTime())) {
    return message;
  }
  return message.replace(Private.UTC_TIME, formatLocalTime(at, now));
}

/**
 * The amount "Raise budget" proposes: twice the larger of the budget and what
 * is spent, rounded up to the cent, so that it is always above what is spent.
 */
export function proposeRaise(amount: number, spent: number): number {
  const base = Math.max(amount, spent, 0);
  const cents = Math.ceil(Number((base * 200).toFixed(6)));
  const proposal = Math.max(cents, 1) / 100;
  return proposal > spent ? proposal : Math.ceil(spent * 100 + 1) / 100;
}

/**
 * Whether all of a budget is spent: it then has no run-out time to show.
 */
export function isSpent(
  line: Pick<IBudgetStanding, 'share' | 'remaining'>
): boolean {
  if (line.remaining !== null && line.remaining <= 0) {
    return true;
  }
  return line.share !== null && line.share >= 1;
}

/**
 * When a budget that is not spent yet runs out at the current rate, formatted
 * by `formatRunOut`; `null` when it never does or is spent already.
 */
export function runOutText(
  line: Pick<IBudgetStanding, 'share' | 'remaining' | 'runs_out_at'>,
  now: number = Date.now()
): string | null {
  if (!line.runs_out_at || isSpent(line)) {
    return null;
  }
  return formatRunOut(line.runs_out_at, now);
}

/**
 * A server message with its run-out time (`runs out at 18:19 UTC`, `将于
 * 18:19 UTC 用完`) written in the browser's local time instead, from the
 * event's `runs_out_at`, in every language the server writes; the message as it
 * is when it has no such time.
 */
export function localizeRunOut(
  message: string,
  runsOutAt: string | null | undefined,
  now: number = Date.now()
): string {
  if (!runsOutAt || Number.isNaN(new Date(runsOutAt).getTime())) {
    return message;
  }
  return message.replace(Private.UTC_TIME, formatRunOut(runsOutAt, now));
}

/**
 * The share of a budget spent, as a whole percentage, rounded down (a budget
 * shows 100% only once it is all spent); `?` when not known. The status bar and
 * the panel both show this. Past ten times the budget it reads `>999`: a
 * budget of a micro-unit spent a hundred thousand times over is not a figure
 * anyone reads.
 */
export function budgetPercent(share: number | null): string {
  if (share === null || !Number.isFinite(share)) {
    return '?';
  }
  if (share >= 10) {
    return '>999';
  }
  // to millionths first, so that 0.57 (56.99999… × 100) is 57, not 56
  return String(Math.floor(Math.round(share * 1_000_000) / 10_000));
}

/**
 * The largest number of decimals an amount may have (as the budget API).
 */
export const AMOUNT_DECIMALS = 6;

/**
 * What `parseAmount` accepts, as an HTML `pattern` (the browser then refuses
 * anything else before it is sent).
 */
export const AMOUNT_PATTERN = '\\d+(\\.\\d{0,6})?|\\.\\d{1,6}';

/**
 * A budget amount typed by a person: a plain decimal number (`5`, `7.5`,
 * `0.000001`) with at most six decimals. `0x10`, `1e3`, `Infinity`, `1,000`
 * and the empty string are refused with a message saying what is accepted; the
 * server checks the range.
 */
export function parseAmount(
  text: string
): { value: number; error: null } | { value: null; error: string } {
  const plain = text.trim();
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(plain)) {
    return {
      value: null,
      error: trans().__(
        'Enter the amount as a plain decimal number, e.g. 5 or 7.50.'
      )
    };
  }
  const decimals = plain.split('.')[1] ?? '';
  if (decimals.length > AMOUNT_DECIMALS) {
    return {
      value: null,
      error: trans().__(
        'Enter the amount with at most %1 decimals.',
        AMOUNT_DECIMALS
      )
    };
  }
  return { value: Number(plain), error: null };
}

/**
 * The currency symbol as a label, e.g. `€` or `EUR` (no trailing space); `''`
 * when it is not known yet.
 */
export function currencyLabel(symbol: string): string {
  return symbol.trim();
}

/**
 * The short text of the budget status item, e.g. `budget 42% of $5.00`, with
 * the server's currency symbol.
 */
export function budgetText(
  status: IBudgetStatus | null,
  now: number,
  symbol: string
): string {
  if (!status) {
    return '';
  }
  const budget = bindingBudget(status);
  const lock = budget?.locked ? '🔒 ' : '';
  const reason = countdownReason(status);
  // a budget's countdown carries the lock of the budget; any other stop does not
  const mark = reason === 'budget' || reason === 'hub-budget' ? lock : '';
  if (status.state === 'grace' && status.grace && reason) {
    const left = (new Date(status.grace.ends).getTime() - now) / 1000;
    // a budget's countdown ends at the budget: it is not spent yet
    const at = reason === 'budget' ? stopsAt(status, symbol) : null;
    return mark + countdownText(reason, left, at);
  }
  if (status.state === 'enforcing' && reason) {
    return mark + stoppingText(reason);
  }
  if (!budget) {
    return '';
  }
  const amount = formatBudget(budget.amount, symbol);
  if (status.state === 'acted') {
    const done = actedText(status.last_action?.reason);
    return done ?? lock + trans().__('budget of %1 spent', amount);
  }
  return (
    lock + trans().__('budget %1% of %2', budgetPercent(budget.share), amount)
  );
}

/**
 * The tooltip: each budget, the projected run-out (none once spent), the last
 * action; amounts with the server's currency symbol.
 */
export function budgetTitle(
  status: IBudgetStatus | null,
  symbol: string,
  now: number = Date.now()
): string {
  if (!status) {
    return '';
  }
  const lines: string[] = [];
  for (const budget of allBudgets(status)) {
    const who = budgetOwner(budget);
    const spent =
      budget.spent === null
        ? trans().__('spent: not known')
        : trans().__('%1 spent', formatMoney(budget.spent, symbol));
    lines.push(
      trans().__(
        '%1: %2 per %3, %4.',
        who,
        formatBudget(budget.amount, symbol),
        scopeName(budget.scope),
        spent
      )
    );
    const runOut = runOutText(budget, now);
    if (runOut) {
      lines.push(trans().__('At the current rate it runs out at %1.', runOut));
    }
  }
  if (status.stop?.text) {
    lines.push(status.stop.text);
  }
  if (status.grace?.shortened_text) {
    lines.push(status.grace.shortened_text);
  }
  if (lines.length) {
    lines.push(
      trans().__(
        'Warnings at %1 %; a %3 s countdown ends at the budget: notebooks saved, then %2.',
        status.thresholds_pct.join('/'),
        // what stops, not a bare "shutdown": "the kernels shut down"
        actionOutcome(status.action),
        status.grace_s
      )
    );
  }
  if (status.hub?.stop_at) {
    const at = formatLocalTime(status.hub.stop_at, now);
    lines.push(
      status.hub.reason
        ? trans().__(
            'The hub stops this server at %1 (%2).',
            at,
            status.hub.reason
          )
        : trans().__('The hub stops this server at %1.', at)
    );
  }
  if (status.hub?.error) {
    lines.push(trans().__('Hub: %1.', status.hub.error));
  }
  if (status.last_action?.message) {
    lines.push(
      trans().__(
        'Last action: %1.',
        localizeActionTime(status.last_action.message, status.last_action.at)
      )
    );
  }
  return lines.join('\n');
}

/**
 * A budget's scope as the UI says it: `session`, `day`, `month`.
 */
export function scopeName(scope: string): string {
  switch (scope) {
    case 'session':
      return trans().__('session');
    case 'day':
      return trans().__('day');
    case 'month':
      return trans().__('month');
    default:
      return scope;
  }
}

/**
 * A budget action as the UI says it: `shutdown`, `interrupt`, `stop-server`.
 */
export function actionName(action: string): string {
  switch (action) {
    case 'shutdown':
      return trans().__('shutdown');
    case 'interrupt':
      return trans().__('interrupt');
    case 'stop-server':
      return trans().__('stop-server');
    default:
      return action;
  }
}

/**
 * What a budget action does, as a sentence's end: `the kernels shut down`,
 * `the server stops`, `the machine stops`, `the kernels are interrupted`. The
 * tooltip and the countdown both say it this way.
 */
export function actionOutcome(action: string | null | undefined): string {
  switch (action) {
    case 'stop-instance':
      return trans().__('the machine stops');
    case 'terminate-instance':
      return trans().__('the machine is terminated');
    case 'stop-server':
      return trans().__('the server stops');
    case 'interrupt':
      return trans().__('the kernels are interrupted');
    default:
      return trans().__('the kernels shut down');
  }
}

/**
 * Module-private helpers.
 */
namespace Private {
  /**
   * A time of day in UTC as the server writes it in any language: `14:02 UTC`
   * (a translation may put the word first: `UTC 14:02`).
   */
  export const UTC_TIME =
    /\b(?:\d{1,2}:\d{2}(?::\d{2})? UTC|UTC \d{1,2}:\d{2}(?::\d{2})?)\b/;
}
