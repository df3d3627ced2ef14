import { formatBudget, formatCountdown } from '../format';
import { trans } from '../i18n';
import { IBudgetStatus } from './tokens';

/**
 * Why the server counts down (or acts now), as the UI words it:
 * - `budget`: one of the server's own budgets (or a spent hub budget);
 * - `hub-budget`: the hub stops the server for its budget;
 * - `hub-idle`: the hub reclaims idle GPUs;
 * - `idle`: this server's own idle-GPU policy;
 * - `user`: the user's own "Stop server" / "Stop machine";
 * - `done`: the stop the user asked for when the running cells end.
 *
 * A spot notice has its own countdown (`InterruptionCountdown`).
 */
export type CountdownReason =
  'budget' | 'hub-budget' | 'hub-idle' | 'idle' | 'user' | 'done';

/**
 * What `countdownReason` reads of a budget status (the panel's is narrower).
 */
export interface IReasonSource {
  state: string;
  grace?: { reason?: string } | null;
  reason?: string | null;
  hub?: { stop_kind?: string | null } | null;
}

/**
 * The reason of the countdown (or of the stop under way) in `status`, or of a
 * pushed event (`pushed`) before a status with the countdown arrives; `null`
 * when nothing counts down. Servers that do not say count down for a budget.
 */
export function countdownReason(
  status: IReasonSource | null,
  pushed?: string
): CountdownReason | null {
  const counting =
    status?.state === 'grace' || status?.state === 'enforcing' || !!pushed;
  if (!counting) {
    return null;
  }
  const raw =
    (status?.state === 'grace' ? status.grace?.reason : null) ??
    status?.reason ??
    pushed ??
    'budget';
  switch (raw) {
    case 'user':
    case 'done':
    case 'idle':
      return raw;
    case 'hub':
      return status?.hub?.stop_kind === 'idle' ? 'hub-idle' : 'hub-budget';
    default:
      return 'budget';
  }
}

/**
 * Whether the countdown offers "Raise budget": only a budget's countdown, and
 * only when the budget that binds is the user's own (`can_raise`).
 */
export function offersRaise(
  status: IReasonSource | null,
  canRaise: boolean,
  pushed?: string
): boolean {
  return canRaise && countdownReason(status, pushed) === 'budget';
}

/**
 * The status bar's (and Notebook 7's chip's) words for a countdown, by its
 * reason: `stops at $5.00 in 0:28` (a budget that runs out as it ends),
 * `budget spent · stop in 0:28`, `manual stop in 0:58`, `run done · stop in
 * 0:58`, `idle GPUs · stop in 1:00`, `hub reclaims idle GPUs in 1:00`, `hub
 * budget spent · stop in 1:00`. `left_s`: the seconds left; `budgetAt`: the
 * amount the budget stops at when it is not spent yet.
 */
export function countdownText(
  reason: CountdownReason,
  left_s: number,
  budgetAt: string | null
): string {
  const left = formatCountdown(left_s);
  switch (reason) {
    case 'user':
      return trans().__('manual stop in %1', left);
    case 'done':
      return trans().__('run done · stop in %1', left);
    case 'idle':
      return trans().__('idle GPUs · stop in %1', left);
    case 'hub-idle':
      return trans().__('hub reclaims idle GPUs in %1', left);
    case 'hub-budget':
      return trans().__('hub budget spent · stop in %1', left);
    default:
      return budgetAt
        ? trans().__('stops at %1 in %2', budgetAt, left)
        : trans().__('budget spent · stop in %1', left);
  }
}

/**
 * The words while the server saves and acts (`state` `enforcing`), by reason.
 */
export function stoppingText(reason: CountdownReason): string {
  switch (reason) {
    case 'user':
      return trans().__('manual stop · saving and stopping');
    case 'done':
      return trans().__('run done · saving and stopping');
    case 'idle':
    case 'hub-idle':
      return trans().__('idle GPUs · saving and stopping');
    case 'hub-budget':
      return trans().__('hub budget spent · saving and stopping');
    default:
      return trans().__('budget spent · saving and stopping');
  }
}

/**
 * The status item's words once a stop that is no budget's is done (`acted`,
 * by the last action's reason); `null` for a budget's.
 */
export function actedText(reason: string | null | undefined): string | null {
  switch (reason) {
    case 'user':
      return trans().__('stopped as you asked');
    case 'done':
      return trans().__('stopped when the run was done');
    case 'idle':
      return trans().__('stopped: idle GPUs');
    case 'hub':
      return trans().__('stopped by the hub');
    default:
      return null;
  }
}

/**
 * The countdown's first sentence in the notification, by reason (a budget's
 * is written by the caller, who knows the budget).
 */
export function reasonSentence(reason: CountdownReason): string | null {
  switch (reason) {
    case 'user':
      return trans().__('Stopping as you asked.');
    case 'done':
      return trans().__('Your run is done, as you asked to stop then.');
    case 'idle':
      return trans().__(
        'The GPUs have been idle while costing money: the server stops them.'
      );
    case 'hub-idle':
      return trans().__(
        "Your server's GPUs have been idle with no kernel busy: the hub stops the server to free them. Run something to keep it."
      );
    case 'hub-budget':
      return trans().__("Your hub admin's budget is spent.");
    default:
      return null;
  }
}

/**
 * The panel's line during a countdown, by reason, with its end (`at`, a local
 * time): "Manual stop: notebooks saved, then the stop at 10:32:05 AM EST."
 */
export function countdownSentence(reason: CountdownReason, at: string): string {
  switch (reason) {
    case 'user':
      return trans().__(
        'Manual stop: notebooks saved, then the stop at %1.',
        at
      );
    case 'done':
      return trans().__('Run done: notebooks saved, then the stop at %1.', at);
    case 'idle':
      return trans().__('Idle GPUs: notebooks saved, then the stop at %1.', at);
    case 'hub-idle':
      return trans().__(
        'The hub reclaims the idle GPUs: notebooks saved, then the stop at %1.',
        at
      );
    case 'hub-budget':
      return trans().__(
        "The hub admin's budget is spent: notebooks saved, then the stop at %1.",
        at
      );
    default:
      return trans().__(
        'Budget countdown: notebooks saved, then the action at %1.',
        at
      );
  }
}

/**
 * What the countdown says once the notebooks are saved, by reason.
 */
export function savedText(
  reason: CountdownReason | null,
  saved: number
): string {
  switch (reason) {
    case 'user':
      return trans()._n(
        'Stopping as you asked: %1 notebook saved.',
        'Stopping as you asked: %1 notebooks saved.',
        saved
      );
    case 'done':
      return trans()._n(
        'Run done: %1 notebook saved; stopping.',
        'Run done: %1 notebooks saved; stopping.',
        saved
      );
    case 'idle':
    case 'hub-idle':
      return trans()._n(
        'Idle GPUs: %1 notebook saved; stopping.',
        'Idle GPUs: %1 notebooks saved; stopping.',
        saved
      );
    default:
      return trans()._n(
        'Budget spent: %1 notebook saved; stopping.',
        'Budget spent: %1 notebooks saved; stopping.',
        saved
      );
  }
}

/**
 * The amount a budget's countdown stops at, when the budget is not spent yet
 * (the countdown ends at the budget): `$5.00`; `null` otherwise.
 */
export function stopsAt(status: IBudgetStatus, symbol: string): string | null {
  return status.stop ? formatBudget(status.stop.amount, symbol) : null;
}
