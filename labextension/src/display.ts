import { TranslationBundle } from '@jupyterlab/translation';

import { formatLocalTime } from './budget/format';
import { currencySymbol, formatMoney, formatRate } from './format';
import { machineLine } from './machine/format';
import {
  GpuCostState,
  IGpuCostDevice,
  IGpuCostSnapshot,
  IGpuCostStatus
} from './tokens';

/*
 * What the status items (the status bar's and the top bar's) show for a
 * status: the state, the text, the tooltip.
 */

/**
 * The warning code of a GPU the catalog has no price for.
 */
export const UNPRICED_WARNING = 'unpriced-gpu';

/**
 * GPUs of one model, priced or not.
 */
export interface IGpuGroup {
  /** The catalog model, or the driver's name when the model is unknown. */
  readonly label: string;
  readonly count: number;
  readonly priced: boolean;
}

/**
 * Group GPUs by model (priced and unpriced apart), in order of first index.
 */
export function groupGpus(gpus: readonly IGpuCostDevice[]): IGpuGroup[] {
  const groups = new Map<
    string,
    { label: string; count: number; priced: boolean }
  >();
  for (const gpu of gpus) {
    const label = gpu.model || gpu.name || `GPU ${gpu.index}`;
    const key = `${gpu.priced ? 'p' : 'u'}:${label}`;
    const group = groups.get(key);
    if (group) {
      group.count += 1;
    } else {
      groups.set(key, { label, count: 1, priced: gpu.priced });
    }
  }
  return Array.from(groups.values());
}

/**
 * `2× A100-80GB, 1× H100-80GB`.
 */
export function formatGroups(groups: readonly IGpuGroup[]): string {
  return groups.map(group => `${group.count}× ${group.label}`).join(', ');
}

/**
 * The part of a status (the status bar's or the panel's) that says how it is
 * priced.
 */
export type IPricedStatus = Pick<
  IGpuCostStatus,
  'gpus' | 'price_basis' | 'price_basis_reasons'
>;

/**
 * Whether the rate is an upper bound (some GPU has no price that fits).
 */
export function isUpperBound(status: IPricedStatus): boolean {
  return (
    status.price_basis === 'upper-bound' ||
    status.gpus.some(gpu => gpu.price_basis === 'upper-bound')
  );
}

/**
 * `Upper bound: spot: priced at on-demand, the most it can cost.`, or `null`
 * when the rate is not one.
 */
export function upperBoundText(
  status: IPricedStatus,
  trans: TranslationBundle
): string | null {
  if (!isUpperBound(status)) {
    return null;
  }
  const reasons = status.price_basis_reasons ?? [];
  return reasons.length > 0
    ? trans.__('Upper bound: %1.', reasons.join('; '))
    : trans.__('Upper bound: no price fits, priced at the most it can cost.');
}

/**
 * Whether some GPU of the session has no price.
 */
export function hasUnpricedGpu(status: IGpuCostStatus): boolean {
  return (
    status.gpus.some(gpu => !gpu.priced) ||
    status.warnings.some(warning => warning.code === UNPRICED_WARNING)
  );
}

/**
 * The state of the status bar item, in order of precedence.
 */
export function deriveState(snapshot: IGpuCostSnapshot): GpuCostState {
  if (snapshot.missing) {
    return 'missing';
  }
  if (snapshot.error !== null) {
    return 'error';
  }
  const status = snapshot.status;
  if (status === null) {
    return 'loading';
  }
  // no GPU seen: the cost unknown, or the machine priced whole from its instance
  if (status.metering?.state === 'unknown') {
    return 'unknown';
  }
  if (status.metering?.state === 'instance') {
    return 'instance';
  }
  if (!status.telemetry.available) {
    return 'no-telemetry';
  }
  if (hasUnpricedGpu(status)) {
    return 'unpriced';
  }
  if (status.telemetry.simulated) {
    return 'simulated';
  }
  return 'ok';
}

/**
 * Everything the status bar item shows, derived from a snapshot.
 */
export interface IStatusDisplay {
  readonly state: GpuCostState;
  /** A message shown instead of the cost (no cost known), or `null`. */
  readonly message: string | null;
  /** `$1.23`, or `null` with a message. */
  readonly cost: string | null;
  /** `$6.86/h`, or `null` with a message. */
  readonly rate: string | null;
  /** Show the ⚠ marker (unpriced GPUs or other server warnings). */
  readonly warning: boolean;
  /** Show ` · simulated`. */
  readonly simulated: boolean;
  /** Show ` · no GPU telemetry`. */
  readonly noTelemetry: boolean;
  /**
   * No GPU seen, the machine priced whole: ` · p5.48xlarge, priced whole`;
   * `null` otherwise.
   */
  readonly wholeInstance: string | null;
  /** The cost is the last good value; the last request failed. */
  readonly stale: boolean;
  /** The tooltip: sentences, then one line per warning. */
  readonly title: string;
}

/**
 * Derive what the status bar item shows.
 */
export function describe(
  snapshot: IGpuCostSnapshot,
  trans: TranslationBundle
): IStatusDisplay {
  const state = deriveState(snapshot);
  const status = snapshot.missing ? null : snapshot.status;
  const base = {
    state,
    cost: null,
    rate: null,
    warning: false,
    simulated: false,
    noTelemetry: false,
    wholeInstance: null,
    stale: false
  };
  if (snapshot.missing) {
    return {
      ...base,
      message: trans.__('GPU cost: server extension not enabled'),
      title: trans.__(
        'The jupyter_gpucost server extension is not enabled on this Jupyter server (%1 answered 404). Enable it with "jupyter server extension enable jupyter_gpucost" and restart the server.',
        'gpucost/api/status'
      )
    };
  }
  if (status === null) {
    if (snapshot.error !== null) {
      return {
        ...base,
        message: trans.__('GPU cost: unavailable'),
        title: trans.__(
          'Could not get the cost of this session: %1. Retrying.',
          snapshot.error
        )
      };
    }
    return {
      ...base,
      message: trans.__('GPU cost: …'),
      title: trans.__('Waiting for the cost of this session…')
    };
  }
  const symbol = currencySymbol(status);
  const metering = status.metering;
  if (state === 'unknown' && metering) {
    // no GPU seen and nothing to price the machine by: a state, never $0
    return {
      ...base,
      message: trans.__('GPU cost unknown ⚠'),
      title: [
        metering.message ??
          trans.__('GPU cost unknown: %1', metering.reason ?? ''),
        ...status.warnings.map(warning => `⚠ ${warning.message}`)
      ].join('\n')
    };
  }
  const lines = [Private.summary(status, symbol, trans)];
  const machine = machineLine(status, symbol, trans);
  if (machine !== null) {
    lines.push(machine);
  }
  const bound = upperBoundText(status, trans);
  if (bound !== null) {
    lines.push(bound);
  }
  const minimum = Private.minimumCharge(status, trans);
  if (minimum !== null) {
    lines.push(minimum);
  }
  const unpriced = groupGpus(status.gpus).filter(group => !group.priced);
  if (unpriced.length > 0) {
    lines.push(
      trans.__('⚠ No price, not counted: %1.', formatGroups(unpriced))
    );
  }
  for (const warning of status.warnings) {
    lines.push(`⚠ ${warning.message}`);
  }
  const stale = snapshot.error !== null;
  if (stale) {
    const when =
      snapshot.receivedAt === null
        ? ''
        : formatLocalTime(
            new Date(snapshot.receivedAt).toISOString(),
            Date.now(),
            {
              seconds: true
            }
          );
    lines.push(
      trans.__(
        '⚠ Stale: showing the value from %1; the last request failed (%2). Retrying.',
        when,
        snapshot.error ?? ''
      )
    );
  }
  return {
    ...base,
    message: null,
    cost: formatMoney(status.cost, symbol),
    rate:
      bound === null
        ? formatRate(status.rate_per_hour, symbol, trans)
        : trans.__('≤ %1', formatRate(status.rate_per_hour, symbol, trans)),
    warning: unpriced.length > 0 || status.warnings.length > 0,
    simulated: status.telemetry.simulated,
    noTelemetry: !status.telemetry.available && state !== 'instance',
    wholeInstance:
      state === 'instance' && metering?.instance
        ? trans.__('%1, priced whole', metering.instance)
        : null,
    stale,
    title: lines.join('\n')
  };
}

/**
 * Module-private helpers.
 */
namespace Private {
  /**
   * Drop a trailing full stop, so a sentence can end with its own.
   */
  function sentence(text: string): string {
    return text.trim().replace(/\.+$/, '');
  }

  /**
   * `aws on-demand, prices as of 2026-01-21`, or `''` without a catalog.
   */
  function catalog(status: IGpuCostStatus, trans: TranslationBundle): string {
    const { provider, market, as_of: asOf } = status.prices;
    const name = [provider, market].filter(Boolean).join(' ');
    if (name && asOf) {
      return trans.__('%1, prices as of %2', name, asOf);
    }
    if (asOf) {
      return trans.__('prices as of %1', asOf);
    }
    return name;
  }

  /**
   * While the minimum charge is in force, why the amount does not move yet.
   */
  export function minimumCharge(
    status: IGpuCostStatus,
    trans: TranslationBundle
  ): string | null {
    const minimumS = status.billing?.minimum_charge_s ?? 0;
    if (minimumS <= 0 || status.elapsed_s >= minimumS) {
      return null;
    }
    return trans.__(
      'The provider bills at least %1 s per session: that is what the first %1 s cost, however short the session.',
      minimumS
    );
  }

  /**
   * The tooltip's first line.
   *
   * `This session has cost $1.23 on 2× A100-80GB (aws on-demand, prices as
   * of 2026-01-21). Idle: $0.40. Simulated telemetry.`
   */
  export function summary(
    status: IGpuCostStatus,
    symbol: string,
    trans: TranslationBundle
  ): string {
    const cost = formatMoney(status.cost, symbol);
    const priced = groupGpus(status.gpus).filter(group => group.priced);
    const source = catalog(status, trans);
    let first =
      priced.length > 0
        ? trans.__('This session has cost %1 on %2', cost, formatGroups(priced))
        : trans.__('This session has cost %1', cost);
    if (source) {
      first += ` (${source})`;
    }
    const parts = [`${first}.`];
    if (priced.length > 0) {
      parts.push(trans.__('Idle: %1.', formatMoney(status.idle_cost, symbol)));
    }
    if (status.base_price_per_hour > 0) {
      parts.push(
        trans.__(
          'Instance base price: %1 (%2 so far).',
          formatRate(status.base_price_per_hour, symbol, trans),
          formatMoney(status.base_cost, symbol)
        )
      );
    }
    const telemetry = status.telemetry;
    const reason = telemetry.reason ? sentence(telemetry.reason) : '';
    if (!telemetry.available) {
      parts.push(
        reason
          ? trans.__('No GPU telemetry: %1.', reason)
          : trans.__('No GPU telemetry.')
      );
    } else {
      if (telemetry.simulated) {
        parts.push(trans.__('Simulated telemetry.'));
      }
      if (reason) {
        parts.push(trans.__('Telemetry: %1.', reason));
      }
    }
    return parts.join(' ');
  }
}
