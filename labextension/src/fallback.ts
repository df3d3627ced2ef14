import { IPoll, Poll } from '@lumino/polling';

/**
 * The default, lowest and highest fallback poll interval, in seconds (as in
 * the settings schemas).
 */
export const DEFAULT_INTERVAL_S = 2;
export const MIN_INTERVAL_S = 1;
export const MAX_INTERVAL_S = 3600;

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

/**
 * The one fallback poll of the front end: what asks the server while its
 * pushes do not arrive (the shared cost model's status, the open panel's
 * parts), every `intervalSeconds` (clamped to 1–3600), backing off after
 * failures.
 */
export class FallbackPoll<T> extends Poll<T> {
  constructor(options: FallbackPoll.IOptions<T>) {
    const seconds = clampInterval(
      options.intervalSeconds ?? DEFAULT_INTERVAL_S
    );
    super({
      auto: options.auto,
      factory: options.factory,
      frequency: pollFrequency(seconds),
      name: options.name,
      standby: options.standby
    });
    this._seconds = seconds;
  }

  /**
   * The interval in seconds.
   */
  get intervalSeconds(): number {
    return this._seconds;
  }

  /**
   * Set the interval (clamped); `false` when it is unchanged (or the poll is
   * disposed), so the caller knows whether to reschedule.
   */
  setInterval(value: number): boolean {
    const seconds = clampInterval(value);
    if (seconds === this._seconds || this.isDisposed) {
      return false;
    }
    this._seconds = seconds;
    this.frequency = pollFrequency(seconds);
    return true;
  }

  private _seconds: number;
}

/**
 * A namespace for `FallbackPoll` statics.
 */
export namespace FallbackPoll {
  /**
   * Options of a `FallbackPoll`.
   */
  export interface IOptions<T> {
    /** What each tick asks the server. */
    factory: () => Promise<T>;
    /** The poll's name (for debugging). */
    name: string;
    /** The interval in seconds (default 2, clamped to 1–3600). */
    intervalSeconds?: number;
    /** Start at once (default `true`). */
    auto?: boolean;
    /** When the poll stands by. */
    standby?: Poll.Standby | (() => boolean | Poll.Standby);
  }
}
