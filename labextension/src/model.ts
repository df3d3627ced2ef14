import { VDomModel } from '@jupyterlab/apputils';
import { Event, ServerConnection } from '@jupyterlab/services';
import { UUID } from '@lumino/coreutils';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { setSoftBudget } from './budget/request';
import {
  BUDGET_EVENT_SCHEMA,
  IBudgetEvent,
  IBudgetStatus
} from './budget/tokens';
import { deriveState } from './display';
import { FallbackPoll } from './fallback';
import { GpuCostRequestError, parseStatus, requestStatus } from './request';
import {
  GpuCostState,
  GpuCostTransport,
  IGpuCostModel,
  IGpuCostSnapshot,
  IGpuCostStatus
} from './tokens';
import { withMoneyKeys } from './money-keys';

/**
 * The `$id` of the status events' schema (the server pushes the status).
 */
export const STATUS_EVENT_SCHEMA =
  'https://events.jupyter-gpucost.org/status/v1';

/**
 * The server sends the status at least this often (seconds) while it runs;
 * the model waits this long for the first push before it polls.
 */
export const DEFAULT_HEARTBEAT_S = 10;

/**
 * The live cost of the session: pushed by the server, polled only while the
 * push does not arrive.
 *
 * With an event manager (`app.serviceManager.events`), the model fetches the
 * status once at load, then takes every status the server pushes on its event
 * bus. When no push has arrived for longer than the server's heartbeat (the
 * event socket is down), it polls, with backoff after failures and standing by
 * while the page is hidden, until pushes arrive again. Without an event
 * manager it polls.
 *
 * A failed request rejects the poll's factory so the poll backs off; the
 * last good status is kept (and shown as stale).
 */
export class GpuCostModel
  extends VDomModel
  implements IGpuCostSnapshot, IGpuCostModel
{
  constructor(options: GpuCostModel.IOptions = {}) {
    super();
    this._serverSettings =
      options.serverSettings ?? ServerConnection.makeSettings();
    this._events = options.events ?? null;
    this._poll = new FallbackPoll<IGpuCostStatus>({
      auto: false,
      factory: () => this.fetch(),
      intervalSeconds: options.intervalSeconds,
      name: 'jupyter-gpucost:status',
      standby: options.standby ?? 'when-hidden'
    });
    const autoStart = options.autoStart ?? true;
    if (this._events) {
      this._events.stream.connect(this._onEvent, this);
      if (autoStart) {
        // one fetch at load; then the pushes, or the poll if none arrives
        void this.fetch({ named: false }).catch(() => undefined);
        this._armWatchdog(DEFAULT_HEARTBEAT_S);
      }
    } else if (autoStart) {
      void this._poll.start();
    }
  }

  /**
   * Emitted for every budget event the server pushes.
   */
  get budgetEvent(): ISignal<this, IBudgetEvent> {
    return this._budgetEvent;
  }

  /**
   * The budget from the last status, or `null`.
   */
  get budget(): IBudgetStatus | null {
    return this._status?.budget ?? null;
  }

  /**
   * Pushed, polled (event socket down) or loading.
   */
  get transport(): GpuCostTransport {
    if (this._pushedAt !== null && !this._polling) {
      return 'push';
    }
    return this._polling ? 'poll' : 'loading';
  }

  /**
   * Set (a number) or remove (`null`) the soft budget on the server; the
   * one writer of it in the front end.
   */
  async setSoftBudget(
    amount: number | null,
    scope: string
  ): Promise<IBudgetStatus> {
    const budget = await setSoftBudget(this._serverSettings, amount, scope);
    if (!this.isDisposed && this._status) {
      this._status = { ...this._status, budget };
      this.stateChanged.emit();
    }
    return budget;
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
    return this._poll.intervalSeconds;
  }
  set intervalSeconds(value: number) {
    if (this.isDisposed || !this._poll.setInterval(value)) {
      return;
    }
    // the panel follows this interval
    this.stateChanged.emit();
    if (this._events && !this._polling) {
      // pushed: the poll stays stopped
      return;
    }
    // Reschedule now: the pending tick still runs on the old interval.
    void this._poll.refresh();
  }

  /**
   * Request the status once and update the model.
   *
   * @returns the status; rejects when the request fails, after recording
   * the failure (this is what makes the poll back off).
   */
  async fetch(options: { named?: boolean } = {}): Promise<IGpuCostStatus> {
    try {
      // a polling page names itself: the server then asks it to save before a
      // budget action (a listening page is counted on the event bus instead)
      const status = await requestStatus(
        this._serverSettings,
        options.named === false ? undefined : { client: this.client }
      );
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
    if (this._events && !this._polling) {
      // pushed: one request, the poll stays stopped
      await this.fetch({ named: false }).catch(() => undefined);
      return;
    }
    await this._poll.refresh();
    await this._poll.tick;
  }

  /**
   * Stop polling and listening, and release the model.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearTimeout(this._watchdog);
    this._events?.stream.disconnect(this._onEvent, this);
    this._poll.dispose();
    Signal.clearData(this);
    super.dispose();
  }

  /**
   * This page's id: the server asks it to save before a budget action.
   */
  readonly client = UUID.uuid4();

  /**
   * An event from the server's event bus.
   */
  private _onEvent(_: unknown, emission: Event.Emission): void {
    if (this.isDisposed) {
      return;
    }
    if (emission.schema_id === BUDGET_EVENT_SCHEMA) {
      this._budgetEvent.emit(
        withMoneyKeys(emission as unknown as IBudgetEvent)
      );
      if (this._polling) {
        void this._poll.refresh();
      }
      return;
    }
    if (emission.schema_id !== STATUS_EVENT_SCHEMA) {
      return;
    }
    const status = parseStatus(emission.status);
    if (status === null) {
      return;
    }
    const heartbeat = Number(emission.heartbeat_s);
    const interval = Number(emission.interval_s);
    this._status = status;
    this._receivedAt = Date.now();
    this._pushedAt = this._receivedAt;
    this._missing = false;
    this._error = null;
    if (this._polling) {
      this._polling = false;
      void this._poll.stop();
    }
    this._armWatchdog(
      (Number.isFinite(heartbeat) ? heartbeat : DEFAULT_HEARTBEAT_S) +
        2 * (Number.isFinite(interval) ? interval : 1) +
        1
    );
    this.stateChanged.emit();
  }

  /**
   * Poll when no push arrives within `seconds`.
   */
  private _armWatchdog(seconds: number): void {
    window.clearTimeout(this._watchdog);
    this._watchdog = window.setTimeout(() => {
      if (this.isDisposed || this._polling) {
        return;
      }
      this._polling = true;
      this.stateChanged.emit();
      void this._poll.start();
    }, seconds * 1000);
  }

  private _serverSettings: ServerConnection.ISettings;
  private _events: Event.IManager | null;
  private _budgetEvent = new Signal<this, IBudgetEvent>(this);
  private _watchdog = 0;
  private _polling = false;
  private _pushedAt: number | null = null;
  private _poll: FallbackPoll<IGpuCostStatus>;
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
    /**
     * The server's event bus (`app.serviceManager.events`): the status is
     * pushed there, and polled only while no push arrives. Without it, the
     * model polls.
     */
    events?: Event.IManager;
    /** The (fallback) poll interval in seconds (default 2, clamped to 1–3600). */
    intervalSeconds?: number;
    /** Start polling at once (default `true`). */
    autoStart?: boolean;
    /** When the poll stands by (default `'when-hidden'`). */
    standby?: Poll.Standby | (() => boolean | Poll.Standby);
  }
}
