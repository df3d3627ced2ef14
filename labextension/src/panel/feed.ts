import { Event } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { IExportsPayload } from '../export/request';
import { DEFAULT_HEARTBEAT_S } from '../model';
import {
  ICellCost,
  ICellsAnswer,
  IHistoryAnswer,
  IHistoryPoint,
  IKernelsAnswer
} from './types';
import { withMoneyKeys } from '../money-keys';

/**
 * The `$id` of the panel events' schema: the server pushes the panel's live
 * parts (kernels, this session's newest cells, exports, the chart's newest
 * point) the way it pushes the status.
 */
export const PANEL_EVENT_SCHEMA = 'https://events.jupyter-gpucost.org/panel/v1';

/**
 * The live parts of the panel, as the server pushes them.
 */
export interface IPanelLive {
  kernels: IKernelsAnswer;
  /** This session's newest cells, newest first. */
  cells: ICellCost[];
  /** `null`: the server runs no export manager. */
  exports: IExportsPayload | null;
  /** The newest point of the history's 5-second step, or `null`. */
  point: IHistoryPoint | null;
}

/**
 * The panel events of one page, kept from the page's load so that a panel
 * opened later shows the kernels and exports at once. One per page.
 */
export class PanelFeed {
  constructor(events: Event.IManager | null) {
    this._events = events;
    events?.stream.connect(this._onEvent, this);
  }

  /**
   * The last live parts pushed, or `null`.
   */
  get latest(): IPanelLive | null {
    return this._latest;
  }

  /**
   * Whether the pushes are arriving: one came within the server's heartbeat
   * plus two intervals. Otherwise the panel polls.
   */
  get live(): boolean {
    return (
      this._receivedAt !== null &&
      Date.now() - this._receivedAt <= this._patienceS * 1000
    );
  }

  /**
   * Emitted for every panel event.
   */
  get changed(): ISignal<this, IPanelLive> {
    return this._changed;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._events?.stream.disconnect(this._onEvent, this);
    Signal.clearData(this);
  }

  private _onEvent(_: unknown, emission: Event.Emission): void {
    if (emission.schema_id !== PANEL_EVENT_SCHEMA) {
      return;
    }
    const live = parsePanel(emission.panel);
    if (live === null) {
      return;
    }
    const heartbeat = Number(emission.heartbeat_s);
    const interval = Number(emission.interval_s);
    this._patienceS =
      (Number.isFinite(heartbeat) ? heartbeat : DEFAULT_HEARTBEAT_S) +
      2 * (Number.isFinite(interval) ? interval : 1) +
      1;
    this._latest = live;
    this._receivedAt = Date.now();
    this._changed.emit(live);
  }

  private _events: Event.IManager | null;
  private _latest: IPanelLive | null = null;
  private _receivedAt: number | null = null;
  private _patienceS = DEFAULT_HEARTBEAT_S + 3;
  private _disposed = false;
  private _changed = new Signal<this, IPanelLive>(this);
}

/**
 * The panel event's document, or `null` when it is not one.
 */
export function parsePanel(value: unknown): IPanelLive | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const v = withMoneyKeys(value) as Partial<IPanelLive>;
  if (
    typeof v.kernels !== 'object' ||
    v.kernels === null ||
    !Array.isArray(v.kernels.kernels) ||
    !Array.isArray(v.cells)
  ) {
    return null;
  }
  return {
    kernels: v.kernels,
    cells: v.cells,
    exports: v.exports ?? null,
    point: v.point ?? null
  };
}

/**
 * The cells to list: this session's newest (pushed) first, then the earlier
 * ones a request found, without repeats, at most `limit`.
 */
export function mergeCells(
  pushed: ICellCost[],
  fetched: ICellsAnswer | null,
  limit: number
): ICellsAnswer {
  const key = (c: ICellCost): string => `${c.cell_id}\u0000${c.ended}`;
  const seen = new Set(pushed.map(key));
  const rest = (fetched?.cells ?? []).filter(c => !seen.has(key(c)));
  return {
    ...(fetched ?? {}),
    cells: [...pushed, ...rest]
      .sort((a, b) => Date.parse(b.ended) - Date.parse(a.ended))
      .slice(0, limit)
  };
}

/**
 * The history with the pushed newest point: a point within one step of the
 * last one replaces it, a later one is added, and points that left the window
 * are dropped. `null`: the window's step is coarser than the pushed point's,
 * so the history must be asked for again once a step has passed (see
 * `historyDue`).
 */
export function withNewestPoint(
  history: IHistoryAnswer,
  point: IHistoryPoint
): IHistoryAnswer | null {
  if (history.step_s > PUSHED_STEP_S) {
    return null;
  }
  const t = Date.parse(point.t);
  if (!Number.isFinite(t)) {
    return history;
  }
  const points = history.points.slice();
  const last = points[points.length - 1];
  const lastT = last ? Date.parse(last.t) : NaN;
  if (Number.isFinite(lastT) && t <= lastT) {
    return history;
  }
  if (Number.isFinite(lastT) && t - lastT < history.step_s * 1000) {
    points[points.length - 1] = point;
  } else {
    points.push(point);
  }
  const start = t - history.window_s * 1000;
  return {
    ...history,
    start: new Date(start).toISOString(),
    end: point.t,
    points: points.filter(p => Date.parse(p.t) >= start)
  };
}

/**
 * Whether a window coarser than the pushed step has a new step to show: its
 * last point is a whole step older than the pushed one.
 */
export function historyDue(
  history: IHistoryAnswer,
  point: IHistoryPoint
): boolean {
  const last = history.points[history.points.length - 1];
  const end = Date.parse(last ? last.t : history.end);
  const t = Date.parse(point.t);
  return (
    Number.isFinite(end) &&
    Number.isFinite(t) &&
    t - end >= history.step_s * 1000
  );
}

/**
 * The step of the pushed point, in seconds.
 */
export const PUSHED_STEP_S = 5;
