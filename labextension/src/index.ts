import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator } from '@jupyterlab/translation';

import { budgetPlugin } from './budget';
import { cellCostPlugin } from './cells';
import { exportPlugin } from './export';
import { DEFAULT_INTERVAL_S, GpuCostModel } from './model';
import { panelPlugin } from './panel/plugin';
import { GpuCostStatus } from './view';

export * from './format';
export * from './model';
export * from './request';
export * from './tokens';
export * from './view';

/**
 * Command ids.
 */
export namespace CommandIDs {
  /**
   * Opens the cost panel; executed on click only if some plugin registers it.
   */
  export const openPanel = 'gpucost:open-panel';
}

/**
 * The status bar item showing what the session has cost so far.
 */
export const statusPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:plugin',
  description:
    'Shows in the status bar what the notebook session has cost so far on rented GPUs.',
  autoStart: true,
  optional: [IStatusBar, ISettingRegistry, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    statusBar: IStatusBar | null,
    settingRegistry: ISettingRegistry | null,
    translator: ITranslator | null
  ): void => {
    if (!statusBar) {
      // Nowhere to show the cost (e.g. a shell without a status bar).
      return;
    }
    const model = new GpuCostModel({
      serverSettings: app.serviceManager.serverSettings,
      intervalSeconds: DEFAULT_INTERVAL_S
    });
    const view = new GpuCostStatus(model, translator ?? undefined);
    view.node.addEventListener('click', () => {
      if (app.commands.hasCommand(CommandIDs.openPanel)) {
        void app.commands.execute(CommandIDs.openPanel);
      }
    });
    statusBar.registerStatusItem(statusPlugin.id, {
      item: view,
      align: 'left',
      rank: 100
    });
    view.disposed.connect(() => model.dispose());

    if (settingRegistry) {
      settingRegistry
        .load(statusPlugin.id)
        .then(settings => {
          const apply = (): void => {
            const value = settings.get('pollIntervalSeconds').composite;
            if (typeof value === 'number') {
              model.intervalSeconds = value;
            }
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => {
          console.error(
            'jupyter-gpucost: could not load the settings, polling every %ss.',
            DEFAULT_INTERVAL_S,
            reason
          );
        });
    }
  }
};

/**
 * Every plugin of the extension. Each feature lives in its own module and adds its
 * plugin here.
 */
const plugins: JupyterFrontEndPlugin<unknown>[] = [
  statusPlugin,
  panelPlugin,
  budgetPlugin,
  exportPlugin,
  cellCostPlugin
];

export default plugins;
