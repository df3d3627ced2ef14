import { VDomModel } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { IPoll, Poll } from '@lumino/polling';

import { deriveState } from './format';
import { GpuCostRequestError, requestStatus } from './request';
import { GpuCostState, IGpuCostSnapshot, IGpuCostStatus } from './tokens';

/**
 * The default, lowest and highest poll interval, in seconds (as in the
 * settings schema).
 */
export const DEFAULT_INTERVAL_S = 2;
export const MIN_INTERVAL_S = 1;
export const MAX_INTERVAL_S = 3600;

/**
 * The live cost of the session, refreshed by a poll.
 *
 * A failed request rejects the poll's factory so the poll backs off; the
 * last good status is kept (and shown as stale). The poll stands by while
 * the page is hidden.
 */
export class GpuCostModel extends VDomModel implements IGpuCostSnapshot {
  constructor(options: GpuCostModel.IOptions = {}) {
    super();
    this._serverSettings =
      options.serverSettings ?? ServerConnection.makeSettings();
    this._intervalS = clampInterval(
      options.intervalSeconds ?? DEFAULT_INTERVAL_S
    );
    this._poll = new Poll<IGpuCostStatus>({
      auto: options.autoStart ?? true,
      factory: () => this.fetch(),
      frequency: pollFrequency(this._intervalS),
      name: 'jupyter-gpucost:status',
      standby: options.standby ?? 'when-hidden'
    });
  }

  /**
   * The last status received, kept through errors.
   */
  get status(): IGpuCostStatus | null {
    return this._status;
  }

  /**
   * When `status` was received (ms since the epoch).
   */
  get receivedAt(): number | null {
    return this._receivedAt;
  }

  /**
   * Whether the server answered 404 (server extension not enabled).
   */
  get missing(): boolean {
    return this._missing;
  }

  /**
   * Why the last request failed, or `null`.
   */
  get error(): string | null {
    return this._error;
  }

  /**
   * The state the status bar item shows.
   */
  get state(): GpuCostState {
    return deriveState(this);
  }

  /**
   * The poll that refreshes the model.
   */
  get poll(): Poll<IGpuCostStatus> {
    return this._poll;
  }

  /**
   * The poll interval in seconds; a change applies at once.
   */
  get intervalSeconds(): number {
    return this._intervalS;
  }
  set intervalSeconds(value: number) {
    const interval = clampInterval(value);
    if (interval === this._intervalS || this.isDisposed) {
      return;
    }
    this._intervalS = interval;
    this._poll.frequency = pollFrequency(interval);
    // Reschedule now: the pending tick still runs on the old interval.
    void this._poll.refresh();
  }

  /**
   * Request the status once and update the model.
   *
   * @returns the status; rejects when the request fails, after recording
   * the failure (this is what makes the poll back off).
   */
  async fetch(): Promise<IGpuCostStatus> {
    try {
      const status = await requestStatus(this._serverSettings);
      if (this.isDisposed) {
        return status;
      }
      this._status = status;
      this._receivedAt = Date.now();
      this._missing = false;
      this._error = null;
      this.stateChanged.emit();
      return status;
    } catch (reason) {
      if (!this.isDisposed) {
        if (
          reason instanceof GpuCostRequestError &&
          reason.kind === 'missing'
        ) {
          this._missing = true;
          this._status = null;
          this._receivedAt = null;
          this._error = null;
        } else {
          this._missing = false;
          this._error =
            reason instanceof Error ? reason.message : String(reason);
        }
        this.stateChanged.emit();
      }
      throw reason;
    }
  }

  /**
   * Refresh now, and resolve once the poll has ticked.
   */
  async refresh(): Promise<void> {
    await this._poll.refresh();
    await this._poll.tick;
  }

  /**
   * Stop polling and release the model.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    super.dispose();
  }

  private _serverSettings: ServerConnection.ISettings;
  private _poll: Poll<IGpuCostStatus>;
  private _intervalS: number;
  private _status: IGpuCostStatus | null = null;
  private _receivedAt: number | null = null;
  private _missing = false;
  private _error: string | null = null;
}

/**
 * A namespace for `GpuCostModel` statics.
 */
export namespace GpuCostModel {
  /**
   * Options of a `GpuCostModel`.
   */
  export interface IOptions {
    /** The server connection settings; the app's `serverSettings`. */
    serverSettings?: ServerConnection.ISettings;
    /** The poll interval in seconds (default 2, clamped to 1–3600). */
    intervalSeconds?: number;
    /** Start polling at once (default `true`). */
    autoStart?: boolean;
    /** When the poll stands by (default `'when-hidden'`). */
    standby?: Poll.Standby | (() => boolean | Poll.Standby);
  }
}

/**
 * A valid poll interval in seconds (non-finite: the default).
 */
export function clampInterval(seconds: number): number {
  if (!Number.isFinite(seconds)) {
    return DEFAULT_INTERVAL_S;
  }
  return Math.min(MAX_INTERVAL_S, Math.max(MIN_INTERVAL_S, seconds));
}

/**
 * Poll every `seconds`; after failures, back off up to ten intervals (at
 * least a minute).
 */
export function pollFrequency(seconds: number): IPoll.Frequency {
  const interval = Math.round(seconds * 1000);
  return {
    backoff: true,
    interval,
    max: Math.max(10 * interval, 60 * 1000)
  };
}
