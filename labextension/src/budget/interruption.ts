import { Notification } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { formatCountdown } from '../format';
import { trans } from '../i18n';

/**
 * The DOM id of the spot interruption's status bar item.
 */
export const INTERRUPTION_ITEM_ID = 'jp-gpucost-interruption';

const PROVIDERS: Record<string, string> = {
  aws: 'AWS',
  gcp: 'Google Cloud',
  azure: 'Azure',
  kubernetes: 'Kubernetes'
};

/**
 * How a cloud is named to the user.
 */
export function providerName(provider: string): string {
  return PROVIDERS[provider] ?? provider;
}

/**
 * "AWS takes this spot machine back in 1:52: saving notebooks and checkpoints."
 */
export function interruptionMessage(provider: string, seconds: number): string {
  return trans().__(
    '%1 takes this spot machine back in %2: saving notebooks and checkpoints.',
    providerName(provider),
    formatCountdown(seconds)
  );
}

/**
 * The status bar's words: "spot: back in 1:52".
 */
export function interruptionItemText(seconds: number): string {
  return trans().__('spot: taken back in %1', formatCountdown(seconds));
}

/**
 * The countdown to the moment the cloud takes the machine back: a status bar
 * item and a notification, both updated every second, until the server says
 * what was done.
 */
export class InterruptionCountdown {
  /**
   * The status bar item (hidden unless a notice is being answered).
   */
  readonly item: Widget = (() => {
    const item = new Widget();
    item.id = INTERRUPTION_ITEM_ID;
    item.addClass('jp-StatusBar-TextItem');
    item.addClass('jp-gpucost-InterruptionItem');
    item.hide();
    return item;
  })();

  /**
   * Whether a countdown is shown.
   */
  get active(): boolean {
    return this._timer !== null;
  }

  /**
   * Whether the status bar item is to be shown (a notice answered or done).
   */
  get visible(): boolean {
    return this._visible;
  }

  /**
   * Count down to `deadlineIso` (or move the countdown there).
   */
  show(provider: string, deadlineIso: string): void {
    this._provider = provider;
    this._endsAt = new Date(deadlineIso).getTime();
    if (this._timer !== null) {
      this.tick();
      return;
    }
    this._id = Notification.error(this._message(), { autoClose: false });
    this._visible = true;
    this.item.show();
    this._timer = window.setInterval(() => this.tick(), 1000);
    this.tick();
  }

  /**
   * The server's account of the steps, in a notification of its own: the
   * countdown goes on, since the machine still goes at the deadline.
   */
  done(message: string): void {
    this._visible = true;
    this.item.show();
    this._doneMessage = message;
    if (this._doneId) {
      Notification.update({
        id: this._doneId,
        message,
        type: 'warning',
        autoClose: false
      });
    } else {
      this._doneId = Notification.warning(message, { autoClose: false });
    }
    this.tick();
  }

  /**
   * Update the item and the notification; show it again if it was dismissed.
   */
  tick(): void {
    const left = (this._endsAt - Date.now()) / 1000;
    if (this._timer !== null && left <= 0) {
      this._stopTimer();
    }
    this.item.node.textContent =
      this._timer === null
        ? trans().__('spot: interrupted')
        : interruptionItemText(left);
    this.item.node.title = this._doneMessage || this._message();
    if (!this._id || this._timer === null) {
      return;
    }
    const shown = Notification.update({
      id: this._id,
      message: this._message(),
      type: 'error',
      autoClose: false
    });
    if (!shown) {
      this._id = Notification.error(this._message(), { autoClose: false });
    }
  }

  /**
   * Stop counting and hide everything.
   */
  close(): void {
    this._stopTimer();
    this._visible = false;
    this.item.hide();
    for (const id of [this._id, this._doneId]) {
      if (id) {
        Notification.dismiss(id);
      }
    }
    this._id = null;
    this._doneId = null;
  }

  private _message(): string {
    return interruptionMessage(
      this._provider,
      (this._endsAt - Date.now()) / 1000
    );
  }

  private _stopTimer(): void {
    if (this._timer !== null) {
      window.clearInterval(this._timer);
      this._timer = null;
    }
  }

  private _timer: number | null = null;
  private _id: string | null = null;
  private _endsAt = 0;
  private _provider = '';
  private _visible = false;
  private _doneId: string | null = null;
  private _doneMessage = '';
}
