import { InputDialog, Notification } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Event, ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { currencySymbol, formatBudget, formatMoney } from '../format';
import { trans } from '../i18n';
import { IGpuCostModel } from '../tokens';
import { BudgetCountdown } from './countdown';
import { InterruptionCountdown } from './interruption';
import {
  AMOUNT_PATTERN,
  currencyLabel,
  localizeActionTime,
  localizeRunOut,
  parseAmount,
  proposeRaise
} from './format';
import { countdownReason, savedText } from './reason';
import { acknowledgeSave, stopNow } from './request';
import { BudgetSettingsSync } from './settings-sync';
import { BudgetStatusItem } from './status-item';
import { BUDGET_EVENT_SCHEMA, IBudgetEvent, IBudgetStatus } from './tokens';
import { ThresholdWarnings } from './warnings';
import { withMoneyKeys } from '../money-keys';

/**
 * The front end's side of the budget: it follows the budget the shared cost
 * model receives with the status, and the budget events the server pushes;
 * shows warnings and the countdown; saves the notebooks before the action;
 * keeps the settings in step with the server.
 */
export class BudgetController {
  constructor(
    model: IGpuCostModel,
    serverSettings: ServerConnection.ISettings,
    tracker: INotebookTracker | null,
    refreshRunning: () => Promise<void> = async () => undefined
  ) {
    this._model = model;
    this._settings = serverSettings;
    this._tracker = tracker;
    this._refreshRunning = refreshRunning;
    // what the countdown and the settings sync read and call back
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const controller = this;
    const host = {
      get status(): IBudgetStatus | null {
        return controller._status;
      },
      get applying(): boolean {
        return controller._applying > 0;
      },
      get symbol(): string {
        return controller.symbol;
      },
      stopNow: () => stopNow(this._settings),
      raise: () => this.raise(),
      render: () => this.render(),
      setSoftBudget: (amount: number | null, scope: string) =>
        this._setSoftBudget(amount, scope)
    };
    this._countdown = new BudgetCountdown(host);
    this._sync = new BudgetSettingsSync(host);
    // the budget comes with the status the shared model receives
    model.stateChanged.connect(this._onModel, this);
    model.budgetEvent.connect(this._onBudgetEvent, this);
    this._onModel();
  }

  /**
   * The status bar item.
   */
  readonly item = new BudgetStatusItem();

  /**
   * The countdown to a spot machine's interruption (its own status bar item).
   */
  readonly interruption = new InterruptionCountdown();

  /**
   * This page's id: the server waits for it to save before acting.
   */
  get client(): string {
    return this._model.client;
  }

  /**
   * The last budget received.
   */
  get status(): IBudgetStatus | null {
    return this._status;
  }

  /**
   * The server's currency symbol (amounts are in the server's currency), `''`
   * until the server has told it.
   */
  get symbol(): string {
    const status = this._model.status;
    return status ? currencySymbol(status) : '';
  }

  /**
   * Stop following the model and close the countdown.
   */
  dispose(): void {
    this._model.stateChanged.disconnect(this._onModel, this);
    this._model.budgetEvent.disconnect(this._onBudgetEvent, this);
    this._countdown.close();
    this.interruption.close();
    this._sync.dispose();
  }

  /**
   * Keep these budget settings in step with the server (see
   * `BudgetSettingsSync`).
   */
  attachSettings(settings: ISettingRegistry.ISettings): void {
    this._sync.attach(settings);
  }

  /**
   * Push the soft budget from the settings to the server.
   */
  applySetting(amount: number | null, scope: string): Promise<void> {
    return this._sync.apply(amount, scope);
  }

  /**
   * Ask the server for the status (with the budget) now.
   */
  async refresh(): Promise<void> {
    await this._model.refresh();
  }

  /**
   * A budget event from the server's event bus.
   */
  onEvent(emission: Event.Emission): void {
    if (emission.schema_id !== BUDGET_EVENT_SCHEMA) {
      return;
    }
    const event = withMoneyKeys(emission as unknown as IBudgetEvent);
    switch (event.kind) {
      case 'threshold':
        this._warnings.show(event, this._asked);
        break;
      case 'idle':
        Notification.warning(localizeRunOut(event.message, event.runs_out_at), {
          autoClose: false
        });
        break;
      case 'grace':
        if (event.grace_ends) {
          this._countdown.show(event.grace_ends, event.budget_kind === 'soft', {
            reason: event.reason,
            action: event.action
          });
        }
        break;
      case 'interruption':
        if (event.deadline && event.provider) {
          this.interruption.show(event.provider, event.deadline);
        }
        break;
      case 'interruption-warning':
        Notification.warning(event.message, { autoClose: false });
        break;
      case 'interruption-done':
        this.interruption.done(event.message);
        break;
      case 'cleared':
        this._countdown.close();
        Notification.info(event.message, { autoClose: 5000 });
        break;
      case 'save-request':
        if (event.request_id) {
          void this.save(event.request_id);
        }
        break;
      case 'action':
        this._countdown.close();
        Notification.error(localizeActionTime(event.message, event.at), {
          autoClose: false
        });
        void this._refreshRunning().catch(reason =>
          console.error('jupyter-gpucost: could not refresh kernels', reason)
        );
        break;
    }
  }

  /**
   * Save every open notebook with unsaved changes, then tell the server.
   */
  async save(requestId: string): Promise<void> {
    if (this._acked.has(requestId)) {
      return;
    }
    this._acked.add(requestId);
    const panels: NotebookPanel[] = [];
    this._tracker?.forEach(panel => panels.push(panel));
    const saved: string[] = [];
    const failed: string[] = [];
    for (const panel of panels) {
      const context = panel.context;
      if (!context.model.dirty) {
        continue;
      }
      try {
        await context.save();
        saved.push(context.path);
      } catch (reason) {
        console.error('jupyter-gpucost: could not save', context.path, reason);
        failed.push(context.path);
      }
    }
    this._countdown.closing(
      savedText(countdownReason(this._status), saved.length)
    );
    try {
      await acknowledgeSave(this._settings, {
        request_id: requestId,
        client: this.client,
        saved,
        failed
      });
    } catch (reason) {
      console.error('jupyter-gpucost: save not acknowledged', reason);
    }
  }

  /**
   * Show the budget in the status bar item and on the cost item.
   */
  render(): void {
    this.item.showBudget(this._status, this.symbol);
  }

  /**
   * The shared model has a new status: show its budget.
   */
  private _onModel(): void {
    const status = this._model.budget;
    if (status === null || status === this._status) {
      return;
    }
    const asked = ++this._asked;
    this._status = status;
    this._warnings.dismissStale(status, asked);
    this.render();
    void this._sync.sync();
    if (status.state === 'grace' && status.grace) {
      this._countdown.show(status.grace.ends, status.grace.can_raise);
    } else if (this._countdown.active && status.state !== 'enforcing') {
      this._countdown.close();
    }
    if (status.state === 'enforcing' && status.save_request) {
      void this.save(status.save_request.id);
    }
    this._onInterruption(status);
  }

  /**
   * A page that opens (or polls) during a spot interruption counts down and
   * saves as one that heard the event; the next session's page says what the
   * last interruption cost, once.
   */
  private _onInterruption(status: IBudgetStatus): void {
    const interruption = status.interruption;
    const current = interruption?.current;
    if (
      current?.deadline &&
      !this.interruption.active &&
      !this.interruption.visible &&
      new Date(current.deadline).getTime() > Date.now()
    ) {
      this.interruption.show(current.provider, current.deadline);
    }
    if (current && status.save_request) {
      void this.save(status.save_request.id);
    }
    const last = interruption?.last;
    if (last?.line && !this._lastShown) {
      this._lastShown = true;
      Notification.info(localizeActionTime(last.line, last.deadline), {
        autoClose: false
      });
    }
  }

  private _onBudgetEvent(_: IGpuCostModel, event: IBudgetEvent): void {
    this.onEvent(event as unknown as Event.Emission);
  }

  /**
   * "Raise budget": ask for a higher budget of one's own.
   */
  private async raise(): Promise<void> {
    const soft = this._status?.soft;
    const current = soft?.amount ?? 0;
    const spent = soft?.spent ?? 0;
    const symbol = currencyLabel(this.symbol);
    const spentText = formatMoney(spent, this.symbol);
    const result = await InputDialog.getText({
      title: trans().__('Raise your budget'),
      label: symbol
        ? trans().__(
            '%1 spent so far. New budget (%2, up to 6 decimals)',
            spentText,
            symbol
          )
        : trans().__(
            '%1 spent so far. New budget (up to 6 decimals)',
            spentText
          ),
      // above what is spent: the proposal ends the countdown
      text: String(proposeRaise(current, spent)),
      pattern: AMOUNT_PATTERN,
      required: true
    });
    if (!result.button.accept || result.value === null) {
      return;
    }
    const amount = parseAmount(result.value);
    if (amount.error !== null) {
      Notification.error(trans().__('Budget not raised: %1', amount.error), {
        autoClose: 8000
      });
      return;
    }
    try {
      await this._setSoftBudget(amount.value, soft?.scope ?? 'session');
      const after = this._status?.soft;
      if (after && after.spent !== null && after.spent >= after.amount) {
        // set as asked, but it does not stop the countdown: say so
        Notification.warning(
          trans().__(
            'Your new budget of %1 is already spent (%2 spent): the countdown goes on. Raise it above %2 to keep working.',
            formatBudget(after.amount, this.symbol),
            formatMoney(after.spent, this.symbol)
          ),
          { autoClose: false }
        );
      }
    } catch (reason) {
      Notification.error(
        trans().__('Budget not raised: %1', (reason as Error).message),
        {
          autoClose: 8000
        }
      );
    }
  }

  /**
   * Set the soft budget through the shared model (the one writer of it),
   * show it and write it to the settings.
   */
  private async _setSoftBudget(
    amount: number | null,
    scope: string
  ): Promise<void> {
    this._applying += 1;
    try {
      this._status = await this._model.setSoftBudget(amount, scope);
    } finally {
      this._applying -= 1;
    }
    this._warnings.dismissStale(this._status, ++this._asked);
    this.render();
    void this._sync.sync();
  }

  private _model: IGpuCostModel;
  private _settings: ServerConnection.ISettings;
  private _tracker: INotebookTracker | null;
  private _refreshRunning: () => Promise<void>;
  private _countdown: BudgetCountdown;
  private _lastShown = false;
  private _sync: BudgetSettingsSync;
  private _warnings = new ThresholdWarnings();
  private _status: IBudgetStatus | null = null;
  private _acked = new Set<string>();
  private _applying = 0;
  private _asked = 0;
}
