import { VDomModel } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';

import { setSoftBudget } from '../budget/request';
import { CELLS_ROUTE } from '../cells/format';
import { EXPORTS_ROUTE, IExportsPayload } from '../export/request';
import { FallbackPoll } from '../fallback';
import { GpuCostRequestError, requestJson, requestStatus } from '../request';
import { IGpuCostModel } from '../tokens';
import { AlertsModel } from './alerts-model';
import {
  historyDue,
  IPanelLive,
  mergeCells,
  PanelFeed,
  withNewestPoint
} from './feed';
import {
  HistoryWindow,
  ICellCost,
  ICellsAnswer,
  IHistoryAnswer,
  IKernelsAnswer,
  IPanelStatus
} from './types';
import { withMoneyKeys } from '../money-keys';

/**
 * Routes the panel reads, relative to the server's base URL.
 */
export const KERNELS_ROUTE = 'gpucost/api/kernels';
export const HISTORY_ROUTE = 'gpucost/api/history';

/**
 * How many recent cells the panel lists.
 */
export const CELLS_LISTED = 20;

/**
 * How one part of the panel stands: its last answer and how the last request
 * went. A part whose route answers 404 is `missing` (an older server, or a
 * feature that is not enabled) and the panel hides or explains it.
 */
export interface IPart<T> {
  readonly value: T | null;
  readonly missing: boolean;
  readonly error: string | null;
}

/**
 * Everything the cost panel shows. The status and the budget come from the
 * shared cost model (pushed by the server); the kernels, this session's cells,
 * the exports and the chart's newest point come from the panel events the
 * server pushes (`PanelFeed`). The panel asks the server only for a history
 * window when it is shown or the window changes (and, for a window coarser
 * than the pushed point, once per step) and for earlier sessions' cells when
 * it is shown. While no push arrives (the event socket is down, or an older
 * server), one poll refreshes every part while the panel is visible.
 */
export class CostPanelModel extends VDomModel {
  constructor(options: CostPanelModel.IOptions = {}) {
    super();
    this._serverSettings =
      options.serverSettings ?? ServerConnection.makeSettings();
    this._cost = options.cost ?? null;
    this._override = options.intervalSeconds ?? null;
    this._feed = options.feed ?? null;
    this.cellLabel = options.cellLabel ?? (() => null);
    this.recordedCells = options.recordedCells ?? (() => []);
    this._active = options.active ?? true;
    this.alerts = new AlertsModel(this._serverSettings);
    this.alerts.stateChanged.connect(this._onAlerts, this);
    if (this._cost) {
      this._cost.stateChanged.connect(this._onCost, this);
      this._onCost();
    }
    this._poll = new FallbackPoll({
      auto: options.autoStart ?? true,
      factory: () => this.fetch(),
      intervalSeconds: options.intervalSeconds ?? this._cost?.intervalSeconds,
      name: 'jupyter-gpucost:panel',
      standby: () => (this._active && !this._pushed() ? 'when-hidden' : true)
    });
    if (this._feed) {
      this._feed.changed.connect(this._onPanel, this);
      if (this._feed.latest) {
        this._applyPanel(this._feed.latest);
      }
      if (this._active && this._pushed()) {
        void this._fetchDetails(true);
      }
    }
  }

  /**
   * How a recent cell is named where its notebook is open (`cell 3`), else
   * `null`.
   */
  readonly cellLabel: CostPanelModel.CellLabel;

  /**
   * The costs the open notebooks hold in their cells' metadata (runs before
   * this page, or from elsewhere): listed as recorded, never as live.
   */
  readonly recordedCells: () => ICellCost[];

  /**
   * Where the budget's alerts go: read once, when the panel's view is first
   * attached.
   */
  readonly alerts: AlertsModel;

  get status(): IPart<IPanelStatus> {
    return this._status;
  }
  get kernels(): IPart<IKernelsAnswer> {
    return this._kernels;
  }
  get history(): IPart<IHistoryAnswer> {
    return this._history;
  }
  get cells(): IPart<ICellsAnswer> {
    return this._cells;
  }
  get exports(): IPart<IExportsPayload> {
    return this._exports;
  }

  /**
   * The history window shown; a change fetches at once.
   */
  get window(): HistoryWindow {
    return this._window;
  }
  set window(value: HistoryWindow) {
    if (value === this._window) {
      return;
    }
    this._window = value;
    this._history = { value: null, missing: false, error: null };
    this.stateChanged.emit();
    if (this._pushed()) {
      void this._fetchDetails(false);
    } else {
      void this._poll.refresh();
    }
  }

  /**
   * Whether the panel is on screen: the poll stands by while it is not.
   */
  get active(): boolean {
    return this._active;
  }
  set active(value: boolean) {
    if (value === this._active) {
      return;
    }
    this._active = value;
    if (!value) {
      return;
    }
    if (this._feed?.latest) {
      this._applyPanel(this._feed.latest);
    }
    if (this._pushed()) {
      void this._fetchDetails(true);
    } else {
      void this._poll.refresh();
    }
  }

  /**
   * The poll interval in seconds: the shared model's (the one fallback
   * interval) unless an override is set.
   */
  get intervalSeconds(): number {
    return this._poll.intervalSeconds;
  }
  set intervalSeconds(value: number) {
    this.intervalOverride = value;
  }

  /**
   * The panel's own interval (the deprecated panel setting), or `null` to
   * follow the shared model's.
   */
  get intervalOverride(): number | null {
    return this._override;
  }
  set intervalOverride(value: number | null) {
    this._override = value;
    this._followInterval();
  }

  /**
   * Poll at the override, else at the shared model's interval.
   */
  private _followInterval(): void {
    const value = this._override ?? this._cost?.intervalSeconds;
    if (
      value === undefined ||
      this.isDisposed ||
      !this._poll ||
      !this._poll.setInterval(value)
    ) {
      return;
    }
    void this._poll.refresh();
  }

  /**
   * Fetch every part once. Rejects (so the poll backs off) only when the
   * status itself cannot be read.
   */
  async fetch(): Promise<void> {
    const settings = this._serverSettings;
    const cost = this._cost;
    const [status, kernels, history, cells, exportJobs] = await Promise.all([
      cost
        ? Promise.resolve(this._fromCost(cost))
        : settle(requestStatus(settings) as Promise<IPanelStatus>),
      settle(
        requestJson(settings, KERNELS_ROUTE).then(
          withMoneyKeys
        ) as Promise<IKernelsAnswer>
      ),
      settle(
        requestJson(settings, HISTORY_ROUTE, {
          window: this._window
        }).then(withMoneyKeys) as Promise<IHistoryAnswer>
      ),
      settle(this._requestCells()),
      settle(requestJson(settings, EXPORTS_ROUTE) as Promise<IExportsPayload>)
    ]);
    if (this.isDisposed) {
      return;
    }
    this._status = merge(this._status, status);
    this._kernels = merge(this._kernels, kernels);
    this._history = merge(this._history, history);
    this._fetchedCells = cells.value ?? this._fetchedCells;
    this._cells = merge(this._cells, cells);
    this._exports = merge(this._exports, exportJobs);
    this.stateChanged.emit();
    if (status.error !== null) {
      throw new Error(status.error);
    }
  }

  /**
   * Set (a number) or remove (`null`) the user's soft budget; resolves to the
   * server's message when it refuses, else `null`.
   */
  async setSoftBudget(
    amount: number | null,
    scope: string
  ): Promise<string | null> {
    if (this._cost) {
      // the shared model is the one writer of the soft budget
      try {
        await this._cost.setSoftBudget(amount, scope);
      } catch (reason) {
        return reason instanceof Error ? reason.message : String(reason);
      }
      return null;
    }
    try {
      await setSoftBudget(this._serverSettings, amount, scope);
    } catch (reason) {
      return reason instanceof Error ? reason.message : String(reason);
    }
    await this.refresh();
    return null;
  }

  /**
   * Refresh now, and resolve once the poll has ticked.
   */
  async refresh(): Promise<void> {
    await this._poll.refresh();
    await this._poll.tick;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._cost?.stateChanged.disconnect(this._onCost, this);
    this._feed?.changed.disconnect(this._onPanel, this);
    this._poll.dispose();
    this.alerts.dispose();
    super.dispose();
  }

  private _onAlerts(): void {
    if (!this.isDisposed) {
      this.stateChanged.emit();
    }
  }

  /**
   * Whether the panel's live parts are pushed (no poll is needed).
   */
  private _pushed(): boolean {
    return this._feed?.live ?? false;
  }

  private _requestCells(): Promise<ICellsAnswer> {
    return requestJson(this._serverSettings, CELLS_ROUTE, {
      limit: String(CELLS_LISTED)
    }) as Promise<ICellsAnswer>;
  }

  /**
   * Ask for what the pushes do not carry: the history window, and (`cells`)
   * earlier sessions' cells.
   */
  private async _fetchDetails(cells: boolean): Promise<void> {
    const settings = this._serverSettings;
    const window = this._window;
    const [history, found] = await Promise.all([
      settle(
        requestJson(settings, HISTORY_ROUTE, {
          window
        }).then(withMoneyKeys) as Promise<IHistoryAnswer>
      ),
      cells ? settle(this._requestCells()) : Promise.resolve(null)
    ]);
    if (this.isDisposed || window !== this._window) {
      return;
    }
    this._history = merge(this._history, history);
    if (found !== null) {
      this._fetchedCells = found.value ?? this._fetchedCells;
      if (found.value === null) {
        this._cells = merge(this._cells, found);
      }
    }
    if (this._feed?.latest) {
      this._applyPanel(this._feed.latest);
    }
    this.stateChanged.emit();
  }

  /**
   * A panel event: the kernels, cells and exports it carries, and its point
   * added to the chart.
   */
  private _onPanel(_: PanelFeed, live: IPanelLive): void {
    if (this.isDisposed || !this._active) {
      return;
    }
    this._applyPanel(live);
    this.stateChanged.emit();
  }

  private _applyPanel(live: IPanelLive): void {
    this._kernels = { value: live.kernels, missing: false, error: null };
    if (live.exports !== null) {
      this._exports = { value: live.exports, missing: false, error: null };
    }
    if (!this._cells.missing) {
      this._cells = {
        value: mergeCells(live.cells, this._fetchedCells, CELLS_LISTED),
        missing: false,
        error: null
      };
    }
    const history = this._history.value;
    if (history && live.point) {
      const next = withNewestPoint(history, live.point);
      if (next !== null) {
        this._history = { ...this._history, value: next };
      } else if (
        this._active &&
        !this._historyPending &&
        historyDue(history, live.point)
      ) {
        this._historyPending = true;
        void this._fetchDetails(false).finally(() => {
          this._historyPending = false;
        });
      }
    }
  }

  /**
   * The shared model changed: show its status now.
   */
  private _onCost(): void {
    if (this._cost && !this.isDisposed) {
      this._followInterval();
      this._status = merge(this._status, this._fromCost(this._cost));
      this.stateChanged.emit();
    }
  }

  /**
   * The shared model's status as one of the panel's parts.
   */
  private _fromCost(cost: IGpuCostModel): IOutcome<IPanelStatus> {
    if (cost.missing) {
      return { value: null, missing: true, error: null };
    }
    if (cost.error !== null) {
      return { value: null, missing: false, error: cost.error };
    }
    return {
      value: cost.status as IPanelStatus | null,
      missing: false,
      error: null
    };
  }

  /**
   * The server connection settings the panel's requests use.
   */
  get serverSettings(): ServerConnection.ISettings {
    return this._serverSettings;
  }

  private _serverSettings: ServerConnection.ISettings;
  private _cost: IGpuCostModel | null;
  private _feed: PanelFeed | null;
  private _fetchedCells: ICellsAnswer | null = null;
  private _historyPending = false;
  private _poll: FallbackPoll<void>;
  private _override: number | null;
  private _active: boolean;
  private _window: HistoryWindow = '1h';
  private _status: IPart<IPanelStatus> = empty();
  private _kernels: IPart<IKernelsAnswer> = empty();
  private _history: IPart<IHistoryAnswer> = empty();
  private _cells: IPart<ICellsAnswer> = empty();
  private _exports: IPart<IExportsPayload> = empty();
}

/**
 * A namespace for `CostPanelModel` statics.
 */
export namespace CostPanelModel {
  /**
   * A cell's name for people (`cell 3`, with its first line of code), from
   * its notebook's path and its id; `null` when the notebook is not open.
   */
  export type CellLabel = (
    notebookPath: string | null,
    cellId: string
  ) => { name: string; title: string } | null;

  export interface IOptions {
    serverSettings?: ServerConnection.ISettings;
    /** The shared cost model: the status and the budget come from it. */
    cost?: IGpuCostModel;
    /** The page's panel events: the live parts are pushed, not polled. */
    feed?: PanelFeed;
    /** Whether the panel is on screen at first (default `true`). */
    active?: boolean;
    /** How a recent cell is named (its place in its open notebook). */
    cellLabel?: CellLabel;
    /** The recorded costs of the open notebooks' cells. */
    recordedCells?: () => ICellCost[];
    /** The panel's own interval; unset, it follows the shared model's. */
    intervalSeconds?: number;
    autoStart?: boolean;
  }
}

/**
 * The outcome of one request.
 */
interface IOutcome<T> {
  value: T | null;
  missing: boolean;
  error: string | null;
}

function empty<T>(): IPart<T> {
  return { value: null, missing: false, error: null };
}

async function settle<T>(request: Promise<T>): Promise<IOutcome<T>> {
  try {
    return { value: await request, missing: false, error: null };
  } catch (reason) {
    if (reason instanceof GpuCostRequestError && reason.kind === 'missing') {
      return { value: null, missing: true, error: null };
    }
    return {
      value: null,
      missing: false,
      error: reason instanceof Error ? reason.message : String(reason)
    };
  }
}

/**
 * The new state of a part: a failed request keeps the last good value (it is
 * then shown with the error); a 404 clears it.
 */
function merge<T>(previous: IPart<T>, outcome: IOutcome<T>): IPart<T> {
  if (outcome.error !== null) {
    return { value: previous.value, missing: false, error: outcome.error };
  }
  return outcome;
}
