import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { IToolbarWidgetRegistry } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { budgetPlugin } from './budget';
import { machinePlugin } from './machine';
import { cellCostPlugin } from './cells';
import { exportPlugin } from './export';
import { DEFAULT_INTERVAL_S } from './fallback';
import { setMoneyLocale } from './format';
import { setTranslator } from './i18n';
import { GpuCostModel } from './model';
import { panelPlugin } from './panel/plugin';
import { IGpuCostModel } from './tokens';
import { GpuCostTopBarItem } from './topbar';
import { actAsButton, GpuCostStatus } from './view';

export * from './display';
export * from './fallback';
export * from './format';
export * from './model';
export * from './request';
export * from './tokens';
export * from './topbar';
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
 * The name of the top-bar item (in the `TopBar` toolbar's settings).
 */
export const TOP_BAR_ITEM_NAME = 'gpucost';

/**
 * The one live cost model of the page, shared by every other plugin: the
 * status pushed by the server on its event bus, polled only while that
 * socket is down. Its settings are the fallback poll's interval.
 */
export const modelPlugin: JupyterFrontEndPlugin<IGpuCostModel> = {
  id: 'jupyter-gpucost:plugin',
  description:
    'The live cost of the notebook session on rented GPUs, pushed from the server and shared by every view.',
  autoStart: true,
  provides: IGpuCostModel,
  optional: [ISettingRegistry, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null,
    translator: ITranslator | null
  ): IGpuCostModel => {
    // the one place the extension's translations are loaded (every other
    // plugin activates after this one and reads them with `trans()`)
    setMoneyLocale(translator?.languageCode ?? 'en');
    if (translator) {
      setTranslator(translator);
    }
    const model = new GpuCostModel({
      serverSettings: app.serviceManager.serverSettings,
      events: app.serviceManager.events,
      intervalSeconds: DEFAULT_INTERVAL_S
    });
    if (settingRegistry) {
      settingRegistry
        .load(modelPlugin.id)
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
            'jupyter-gpucost: could not load the settings, polling every %ss when needed.',
            DEFAULT_INTERVAL_S,
            reason
          );
        });
    }
    return model;
  }
};

/**
 * Open the cost panel if some plugin registered the command.
 */
function openPanel(app: JupyterFrontEnd): void {
  if (app.commands.hasCommand(CommandIDs.openPanel)) {
    void app.commands.execute(CommandIDs.openPanel);
  }
}

/**
 * The status bar item showing what the session has cost so far (JupyterLab;
 * a shell without a status bar, such as Notebook 7, has the top-bar item).
 */
export const statusPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:status-item',
  description:
    'Shows in the status bar what the notebook session has cost so far on rented GPUs.',
  autoStart: true,
  requires: [IGpuCostModel],
  optional: [IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    model: IGpuCostModel,
    statusBar: IStatusBar | null
  ): void => {
    if (!statusBar) {
      // no status bar (Notebook 7): the top-bar item shows the cost
      return;
    }
    const view = new GpuCostStatus(model);
    // reached with Tab, opened with Enter or Space as with a click
    actAsButton(view.node, () => openPanel(app));
    statusBar.registerStatusItem(statusPlugin.id, {
      item: view,
      align: 'left',
      rank: 100
    });
  }
};

/**
 * The top-bar item: always in Notebook 7 (`/tree` and notebook pages), in
 * JupyterLab only when its setting says so (the status bar shows the cost).
 */
export const topBarPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:top-bar',
  description:
    'Shows the cost, rate and budget in the top bar (Notebook 7, and JupyterLab on request).',
  autoStart: true,
  requires: [IGpuCostModel],
  optional: [IToolbarWidgetRegistry, ILabShell, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    model: IGpuCostModel,
    toolbarRegistry: IToolbarWidgetRegistry | null,
    labShell: ILabShell | null,
    settingRegistry: ISettingRegistry | null
  ): void => {
    if (!toolbarRegistry) {
      return;
    }
    const items: Widget[] = [];
    // JupyterLab has the status bar: the top-bar item is there on request
    let shown = labShell === null;
    const apply = (): void => {
      for (const item of items) {
        item.setHidden(!shown);
      }
    };
    toolbarRegistry.addFactory('TopBar', TOP_BAR_ITEM_NAME, () => {
      const item = new GpuCostTopBarItem({
        model,
        onClick: () => openPanel(app)
      });
      items.push(item);
      item.disposed.connect(() => items.splice(items.indexOf(item), 1));
      item.setHidden(!shown);
      return item;
    });
    if (labShell && settingRegistry) {
      settingRegistry
        .load(topBarPlugin.id)
        .then(settings => {
          const read = (): void => {
            shown = settings.get('showInJupyterLab').composite === true;
            apply();
          };
          read();
          settings.changed.connect(read);
        })
        .catch(reason => {
          console.error(
            'jupyter-gpucost: could not load the top-bar settings.',
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
  modelPlugin,
  statusPlugin,
  topBarPlugin,
  panelPlugin,
  budgetPlugin,
  machinePlugin,
  exportPlugin,
  cellCostPlugin
];

export default plugins;
