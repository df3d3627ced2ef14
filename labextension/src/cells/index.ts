import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { Cell } from '@jupyterlab/cells';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import {
  INotebookModel,
  INotebookTracker,
  Notebook,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ToolbarButton } from '@jupyterlab/ui-components';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { requestJson } from '../request';
import {
  autoCode,
  autoSwitch,
  badgeText,
  badgeTitle,
  CELLS_ROUTE,
  ICellRecord
} from './format';

export * from './format';

/**
 * The class of the badge shown next to a priced cell.
 */
export const BADGE_CLASS = 'jp-gpucost-cell-badge';

/**
 * The command that switches per-cell pricing in the current notebook.
 */
export const TOGGLE_COMMAND = 'gpucost:toggle-cell-cost';

/**
 * How long to look for a cell's record after it ran (the kernel sends it
 * from a background thread): delays between tries, in ms.
 */
export const RECORD_RETRY_MS = [150, 300, 600, 1200, 2400];

/**
 * Fetch the newest record of a cell; `null` when there is none.
 */
export async function fetchCellRecord(
  settings: ServerConnection.ISettings,
  cellId: string
): Promise<{ record: ICellRecord | null; symbol: string }> {
  const body = (await requestJson(settings, CELLS_ROUTE, {
    limit: '1',
    cell_id: cellId
  })) as { cells: ICellRecord[]; currency_symbol?: string };
  return { record: body.cells[0] ?? null, symbol: body.currency_symbol ?? '$' };
}

/**
 * Show (or replace) the badge of a cell.
 */
export function showBadge(
  cell: Cell,
  record: ICellRecord,
  symbol: string
): void {
  const host = cell.node.querySelector('.jp-Cell-inputWrapper') ?? cell.node;
  let badge = host.querySelector(`.${BADGE_CLASS}`) as HTMLElement | null;
  if (!badge) {
    badge = document.createElement('div');
    badge.className = BADGE_CLASS;
    host.appendChild(badge);
  }
  badge.textContent = badgeText(record, symbol);
  badge.title = badgeTitle(record, symbol);
  badge.dataset.status = record.status;
  badge.dataset.mode = record.mode;
}

/**
 * Per-notebook state of per-cell pricing, and the badges.
 */
export class CellCostController {
  constructor(
    private readonly _settings: ServerConnection.ISettings,
    private readonly _sleep: (ms: number) => Promise<void> = ms =>
      new Promise(resolve => setTimeout(resolve, ms))
  ) {}

  /**
   * Turn pricing on for every notebook whose kernel starts (the setting).
   */
  alwaysOn = false;

  /**
   * Load the IPython extension into every Python kernel that starts, so that
   * `%%gpucost` works without `%load_ext` (the setting).
   */
  loadExtension = true;

  /**
   * Whether cells of this notebook are priced.
   */
  isOn(panel: NotebookPanel): boolean {
    return this._on.get(panel) ?? false;
  }

  /**
   * Follow a notebook: its toolbar button, and its kernel's restarts.
   */
  track(panel: NotebookPanel, button: ToolbarButton | null): void {
    if (button) {
      this._buttons.set(panel, button);
    }
    const apply = (): void => {
      // a new or restarted kernel starts with pricing off: switch it on again
      const want = this.alwaysOn || (this._on.get(panel) ?? false);
      if (want) {
        void this.set(panel, true);
      } else if (this.loadExtension) {
        void this.load(panel);
      }
    };
    panel.sessionContext.ready.then(apply).catch(() => undefined);
    panel.sessionContext.kernelChanged.connect(apply);
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting') {
        setTimeout(apply, 1000);
      }
    });
    panel.disposed.connect(() => {
      this._on.delete(panel);
      this._buttons.delete(panel);
    });
  }

  /**
   * Load the IPython extension, silently, into a Python kernel; a kernel
   * without jupyter-gpucost installed is left as it is.
   */
  async load(panel: NotebookPanel): Promise<boolean> {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      return false;
    }
    try {
      const info = await kernel.info;
      if (info.language_info.name !== 'python') {
        return false;
      }
      const reply = await kernel.requestExecute({
        code: 'get_ipython().run_line_magic("load_ext", "jupyter_gpucost")',
        silent: true,
        store_history: false
      }).done;
      return reply.content.status === 'ok';
    } catch {
      return false;
    }
  }

  /**
   * Switch pricing in the notebook's kernel (silently: nothing in the notebook).
   */
  async set(panel: NotebookPanel, on: boolean): Promise<boolean> {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      Notification.warning(
        'Start a kernel first: cells are priced by the kernel that runs them.',
        { autoClose: 5000 }
      );
      return false;
    }
    const future = kernel.requestExecute({
      code: autoCode(on),
      silent: true,
      store_history: false
    });
    const reply = await future.done;
    const content = reply.content as { status: string; evalue?: string };
    if (content.status !== 'ok') {
      Notification.warning(
        `Cells cannot be priced in this kernel: ${content.evalue ?? content.status}. ` +
          'Install jupyter-gpucost in the kernel’s environment.',
        { autoClose: false }
      );
      this._mark(panel, false);
      return false;
    }
    this._mark(panel, on);
    return true;
  }

  /**
   * The toolbar button and the command.
   */
  toggle(panel: NotebookPanel): Promise<boolean> {
    return this.set(panel, !this.isOn(panel));
  }

  /**
   * After a cell ran: follow `%gpucost auto` typed by hand, and show the
   * cell's cost when the kernel recorded it.
   */
  async executed(panel: NotebookPanel | null, cell: Cell): Promise<void> {
    const source = cell.model.sharedModel.getSource();
    const typed = autoSwitch(source);
    if (panel && typed !== null) {
      this._mark(panel, typed === 'on');
    }
    const magic = source.trimStart().startsWith('%%gpucost');
    const on = panel ? this.isOn(panel) : false;
    // the cell that switched auto on was not itself priced
    if (!magic && (!on || typed === 'on')) {
      return;
    }
    const cellId = cell.model.id;
    const before = this._shown.get(cellId) ?? null;
    for (const delay of RECORD_RETRY_MS) {
      await this._sleep(delay);
      let found: { record: ICellRecord | null; symbol: string };
      try {
        found = await fetchCellRecord(this._settings, cellId);
      } catch {
        continue;
      }
      // a record newer than the one shown (clocks may differ: compare records)
      if (found.record && found.record.ended !== before) {
        this._shown.set(cellId, found.record.ended);
        showBadge(cell, found.record, found.symbol);
        return;
      }
    }
  }

  private _mark(panel: NotebookPanel, on: boolean): void {
    this._on.set(panel, on);
    const button = this._buttons.get(panel);
    if (button) {
      button.pressed = on;
    }
  }

  private _on = new Map<NotebookPanel, boolean>();
  private _buttons = new Map<NotebookPanel, ToolbarButton>();
  private _shown = new Map<string, string>();
}

/**
 * Adds the toolbar button to every notebook.
 */
class ToolbarExtension implements DocumentRegistry.IWidgetExtension<
  NotebookPanel,
  INotebookModel
> {
  constructor(private readonly _controller: CellCostController) {}

  createNew(panel: NotebookPanel): IDisposable {
    const button = new ToolbarButton({
      className: 'jp-gpucost-cell-toggle',
      label: '$/cell',
      tooltip:
        'Price every cell (jupyter-gpucost): its cost is shown next to it, nothing is added to the notebook',
      pressed: this._controller.isOn(panel),
      onClick: () => {
        void this._controller.toggle(panel);
      }
    });
    panel.toolbar.insertItem(10, 'gpucostCells', button);
    this._controller.track(panel, button);
    return new DisposableDelegate(() => button.dispose());
  }
}

/**
 * Per-cell cost: a badge next to each priced cell, switched from the
 * notebook toolbar, the command palette or the settings.
 */
export const cellCostPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:cells',
  description:
    'Shows what each cell cost next to it, and switches per-cell pricing from the toolbar.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    settingRegistry: ISettingRegistry | null
  ): void => {
    const controller = new CellCostController(
      app.serviceManager.serverSettings
    );
    app.docRegistry.addWidgetExtension(
      'Notebook',
      new ToolbarExtension(controller)
    );
    const panelOf = (notebook: Notebook): NotebookPanel | null =>
      tracker.find(panel => panel.content === notebook) ?? null;
    NotebookActions.executed.connect((_, args) => {
      void controller.executed(panelOf(args.notebook), args.cell);
    });
    app.commands.addCommand(TOGGLE_COMMAND, {
      label: 'Price Every Cell (GPU Cost)',
      isToggled: () =>
        tracker.currentWidget !== null &&
        controller.isOn(tracker.currentWidget),
      isEnabled: () => tracker.currentWidget !== null,
      execute: () => {
        const panel = tracker.currentWidget;
        return panel ? controller.toggle(panel) : undefined;
      }
    });
    if (settingRegistry) {
      settingRegistry
        .load(cellCostPlugin.id)
        .then(settings => {
          const apply = (): void => {
            controller.loadExtension =
              settings.get('loadInEveryKernel').composite !== false;
            const before = controller.alwaysOn;
            controller.alwaysOn =
              settings.get('priceEveryCell').composite === true;
            if (controller.alwaysOn !== before) {
              tracker.forEach(panel => {
                void controller.set(panel, controller.alwaysOn);
              });
            }
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => {
          console.error('jupyter-gpucost: cell settings not loaded', reason);
        });
    }
  }
};
