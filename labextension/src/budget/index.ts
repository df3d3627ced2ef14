import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';

import { IGpuCostModel } from '../tokens';
import { BudgetController } from './controller';

export * from './allowance';
export * from './confirm';
export * from './controller';
export * from './countdown';
export * from './format';
export * from './interruption';
export * from './reason';
export * from './request';
export * from './settings-sync';
export * from './shown';
export * from './status-item';
export * from './time-left';
export * from './tokens';
export * from './warnings';

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
      statusBar.registerStatusItem(`${budgetPlugin.id}-interruption`, {
        item: controller.interruption.item,
        align: 'left',
        rank: 100,
        isActive: () => controller.interruption.visible
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
