import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  MainAreaWidget,
  WidgetTracker
} from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { TranslationBundle } from '@jupyterlab/translation';

import { parseSavedCell, recordOf, SAVED_KEY } from '../cells/saved';
import { trans } from '../i18n';
import { IGpuCostModel } from '../tokens';
import { PanelFeed } from './feed';
import { CostPanelModel } from './model';
import { ICellCost } from './types';
import { CostPanel } from './view';

/**
 * The command that opens the panel (the status bar item runs it on click).
 */
export const OPEN_PANEL_COMMAND = 'gpucost:open-panel';

/**
 * The cost panel: totals, a chart over time, the kernels and what they cost.
 */
export const panelPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:panel',
  description:
    'A panel showing where the money went: per kernel, per GPU, over time.',
  autoStart: true,
  requires: [IGpuCostModel],
  optional: [
    ICommandPalette,
    ILayoutRestorer,
    ISettingRegistry,
    ILabShell,
    INotebookTracker
  ],
  activate: (
    app: JupyterFrontEnd,
    cost: IGpuCostModel,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null,
    labShell: ILabShell | null,
    notebooks: INotebookTracker | null
  ): void => {
    // JupyterLab: the main area; Notebook 7 (no ILabShell): the right sidebar
    const area = labShell ? 'main' : 'right';
    const tracker = new WidgetTracker<MainAreaWidget<CostPanel>>({
      namespace: 'jupyter-gpucost'
    });
    // the panel's live parts are pushed from the page's load on, so an opened
    // panel shows the kernels and exports at once
    const feed = new PanelFeed(app.serviceManager.events ?? null);
    let override: number | null = null;
    let current: MainAreaWidget<CostPanel> | null = null;

    app.commands.addCommand(OPEN_PANEL_COMMAND, {
      label: trans().__('GPU Cost'),
      caption: trans().__(
        'Where the money went: per kernel, per GPU, over time'
      ),
      execute: () => {
        if (!current || current.isDisposed) {
          const model = new CostPanelModel({
            serverSettings: app.serviceManager.serverSettings,
            intervalSeconds: override ?? undefined,
            cost,
            feed,
            cellLabel: (path, cellId) =>
              Private.cellLabel(notebooks, path, cellId, trans()),
            recordedCells: () => Private.recordedCells(notebooks)
          });
          const content = new CostPanel(model);
          current = new MainAreaWidget({ content });
          current.id = 'jp-gpucost-panel-widget';
          current.title.label = trans().__('GPU Cost');
          current.title.closable = true;
          current.disposed.connect(() => model.dispose());
          void tracker.add(current);
        }
        if (!current.isAttached) {
          app.shell.add(current, area, { rank: 900 });
        }
        app.shell.activateById(current.id);
        return current;
      }
    });
    palette?.addItem({
      command: OPEN_PANEL_COMMAND,
      category: trans().__('GPU Cost')
    });
    if (restorer) {
      void restorer.restore(tracker, {
        command: OPEN_PANEL_COMMAND,
        name: () => 'gpucost-panel'
      });
    }
    if (settingRegistry) {
      settingRegistry
        .load(panelPlugin.id)
        .then(settings => {
          // deprecated: set, it overrides the one fallback interval (the
          // cost model's setting) for the panel; unset, the panel follows it
          const apply = (): void => {
            const value = settings.user.pollIntervalSeconds;
            override = typeof value === 'number' ? value : null;
            if (current && !current.isDisposed) {
              current.content.model.intervalOverride = override;
            }
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => {
          console.error(
            'jupyter-gpucost: could not load the panel settings.',
            reason
          );
        });
    }
  }
};

namespace Private {
  /**
   * The sound cost records the open notebooks hold in their cells' metadata
   * (a forged or corrupt one is left out).
   */
  export function recordedCells(
    notebooks: INotebookTracker | null
  ): ICellCost[] {
    const found: ICellCost[] = [];
    notebooks?.forEach(panel => {
      for (const cell of panel.content.widgets) {
        const saved = parseSavedCell(cell.model.getMetadata(SAVED_KEY));
        if (saved) {
          found.push({
            ...recordOf(saved, cell.model.id),
            notebook_path: panel.context.path,
            recorded: true
          });
        }
      }
    });
    return found;
  }

  /**
   * A cell's place in its notebook, where the notebook is open: `cell 3`,
   * with the cell's first line of code as its title.
   */
  export function cellLabel(
    notebooks: INotebookTracker | null,
    path: string | null,
    cellId: string,
    trans: TranslationBundle
  ): { name: string; title: string } | null {
    if (!notebooks || !path) {
      return null;
    }
    const panel = notebooks.find(p => p.context.path === path);
    const cells = panel?.content.widgets ?? [];
    const index = cells.findIndex(c => c.model.id === cellId);
    if (index < 0) {
      return null;
    }
    const first = cells[index].model.sharedModel.getSource().split('\n')[0];
    return {
      name: trans.__('cell %1', index + 1),
      title: first.length > 80 ? `${first.slice(0, 79)}…` : first
    };
  }
}
