import { Notification } from '@jupyterlab/apputils';

import { formatBudget, formatCountdown } from '../format';
import { trans } from '../i18n';
import { actionOutcome, bindingBudget, isSpent } from './format';
import { countdownReason, offersRaise, reasonSentence } from './reason';
import { IBudgetStatus } from './tokens';

/**
 * What the countdown needs from the budget controller.
 */
export interface ICountdownHost {
  /** The last budget received. */
  readonly status: IBudgetStatus | null;
  /** The server's currency symbol. */
  readonly symbol: string;
  /** "Save and stop now": ask the server to end the grace period. */
  stopNow(): Promise<void>;
  /** "Raise budget": ask for a higher soft budget. */
  raise(): Promise<void>;
  /** Show the budget again (the status items follow the countdown). */
  render(): void;
}

/**
 * The countdown notification before the budget action, updated every second,
 * with "Save and stop now" and (for a budget of one's own) "Raise budget".
 * It stays until the countdown ends or is cleared: dismissed, it comes back.
 */
export class BudgetCountdown {
  constructor(host: ICountdownHost) {
    this._host = host;
  }

  /**
   * Whether the countdown is shown.
   */
  get active(): boolean {
    return this._timer !== null;
  }

  /**
   * Show the countdown to `endsIso` (or move it there).
   */
  show(
    endsIso: string,
    canRaise: boolean,
    pushed: { reason?: string; action?: string } = {}
  ): void {
    this._endsAt = new Date(endsIso).getTime();
    this._canRaise = canRaise;
    // the pushed event's why and what, until a status with the countdown arrives
    this._pushed = pushed;
    if (this._timer !== null) {
      this.tick();
      return;
    }
    this._id = Notification.warning(this.message(), {
      autoClose: false,
      actions: this.actions()
    });
    this._timer = window.setInterval(() => this.tick(), 1000);
  }

  /**
   * Replace the countdown by a closing message (the notebooks are saved).
   */
  closing(message: string): void {
    if (this._timer !== null) {
      this._closingMessage = message;
      this.tick();
    }
  }

  /**
   * Close the countdown notification.
   */
  close(): void {
    this._stopping = false;
    this._closingMessage = null;
    if (this._timer !== null) {
      window.clearInterval(this._timer);
      this._timer = null;
    }
    if (this._id) {
      Notification.dismiss(this._id);
      this._id = null;
    }
  }

  /**
   * Update the notification; show it again if it was dismissed.
   */
  tick(): void {
    if (!this._id) {
      return;
    }
    const message = this.message();
    const actions = this.actions();
    const shown = Notification.update({
      id: this._id,
      message,
      type: 'warning',
      autoClose: false,
      actions
    });
    if (!shown) {
      this._id = Notification.warning(message, { autoClose: false, actions });
    }
    this._host.render();
  }

  private message(): string {
    if (this._closingMessage) {
      return this._closingMessage;
    }
    const status = this._host.status;
    const left = (this._endsAt - Date.now()) / 1000;
    const budget = bindingBudget(status);
    // the user's own stop names its action; a budget's is the configured one
    const grace = status?.state === 'grace' ? status.grace : null;
    const action =
      grace?.action ?? this._pushed.action ?? status?.action ?? 'shutdown';
    const what = actionOutcome(action);
    // the countdown's reason: a budget's, the user's own stop, an idle reclaim…
    const reason = countdownReason(status, this._pushed.reason) ?? 'budget';
    const spent =
      budget?.kind === 'hub'
        ? trans().__("Your hub admin's budget is spent.")
        : status?.stop && budget && !isSpent(budget)
          ? // the countdown ends at the budget: it is not spent yet
            budget.locked
            ? trans().__(
                "The administrator's budget of %1 runs out at the current rate.",
                formatBudget(status.stop.amount, this._host.symbol)
              )
            : trans().__(
                'Your budget of %1 runs out at the current rate.',
                formatBudget(status.stop.amount, this._host.symbol)
              )
          : budget?.locked
            ? trans().__("The administrator's budget is spent.")
            : trans().__('Your budget is spent.');
    const head = reasonSentence(reason) ?? spent;
    if (this._stopping || status?.state === 'enforcing') {
      return `${head} ${trans().__('Saving notebooks, then %1.', what)}`;
    }
    const why = grace?.shortened_text ? ` ${grace.shortened_text}` : '';
    return `${head} ${trans().__('Notebooks are saved and %1 in %2.', what, formatCountdown(left))}${why}`;
  }

  private actions(): Notification.IAction[] {
    if (
      this._closingMessage ||
      this._stopping ||
      this._host.status?.state === 'enforcing'
    ) {
      return [];
    }
    // each callback prevents the default, which would dismiss the countdown
    const actions: Notification.IAction[] = [
      {
        label: trans().__('Save and stop now'),
        caption: trans().__(
          'Save the open notebooks and take the budget action now'
        ),
        displayType: 'warn',
        callback: event => {
          event.preventDefault();
          this._stopping = true;
          this.tick();
          void this._host.stopNow().catch(reason => {
            this._stopping = false;
            this.tick();
            console.error('jupyter-gpucost: stop now failed', reason);
          });
        }
      }
    ];
    // only a budget's countdown is ended by a higher budget
    if (offersRaise(this._host.status, this._canRaise, this._pushed.reason)) {
      actions.push({
        label: trans().__('Raise budget'),
        caption: trans().__('Set a higher budget of your own'),
        displayType: 'accent',
        callback: event => {
          event.preventDefault();
          void this._host.raise();
        }
      });
    }
    return actions;
  }

  private _host: ICountdownHost;
  private _timer: number | null = null;
  private _id: string | null = null;
  private _endsAt = 0;
  private _canRaise = false;
  private _stopping = false;
  private _closingMessage: string | null = null;
  private _pushed: { reason?: string; action?: string } = {};
}
