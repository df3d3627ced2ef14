import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import {
  INotebookModel,
  INotebookTracker,
  Notebook,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { Kernel, ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { currencySymbol, symbolOf } from '../format';
import { trans } from '../i18n';
import { IGpuCostModel } from '../tokens';
import { requestJson } from '../request';
import { hideRecords, removeBadge, showBadge, showIgnored } from './badge';
import { CellCostToggle } from './toggle';
import {
  AUTO_STATE_EXPRESSION,
  AUTO_STATE_KEY,
  autoCode,
  autoStateOf,
  autoSwitch,
  CELLS_ROUTE,
  ICellRecord
} from './format';
import {
  IOutputJSON,
  isCarrier,
  ISavedCell,
  parseSavedCell,
  recordOf,
  SAVED_KEY,
  SAVED_MIMETYPE,
  savedJSON,
  summarise
} from './saved';

export * from './badge';
export * from './format';
export * from './saved';

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
 * Execute requests of a notebook followed until their reply, at most.
 */
const MAX_REQUESTS = 256;

/**
 * Loads the IPython extension (no output; an error when jupyter-gpucost is
 * not installed in the kernel).
 */
const LOAD_CODE = 'get_ipython().run_line_magic("load_ext", "jupyter_gpucost")';

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
  })) as { cells: ICellRecord[]; currency?: string; currency_symbol?: string };
  // the currency as the UI's language writes it, as the status bar does
  const symbol = currencySymbol({
    currency: body.currency ?? '',
    currency_symbol: body.currency_symbol ?? '$'
  });
  return { record: body.cells[0] ?? null, symbol };
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
   * Write each priced cell's cost into its metadata (the setting; off for
   * people who diff notebooks: the kernel's record is then only dropped).
   */
  saveInNotebook = true;

  /**
   * Whether cells of this notebook are priced.
   */
  isOn(panel: NotebookPanel): boolean {
    return this._on.get(panel) ?? false;
  }

  /**
   * Follow a notebook: its toolbar button, and its kernel's restarts.
   */
  track(panel: NotebookPanel, button: { pressed: boolean } | null): void {
    if (button) {
      this._buttons.set(panel, button);
    }
    const apply = (): void => {
      const pending = this._apply(panel);
      this._pending.set(panel, pending);
      void pending.finally(() => {
        if (this._pending.get(panel) === pending) {
          this._pending.delete(panel);
        }
      });
    };
    panel.sessionContext.ready.then(apply).catch(() => undefined);
    panel.context.ready
      .then(() => {
        this.cleanSaved(panel);
        this.showRecorded(panel);
      })
      .catch(() => undefined);
    this._followReplies(panel);
    panel.sessionContext.kernelChanged.connect(apply);
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting') {
        setTimeout(apply, 1000);
      }
    });
    panel.disposed.connect(() => {
      this._on.delete(panel);
      this._buttons.delete(panel);
      this._pending.delete(panel);
    });
  }

  /**
   * The badges of the costs the notebook file holds, marked as recorded (not
   * live); a record that is not sound is named as ignored, never shown.
   */
  showRecorded(panel: NotebookPanel): void {
    for (const cell of panel.content.widgets) {
      const value = cell.model.getMetadata(SAVED_KEY);
      if (value === undefined) {
        continue;
      }
      const saved = parseSavedCell(value);
      void cell.ready.then(() => {
        if (saved) {
          // in the record's own currency (it may come from another session)
          showBadge(
            cell,
            recordOf(saved, cell.model.id),
            symbolOf(saved.currency),
            true
          );
        } else {
          showIgnored(cell);
        }
      });
    }
  }

  /**
   * A cell's execute reply arrived: the record the kernel sent with it (the
   * reply's `metadata.gpucost`) goes into the cell's metadata (unless the
   * setting says not to), and the notebook's summary follows. A cell run again
   * without a record loses the one it had: it was another run's.
   */
  saveFromReply(
    panel: NotebookPanel | null,
    cell: Cell,
    value: unknown
  ): ISavedCell | null {
    if (cell.model.type !== 'code') {
      return null;
    }
    const saved = value === undefined ? null : parseSavedCell(value);
    if (saved && this.saveInNotebook) {
      cell.model.setMetadata(SAVED_KEY, savedJSON(saved));
    } else if (cell.model.getMetadata(SAVED_KEY) !== undefined) {
      cell.model.deleteMetadata(SAVED_KEY);
      if (!saved) {
        removeBadge(cell);
      }
    }
    if (saved) {
      // this run's figure, until the server's record (same cost, more detail)
      showBadge(cell, recordOf(saved, cell.model.id), symbolOf(saved.currency));
    }
    if (panel && this.saveInNotebook) {
      this.saveSummary(panel);
    }
    return saved;
  }

  /**
   * Remove the outputs earlier versions added to carry a cell's record (a
   * notebook saved by them): `null` when there was none, else the last sound
   * record they carried (`saved` null when none was sound).
   */
  cleanOutputs(cell: Cell): { saved: ISavedCell | null } | null {
    if (cell.model.type !== 'code') {
      return null;
    }
    const outputs = (cell.model as ICodeCellModel).outputs;
    const all = outputs.toJSON() as unknown as IOutputJSON[];
    const carriers = all.filter(isCarrier);
    if (!carriers.length) {
      return null;
    }
    const kept = all.filter(output => !isCarrier(output));
    outputs.clear();
    for (const output of kept) {
      outputs.add(output as unknown as Parameters<typeof outputs.add>[0]);
    }
    return {
      saved: parseSavedCell(
        carriers[carriers.length - 1].data?.[SAVED_MIMETYPE]
      )
    };
  }

  /**
   * A notebook saved by an earlier version comes back clean: its hidden
   * outputs are removed, a sound record they carried moves into the cell's
   * metadata where the cell has none (unless the setting says not to).
   */
  cleanSaved(panel: NotebookPanel): boolean {
    let cleaned = false;
    for (const cell of panel.content.widgets) {
      const found = this.cleanOutputs(cell);
      if (found === null) {
        continue;
      }
      cleaned = true;
      if (
        found.saved &&
        this.saveInNotebook &&
        cell.model.getMetadata(SAVED_KEY) === undefined
      ) {
        cell.model.setMetadata(SAVED_KEY, savedJSON(found.saved));
      }
    }
    if (cleaned && this.saveInNotebook) {
      this.saveSummary(panel);
    }
    return cleaned;
  }

  /**
   * Follow a notebook's kernel messages: which cell each execute request is
   * for (JupyterLab sends its id in the request's metadata), and the record
   * each reply carries.
   */
  private _followReplies(panel: NotebookPanel): void {
    const requests = new Map<string, string>();
    let kernel: Kernel.IKernelConnection | null = null;
    const onMessage = (
      _: Kernel.IKernelConnection,
      args: Kernel.IAnyMessageArgs
    ): void => {
      const msg = args.msg;
      if (args.direction === 'send') {
        const cellId = (msg.metadata as { cellId?: unknown }).cellId;
        if (
          msg.header.msg_type === 'execute_request' &&
          typeof cellId === 'string'
        ) {
          requests.set(msg.header.msg_id, cellId);
          while (requests.size > MAX_REQUESTS) {
            requests.delete(requests.keys().next().value as string);
          }
        }
        return;
      }
      if (msg.header.msg_type !== 'execute_reply') {
        return;
      }
      const parent = (msg.parent_header as { msg_id?: string }).msg_id ?? '';
      const cellId = requests.get(parent);
      if (cellId === undefined) {
        return;
      }
      requests.delete(parent);
      const cell = panel.content.widgets.find(c => c.model.id === cellId);
      if (cell) {
        const metadata = (msg.metadata ?? {}) as { [key: string]: unknown };
        this.saveFromReply(panel, cell, metadata[SAVED_KEY]);
      }
    };
    const connect = (): void => {
      kernel?.anyMessage?.disconnect(onMessage);
      kernel = panel.sessionContext.session?.kernel ?? null;
      kernel?.anyMessage?.connect(onMessage);
    };
    connect();
    panel.sessionContext.ready.then(connect).catch(() => undefined);
    panel.sessionContext.kernelChanged.connect(connect);
    panel.disposed.connect(() => {
      kernel?.anyMessage?.disconnect(onMessage);
    });
  }

  /**
   * The notebook's `metadata.gpucost`: its cells' current records summed
   * (a record that is not sound is left out); removed when no cell has one.
   */
  saveSummary(panel: NotebookPanel): void {
    const model = panel.content.model;
    if (!model) {
      return;
    }
    const cells: ISavedCell[] = [];
    for (const cell of panel.content.widgets) {
      const saved = parseSavedCell(cell.model.getMetadata(SAVED_KEY));
      if (saved) {
        cells.push(saved);
      }
    }
    const summary = summarise(cells);
    if (summary) {
      model.setMetadata(SAVED_KEY, summary);
    } else if (model.getMetadata(SAVED_KEY) !== undefined) {
      model.deleteMetadata(SAVED_KEY);
    }
  }

  /**
   * A kernel started, changed or restarted: switch pricing on again where the
   * page had it on (a new or restarted kernel starts with it off), else read
   * whether the kernel prices cells (a reloaded page knows nothing of it).
   * Nothing is said when there is no kernel: nobody asked for anything.
   */
  private async _apply(panel: NotebookPanel): Promise<void> {
    if (!panel.sessionContext.session?.kernel) {
      return;
    }
    const want = this.alwaysOn || (this._on.get(panel) ?? false);
    if (want) {
      await this.set(panel, true, { quiet: true });
    } else {
      await this.sync(panel);
    }
  }

  /**
   * Read whether the notebook's kernel prices every cell (and load the
   * IPython extension first, when the setting says so), silently: the
   * kernel evaluates a user expression, no cell runs and none is priced.
   * The button follows the answer; `null` when the kernel cannot tell
   * (no kernel, not Python, jupyter-gpucost not installed in it).
   */
  async sync(panel: NotebookPanel): Promise<boolean | null> {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      return null;
    }
    try {
      const info = await kernel.info;
      if (info.language_info.name !== 'python') {
        return null;
      }
      const reply = await kernel.requestExecute({
        code: this.loadExtension ? LOAD_CODE : '',
        silent: true,
        store_history: false,
        user_expressions: { [AUTO_STATE_KEY]: AUTO_STATE_EXPRESSION }
      }).done;
      const on = autoStateOf(
        reply.content as {
          status: string;
          user_expressions?: { [key: string]: unknown };
        }
      );
      if (on !== null && panel.sessionContext.session?.kernel === kernel) {
        this._mark(panel, on);
      }
      return on;
    } catch {
      return null;
    }
  }

  /**
   * Switch pricing in the notebook's kernel (silently: nothing in the
   * notebook). Without a kernel, the user is told only when they asked
   * (`quiet` is for switches the page makes on its own).
   */
  async set(
    panel: NotebookPanel,
    on: boolean,
    options: { quiet?: boolean } = {}
  ): Promise<boolean> {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      if (!options.quiet) {
        Notification.warning(
          trans().__(
            'Start a kernel first: cells are priced by the kernel that runs them.'
          ),
          { autoClose: 5000 }
        );
      }
      return false;
    }
    let content: { status: string; evalue?: string };
    try {
      const reply = await kernel.requestExecute({
        code: autoCode(on),
        silent: true,
        store_history: false
      }).done;
      content = reply.content as { status: string; evalue?: string };
    } catch (reason) {
      // the kernel went away meanwhile (shut down, restarted)
      if (!options.quiet) {
        Notification.warning(
          trans().__(
            'Cells cannot be priced in this kernel: %1',
            reason instanceof Error ? reason.message : String(reason)
          ),
          { autoClose: 5000 }
        );
      }
      return false;
    }
    if (content.status !== 'ok') {
      Notification.warning(
        trans().__(
          'Cells cannot be priced in this kernel: %1. Install jupyter-gpucost in the kernel’s environment.',
          content.evalue ?? content.status
        ),
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
    if (panel && typed === null) {
      // the kernel's state may still be on its way (a page just reloaded)
      await this._pending.get(panel);
    }
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
  private _pending = new Map<NotebookPanel, Promise<void>>();
  private _buttons = new Map<NotebookPanel, { pressed: boolean }>();
  private _shown = new Map<string, string>();
}

/**
 * Adds the toolbar button to every notebook.
 */
class ToolbarExtension implements DocumentRegistry.IWidgetExtension<
  NotebookPanel,
  INotebookModel
> {
  constructor(
    private readonly _controller: CellCostController,
    private readonly _model: IGpuCostModel | null = null
  ) {}

  createNew(panel: NotebookPanel): IDisposable {
    // the session's currency, as the status bar writes it: `¥/cell` in yuan
    const label = (): string => {
      const status = this._model?.status;
      return trans().__('%1/cell', status ? currencySymbol(status) : '$');
    };
    const button = new CellCostToggle({
      label: label(),
      tooltip: trans().__(
        'Price every cell (jupyter-gpucost): its cost is shown next to it and saved in its metadata'
      ),
      pressed: this._controller.isOn(panel),
      onClick: () => {
        void this._controller.toggle(panel);
      }
    });
    panel.toolbar.insertItem(10, 'gpucostCells', button);
    hideRecords(panel);
    this._controller.track(panel, button);
    const relabel = (): void => {
      button.label = label();
    };
    this._model?.stateChanged.connect(relabel);
    return new DisposableDelegate(() => {
      this._model?.stateChanged.disconnect(relabel);
      button.dispose();
    });
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
  // after the model's plugin, which loads the extension's translations
  optional: [ISettingRegistry, IGpuCostModel],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    settingRegistry: ISettingRegistry | null,
    model?: IGpuCostModel | null
  ): void => {
    const controller = new CellCostController(
      app.serviceManager.serverSettings
    );
    app.docRegistry.addWidgetExtension(
      'Notebook',
      new ToolbarExtension(controller, model ?? null)
    );
    const panelOf = (notebook: Notebook): NotebookPanel | null =>
      tracker.find(panel => panel.content === notebook) ?? null;
    NotebookActions.executed.connect((_, args) => {
      void controller.executed(panelOf(args.notebook), args.cell);
    });
    app.commands.addCommand(TOGGLE_COMMAND, {
      label: () => trans().__('Price Every Cell (GPU Cost)'),
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
            controller.saveInNotebook =
              settings.get('saveInNotebook').composite !== false;
            const before = controller.alwaysOn;
            controller.alwaysOn =
              settings.get('priceEveryCell').composite === true;
            if (controller.alwaysOn !== before) {
              // notebooks without a kernel are switched when one starts
              tracker.forEach(panel => {
                void controller.set(panel, controller.alwaysOn, {
                  quiet: true
                });
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
