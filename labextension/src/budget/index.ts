import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { InputDialog, Notification } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Event, ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { UUID } from '@lumino/coreutils';
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { STATUS_ITEM_ID } from '../view';
import {
  bindingBudget,
  budgetDisplayState,
  budgetText,
  budgetTitle,
  formatCountdown
} from './format';
import { acknowledgeSave, getBudget, setSoftBudget, stopNow } from './request';
import { BUDGET_EVENT_SCHEMA, IBudgetEvent, IBudgetStatus } from './tokens';

export * from './format';
export * from './request';
export * from './tokens';

/**
 * The DOM id of the budget status item.
 */
export const BUDGET_ITEM_ID = 'jp-gpucost-budget';

/**
 * Seconds between two budget requests (the events arrive at once; the poll
 * catches up after a reload or a lost event socket).
 */
export const BUDGET_POLL_S = 3;

/**
 * The budget: settings, pushed warnings, the countdown, saving before the
 * action, and its state in the status bar.
 */
export const budgetPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:budget',
  description:
    'Budget warnings, the countdown before the budget action, and saving notebooks before it.',
  autoStart: true,
  optional: [INotebookTracker, IStatusBar, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker | null,
    statusBar: IStatusBar | null,
    settingRegistry: ISettingRegistry | null
  ): void => {
    const services = app.serviceManager;
    const controller = new BudgetController(
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
    app.serviceManager.events.stream.connect((_, event) => {
      controller.onEvent(event);
    });
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
        .then(settings => {
          controller.settings = settings;
          const apply = (): void => {
            const amount = settings.get('softBudgetUsd').composite;
            const scope = settings.get('scope').composite;
            void controller.applySetting(
              typeof amount === 'number' ? amount : null,
              typeof scope === 'string' ? scope : 'session'
            );
          };
          settings.changed.connect(apply);
          if (settings.get('softBudgetUsd').user !== undefined) {
            apply();
          }
        })
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
    serverSettings: ServerConnection.ISettings,
    tracker: INotebookTracker | null,
    refreshRunning: () => Promise<void> = async () => undefined
  ) {
    this._settings = serverSettings;
    this._tracker = tracker;
    this._refreshRunning = refreshRunning;
    this.item.id = BUDGET_ITEM_ID;
    this.item.addClass('jp-gpucost-BudgetItem');
    this.item.node.dataset.budget = 'none';
    this._poll = new Poll({
      auto: true,
      factory: () => this.refresh(),
      frequency: { interval: BUDGET_POLL_S * 1000, backoff: true, max: 60_000 },
      name: 'jupyter-gpucost:budget',
      standby: 'never'
    });
  }

  /**
   * This page's id: the server waits for it to save before acting.
   */
  readonly client = UUID.uuid4();

  /**
   * The status bar item.
   */
  readonly item = new Widget();

  /**
   * The budget settings: a budget raised from the countdown is written back, so
   * that the next page load does not set the old one again.
   */
  settings: ISettingRegistry.ISettings | null = null;

  /**
   * The last budget received.
   */
  get status(): IBudgetStatus | null {
    return this._status;
  }

  /**
   * Ask the server for the budget and show it.
   */
  async refresh(): Promise<void> {
    const status = await getBudget(this._settings, this.client);
    this._status = status;
    this.render();
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
      case 'threshold':
      case 'idle':
        Notification.warning(event.message, { autoClose: false });
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
    void this._poll.refresh();
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
      this._status = await setSoftBudget(this._settings, amount, scope);
      this.render();
    } catch (reason) {
      Notification.error(`Budget not set: ${(reason as Error).message}`, {
        autoClose: 8000
      });
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
    if (this._countdownId) {
      Notification.update({
        id: this._countdownId,
        message: `Budget spent: ${saved.length} notebook(s) saved; stopping.`,
        type: 'warning',
        autoClose: false,
        actions: []
      });
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
   * Show the budget in the status bar item and on the cost item.
   */
  render(): void {
    const status = this._status;
    const state = budgetDisplayState(status);
    this.item.node.dataset.budget = state;
    this.item.node.textContent = budgetText(status, Date.now());
    this.item.node.title = budgetTitle(status);
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
    return `${whose} budget is spent. Notebooks are saved and ${what} in ${formatCountdown(left)}.`;
  }

  private countdownActions(): Notification.IAction[] {
    const actions: Notification.IAction[] = [
      {
        label: 'Save and stop now',
        caption: 'Save the open notebooks and take the budget action now',
        displayType: 'warn',
        callback: () => {
          void stopNow(this._settings).catch(reason =>
            console.error('jupyter-gpucost: stop now failed', reason)
          );
        }
      }
    ];
    if (this._canRaise) {
      actions.push({
        label: 'Raise budget',
        caption: 'Set a higher budget of your own',
        displayType: 'accent',
        callback: () => void this.raise()
      });
    }
    return actions;
  }

  private tickCountdown(): void {
    if (!this._countdownId) {
      return;
    }
    Notification.update({
      id: this._countdownId,
      message: this.countdownMessage(),
      type: 'warning',
      autoClose: false,
      actions: this.countdownActions()
    });
    this.render();
  }

  private async raise(): Promise<void> {
    const soft = this._status?.soft;
    const current = soft?.amount_usd ?? 0;
    const result = await InputDialog.getNumber({
      title: 'Raise your budget',
      label: 'New budget (dollars)',
      value: Math.ceil(current * 2 * 100) / 100
    });
    if (!result.button.accept || result.value === null) {
      return;
    }
    try {
      this._status = await setSoftBudget(
        this._settings,
        result.value,
        soft?.scope ?? 'session'
      );
      this.render();
      if (this.settings) {
        await this.settings.set('softBudgetUsd', result.value);
      }
    } catch (reason) {
      Notification.error(`Budget not raised: ${(reason as Error).message}`, {
        autoClose: 8000
      });
    }
  }

  private _settings: ServerConnection.ISettings;
  private _tracker: INotebookTracker | null;
  private _refreshRunning: () => Promise<void>;
  private _poll: Poll;
  private _status: IBudgetStatus | null = null;
  private _acked = new Set<string>();
  private _countdown: number | null = null;
  private _countdownId: string | null = null;
  private _endsAt = 0;
  private _canRaise = false;
}
