import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { confirmStop } from '../budget/confirm';
import { budgetRequest } from '../budget/request';
import { IBudgetStatus } from '../budget/tokens';
import { currencySymbol } from '../format';
import { trans } from '../i18n';
import { IGpuCostModel } from '../tokens';
import { machineOf, stillCosts, stillCostsText } from './format';

export * from './format';

/**
 * The DOM id of the machine's status bar item.
 */
export const MACHINE_ITEM_ID = 'jp-gpucost-machine';

/**
 * Ask the server to stop (`stop-instance` or `stop-server`) with a budget
 * stop's countdown, save and export.
 */
export function requestStop(
  settings: ServerConnection.ISettings,
  action: 'stop-instance' | 'stop-server'
): Promise<IBudgetStatus> {
  return budgetRequest<IBudgetStatus>(settings, 'stop', {
    method: 'POST',
    body: JSON.stringify({ action, reason: 'user' })
  });
}

/**
 * Cancel the user's own countdown.
 */
export function cancelStop(
  settings: ServerConnection.ISettings
): Promise<IBudgetStatus> {
  return budgetRequest<IBudgetStatus>(settings, 'stop', { method: 'DELETE' });
}

/**
 * The status bar item that says what still bills after a budget action
 * (`this machine still costs $6.86/h`), with a **Stop machine** (or **Stop
 * server**) button, and a **Cancel stop** button during a countdown the user
 * started.
 */
export class MachineItem extends Widget {
  constructor(
    private _model: IGpuCostModel,
    private _settings: ServerConnection.ISettings
  ) {
    super();
    this.id = MACHINE_ITEM_ID;
    this.addClass('jp-gpucost-MachineItem');
    this.addClass('jp-StatusBar-TextItem');
    this._model.stateChanged.connect(this.update, this);
    this.update();
  }

  /**
   * Whether the item has anything to say.
   */
  get active(): boolean {
    return this.node.dataset.machine !== 'none';
  }

  /**
   * Show what the model's status and budget say now.
   */
  update(): void {
    const budget = this._model.budget;
    const status = this._model.status;
    const symbol = status ? currencySymbol(status) : '';
    const still = stillCosts(budget);
    const node = this.node;
    node.textContent = '';
    if (budget?.state === 'grace' && budget.grace?.can_cancel) {
      node.dataset.machine = 'stopping';
      node.append(
        this._button(trans().__('Cancel stop'), () =>
          cancelStop(this._settings)
        )
      );
      return;
    }
    if (still === null) {
      node.dataset.machine = 'none';
      this.setHidden(true);
      return;
    }
    this.setHidden(false);
    node.dataset.machine = 'still-costs';
    const text = document.createElement('span');
    text.className = 'jp-gpucost-still-costs';
    text.textContent = stillCostsText(still, symbol, trans());
    node.append(text);
    const machine = machineOf(status);
    if (machine?.stoppable) {
      node.append(
        this._button(
          trans().__('Stop machine'),
          () => requestStop(this._settings, 'stop-instance'),
          () => confirmStop('stop-instance')
        )
      );
    } else {
      node.append(
        this._button(
          trans().__('Stop server'),
          () => requestStop(this._settings, 'stop-server'),
          () => confirmStop('stop-server')
        )
      );
    }
  }

  /**
   * A button that sends `onClick` once, after `confirm` (a manual stop asks
   * first; Cancel sends nothing).
   */
  private _button(
    label: string,
    onClick: () => Promise<IBudgetStatus>,
    confirm: () => Promise<boolean> = () => Promise.resolve(true)
  ): HTMLButtonElement {
    const button = document.createElement('button');
    button.className =
      'jp-Button jp-mod-styled jp-gpucost-stop-button jp-gpucost-machine-button';
    button.textContent = label;
    button.addEventListener('click', () => {
      button.disabled = true;
      void confirm()
        .then(confirmed => (confirmed ? onClick() : null))
        .catch(reason => {
          button.title = String(reason);
          console.error('jupyter-gpucost: stop request refused', reason);
          return null;
        })
        .then(sent => {
          if (sent === null) {
            button.disabled = false;
          }
        });
    });
    return button;
  }
}

/**
 * The machine: what still bills after a budget action, and a button to stop it.
 */
export const machinePlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:machine',
  description:
    'What the machine still costs after a budget action, with a button to stop it.',
  autoStart: true,
  requires: [IGpuCostModel],
  optional: [IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    model: IGpuCostModel,
    statusBar: IStatusBar | null
  ): void => {
    if (!statusBar) {
      return;
    }
    const item = new MachineItem(model, app.serviceManager.serverSettings);
    statusBar.registerStatusItem(machinePlugin.id, {
      item,
      align: 'left',
      rank: 102,
      isActive: () => item.active,
      activeStateChanged: model.stateChanged
    });
  }
};
