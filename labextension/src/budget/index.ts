import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { InputDialog, Notification } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Event, ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Widget } from '@lumino/widgets';

import { currencySymbol, formatCountdown } from '../format';
import { IGpuCostModel } from '../tokens';
import { STATUS_ITEM_ID } from '../view';
import {
  AMOUNT_PATTERN,
  bindingBudget,
  budgetDisplayState,
  budgetText,
  budgetTitle,
  currencyLabel,
  localizeRunOut,
  parseAmount
} from './format';
import { acknowledgeSave, stopNow } from './request';
import { BUDGET_EVENT_SCHEMA, IBudgetEvent, IBudgetStatus } from './tokens';

export * from './format';
export * from './request';
export * from './tokens';

/**
 * The DOM id of the budget status item.
 */
export const BUDGET_ITEM_ID = 'jp-gpucost-budget';

/**
 * The budget: settings, pushed warnings, the countdown, saving before the
 * action, and its state in the status bar.
 */
export const budgetPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:budget',
  description:
    'Budget warnings, the countdown before the budget action, and saving notebooks before it.',
  autoStart: true,
  requires: [IGpuCostModel],
  optional: [INotebookTracker, IStatusBar, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    model: IGpuCostModel,
    tracker: INotebookTracker | null,
    statusBar: IStatusBar | null,
    settingRegistry: ISettingRegistry | null
  ): void => {
    const services = app.serviceManager;
    const controller = new BudgetController(
      model,
      services.serverSettings,
      tracker,
      async () => {
        // kernels stopped by the server: let the notebooks show it now
        await Promise.all([
          services.sessions.refreshRunning(),
          services.kernels.refreshRunning()
        ]);
      }
    );
    if (statusBar) {
      statusBar.registerStatusItem(budgetPlugin.id, {
        item: controller.item,
        align: 'left',
        rank: 101,
        isActive: () => controller.item.node.dataset.budget !== 'none'
      });
    }
    if (settingRegistry) {
      void settingRegistry
        .load(budgetPlugin.id)
        .then(settings => controller.attachSettings(settings))
        .catch(reason => {
          console.error('jupyter-gpucost: budget settings not loaded', reason);
        });
    }
  }
};

/**
 * The front end's side of the budget.
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
    this.item.id = BUDGET_ITEM_ID;
    this.item.addClass('jp-gpucost-BudgetItem');
    this.item.node.dataset.budget = 'none';
    // the budget comes with the status the shared model receives
    model.stateChanged.connect(this._onModel, this);
    model.budgetEvent.connect(this._onBudgetEvent, this);
    this._onModel();
  }

  /**
   * This page's id: the server waits for it to save before acting.
   */
  get client(): string {
    return this._model.client;
  }

  /**
   * The status bar item.
   */
  readonly item = new Widget();

  /**
   * Stop asking the server and close the countdown.
   */
  dispose(): void {
    this._model.stateChanged.disconnect(this._onModel, this);
    this._model.budgetEvent.disconnect(this._onBudgetEvent, this);
    this.closeCountdown();
    this._budgetSettings?.changed.disconnect(this._onSettingsChanged, this);
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
   * The budget settings (*GPU Cost: budget*), kept in step with the server.
   *
   * The server's budget is the one truth: a change saved in the settings (the
   * Settings Editor) is sent to the server, and whatever the server's soft
   * budget becomes (set here, in the panel, with `%gpucost budget`, through
   * the API) is written back to the settings. Loading the page sends nothing.
   */
  attachSettings(settings: ISettingRegistry.ISettings): void {
    this._budgetSettings = settings;
    this._settingsSeen = Private.readSettings(settings);
    settings.changed.connect(this._onSettingsChanged, this);
    void this.syncSettings();
  }

  /**
   * Ask the server for the status (with the budget) now.
   */
  async refresh(): Promise<void> {
    await this._model.refresh();
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
    this.dismissStaleWarnings(asked);
    this.render();
    void this.syncSettings();
    if (status.state === 'grace' && status.grace) {
      this.showCountdown(status.grace.ends, status.grace.can_raise);
    } else if (this._countdown && status.state !== 'enforcing') {
      this.closeCountdown();
    }
    if (status.state === 'enforcing' && status.save_request) {
      void this.save(status.save_request.id);
    }
  }

  /**
   * A budget event from the server's event bus.
   */
  onEvent(emission: Event.Emission): void {
    if (emission.schema_id !== BUDGET_EVENT_SCHEMA) {
      return;
    }
    const event = emission as unknown as IBudgetEvent;
    switch (event.kind) {
      case 'threshold': {
        const id = Notification.warning(
          localizeRunOut(event.message, event.runs_out_at),
          { autoClose: false }
        );
        this._warnings.push({ id, event, after: this._asked });
        break;
      }
      case 'idle':
        Notification.warning(localizeRunOut(event.message, event.runs_out_at), {
          autoClose: false
        });
        break;
      case 'grace':
        if (event.grace_ends) {
          this.showCountdown(event.grace_ends, event.budget_kind === 'soft');
        }
        break;
      case 'cleared':
        this.closeCountdown();
        Notification.info(event.message, { autoClose: 5000 });
        break;
      case 'save-request':
        if (event.request_id) {
          void this.save(event.request_id);
        }
        break;
      case 'action':
        this.closeCountdown();
        Notification.error(event.message, { autoClose: false });
        void this._refreshRunning().catch(reason =>
          console.error('jupyter-gpucost: could not refresh kernels', reason)
        );
        break;
    }
  }

  private _onBudgetEvent(_: IGpuCostModel, event: IBudgetEvent): void {
    this.onEvent(event as unknown as Event.Emission);
  }

  /**
   * Push the soft budget from the settings to the server.
   */
  async applySetting(amount: number | null, scope: string): Promise<void> {
    const soft = this._status?.soft;
    if (
      this._status &&
      ((amount === null && !soft) ||
        (soft && soft.amount_usd === amount && soft.scope === scope))
    ) {
      return;
    }
    try {
      await this._setSoftBudget(amount, scope);
    } catch (reason) {
      Notification.error(`Budget not set: ${(reason as Error).message}`, {
        autoClose: 8000
      });
      // the settings show the server's budget again
      void this.syncSettings();
    }
  }

  /**
   * Write the server's soft budget to the settings when they differ from it.
   */
  async syncSettings(): Promise<void> {
    const settings = this._budgetSettings;
    const status = this._status;
    if (!settings || !status || this._applying > 0) {
      return;
    }
    const soft = status.soft;
    const target: Private.ISettingValues = soft
      ? { amount: soft.amount_usd, scope: soft.scope }
      : { amount: null, scope: this._settingsSeen.scope };
    if (Private.sameSettings(target, this._settingsSeen)) {
      return;
    }
    this._settingsSeen = target;
    const raw = {
      ...(settings.user as { [key: string]: unknown }),
      softBudgetUsd: target.amount,
      scope: target.scope
    };
    this._settingWrites += 1;
    try {
      await settings.save(JSON.stringify(raw, null, 2));
    } catch (reason) {
      console.warn(
        'jupyter-gpucost: the budget settings could not be kept in step with the server',
        reason
      );
    } finally {
      this._settingWrites -= 1;
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
    if (this._countdown) {
      this._closingMessage = `Budget spent: ${saved.length} notebook(s) saved; stopping.`;
      this.tickCountdown();
    }
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
   * The countdown notification, updated every second.
   */
  showCountdown(endsIso: string, canRaise: boolean): void {
    this._endsAt = new Date(endsIso).getTime();
    this._canRaise = canRaise;
    if (this._countdown) {
      this.tickCountdown();
      return;
    }
    this._countdownId = Notification.warning(this.countdownMessage(), {
      autoClose: false,
      actions: this.countdownActions()
    });
    this._countdown = window.setInterval(() => this.tickCountdown(), 1000);
  }

  /**
   * Close the countdown notification.
   */
  closeCountdown(): void {
    this._stopping = false;
    this._closingMessage = null;
    if (this._countdown) {
      window.clearInterval(this._countdown);
      this._countdown = null;
    }
    if (this._countdownId) {
      Notification.dismiss(this._countdownId);
      this._countdownId = null;
    }
  }

  /**
   * Dismiss the threshold warnings that no longer hold: their budget was
   * removed or changed (another amount or scope), or its share fell back under
   * the warning's threshold. Only a budget asked for after a warning was shown
   * (`asked`, the number of that request) can dismiss it.
   */
  dismissStaleWarnings(asked: number): void {
    const status = this._status;
    if (!status) {
      return;
    }
    this._warnings = this._warnings.filter(warning => {
      if (warning.after >= asked) {
        return true;
      }
      if (!Private.warningHolds(warning.event, status)) {
        Notification.dismiss(warning.id);
        return false;
      }
      // dismissed by the person: nothing left to follow
      return Notification.manager.notifications.some(n => n.id === warning.id);
    });
  }

  /**
   * Show the budget in the status bar item and on the cost item.
   */
  render(): void {
    const status = this._status;
    const state = budgetDisplayState(status);
    this.item.node.dataset.budget = state;
    this.item.node.textContent = budgetText(status, Date.now(), this.symbol);
    this.item.node.title = budgetTitle(status, this.symbol);
    this.item.node.classList.add('jp-StatusBar-TextItem');
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
    this.item.setHidden(state === 'none');
  }

  private countdownMessage(): string {
    if (this._closingMessage) {
      return this._closingMessage;
    }
    const left = (this._endsAt - Date.now()) / 1000;
    const budget = bindingBudget(this._status);
    const action = this._status?.action ?? 'shutdown';
    const what =
      action === 'stop-server'
        ? 'the server stops'
        : action === 'interrupt'
          ? 'the kernels are interrupted'
          : 'the kernels shut down';
    const whose = budget?.locked ? "The administrator's" : 'Your';
    if (this._stopping || this._status?.state === 'enforcing') {
      return `${whose} budget is spent. Saving notebooks, then ${what}.`;
    }
    return `${whose} budget is spent. Notebooks are saved and ${what} in ${formatCountdown(left)}.`;
  }

  private countdownActions(): Notification.IAction[] {
    if (
      this._closingMessage ||
      this._stopping ||
      this._status?.state === 'enforcing'
    ) {
      return [];
    }
    // each callback prevents the default, which would dismiss the countdown
    const actions: Notification.IAction[] = [
      {
        label: 'Save and stop now',
        caption: 'Save the open notebooks and take the budget action now',
        displayType: 'warn',
        callback: event => {
          event.preventDefault();
          this._stopping = true;
          this.tickCountdown();
          void stopNow(this._settings).catch(reason => {
            this._stopping = false;
            this.tickCountdown();
            console.error('jupyter-gpucost: stop now failed', reason);
          });
        }
      }
    ];
    if (this._canRaise) {
      actions.push({
        label: 'Raise budget',
        caption: 'Set a higher budget of your own',
        displayType: 'accent',
        callback: event => {
          event.preventDefault();
          void this.raise();
        }
      });
    }
    return actions;
  }

  /**
   * Update the countdown notification; show it again if it was dismissed (it
   * stays until the countdown ends or is cleared).
   */
  private tickCountdown(): void {
    if (!this._countdownId) {
      return;
    }
    const message = this.countdownMessage();
    const actions = this.countdownActions();
    const shown = Notification.update({
      id: this._countdownId,
      message,
      type: 'warning',
      autoClose: false,
      actions
    });
    if (!shown) {
      this._countdownId = Notification.warning(message, {
        autoClose: false,
        actions
      });
    }
    this.render();
  }

  private async raise(): Promise<void> {
    const soft = this._status?.soft;
    const current = soft?.amount_usd ?? 0;
    const symbol = currencyLabel(this.symbol);
    const result = await InputDialog.getText({
      title: 'Raise your budget',
      label: symbol
        ? `New budget (${symbol}, up to 6 decimals)`
        : 'New budget (up to 6 decimals)',
      text: String(Math.ceil(current * 2 * 100) / 100),
      pattern: AMOUNT_PATTERN,
      required: true
    });
    if (!result.button.accept || result.value === null) {
      return;
    }
    const amount = parseAmount(result.value);
    if (amount.error !== null) {
      Notification.error(`Budget not raised: ${amount.error}`, {
        autoClose: 8000
      });
      return;
    }
    try {
      await this._setSoftBudget(amount.value, soft?.scope ?? 'session');
    } catch (reason) {
      Notification.error(`Budget not raised: ${(reason as Error).message}`, {
        autoClose: 8000
      });
    }
  }

  /**
   * Set the soft budget on the server, show it and write it to the settings.
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
    this.dismissStaleWarnings(++this._asked);
    this.render();
    void this.syncSettings();
  }

  /**
   * The settings changed: send a change made there (not one written by
   * `syncSettings`) to the server.
   */
  private _onSettingsChanged(settings: ISettingRegistry.ISettings): void {
    if (this._settingWrites > 0) {
      return;
    }
    const values = Private.readSettings(settings);
    if (Private.sameSettings(values, this._settingsSeen)) {
      return;
    }
    this._settingsSeen = values;
    void this.applySetting(values.amount, values.scope);
  }

  private _model: IGpuCostModel;
  private _settings: ServerConnection.ISettings;
  private _tracker: INotebookTracker | null;
  private _refreshRunning: () => Promise<void>;
  private _status: IBudgetStatus | null = null;
  private _acked = new Set<string>();
  private _countdown: number | null = null;
  private _countdownId: string | null = null;
  private _endsAt = 0;
  private _canRaise = false;
  private _stopping = false;
  private _closingMessage: string | null = null;
  private _budgetSettings: ISettingRegistry.ISettings | null = null;
  private _settingsSeen: Private.ISettingValues = {
    amount: null,
    scope: 'session'
  };
  private _settingWrites = 0;
  private _applying = 0;
  private _asked = 0;
  private _warnings: { id: string; event: IBudgetEvent; after: number }[] = [];
}

/**
 * Module-private helpers.
 */
namespace Private {
  /**
   * The budget settings' values.
   */
  export interface ISettingValues {
    amount: number | null;
    scope: string;
  }

  /**
   * The budget settings' values now.
   */
  export function readSettings(
    settings: ISettingRegistry.ISettings
  ): ISettingValues {
    const amount = settings.get('softBudgetUsd').composite;
    const scope = settings.get('scope').composite;
    return {
      amount: typeof amount === 'number' ? amount : null,
      scope: typeof scope === 'string' ? scope : 'session'
    };
  }

  /**
   * Whether a threshold warning still holds for the budget now: the same
   * budget (kind, amount, scope) with at least the warning's share spent. A
   * share not known keeps the warning.
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
          : bindingBudget(status);
    if (!budget) {
      return false;
    }
    if (
      (event.amount_usd !== undefined &&
        budget.amount_usd !== event.amount_usd) ||
      (event.scope !== undefined && budget.scope !== event.scope)
    ) {
      return false;
    }
    if (event.threshold_pct !== undefined && budget.share !== null) {
      // to millionths, as the share shown, so that 0.95 is 95 %
      return (
        Math.round(budget.share * 1_000_000) >= event.threshold_pct * 10_000
      );
    }
    return true;
  }

  /**
   * Whether two sets of values are the same budget.
   */
  export function sameSettings(a: ISettingValues, b: ISettingValues): boolean {
    return a.amount === b.amount && (a.amount === null || a.scope === b.scope);
  }
}
