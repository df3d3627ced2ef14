import { TranslationBundle } from '@jupyterlab/translation';

import { IBudgetStatus } from '../budget/tokens';
import { formatRate } from '../format';
import type { IMachine, IWithMachine } from './tokens';

export type { IMachine, IWithMachine } from './tokens';

/**
 * The machine in a status, `null` when none was detected.
 */
export function machineOf(status: IWithMachine | null): IMachine | null {
  return status?.machine ?? null;
}

/**
 * `g5.xlarge, spot, us-east-1 (detected)`.
 */
export function machineLabel(
  machine: IMachine,
  trans: TranslationBundle
): string {
  const parts = [
    machine.instance_type ?? machine.provider,
    machine.market,
    machine.region
  ].filter((p): p is string => !!p);
  return trans.__('%1 (detected)', parts.join(', '));
}

/**
 * How the machine is priced: whole from its catalog row, or per GPU (said so).
 */
export function machinePricing(
  machine: IMachine,
  symbol: string,
  trans: TranslationBundle
): string {
  if (
    machine.priced === 'instance' &&
    machine.instance_price_per_hour !== null &&
    machine.instance_price_basis === 'upper-bound'
  ) {
    return trans.__(
      'priced as a whole instance at an upper bound: %1 (%2)',
      formatRate(machine.instance_price_per_hour, symbol, trans),
      machine.price_note ?? ''
    );
  }
  if (
    machine.priced === 'instance' &&
    machine.instance_price_per_hour !== null &&
    machine.instance_price_basis === 'billed' &&
    machine.instance_price_label
  ) {
    return trans.__(
      'priced as a whole instance: %1 (%2)',
      formatRate(machine.instance_price_per_hour, symbol, trans),
      machine.instance_price_label
    );
  }
  if (
    machine.priced === 'instance' &&
    machine.instance_price_per_hour !== null
  ) {
    return trans.__(
      'priced as a whole instance: %1',
      formatRate(machine.instance_price_per_hour, symbol, trans)
    );
  }
  return trans.__('no whole-instance price for it: per-GPU prices');
}

/**
 * The tooltip's and the panel's line: `Machine: g5.xlarge, spot, us-east-1
 * (detected); priced as a whole instance: $1.01/h`.
 */
export function machineLine(
  status: IWithMachine | null,
  symbol: string,
  trans: TranslationBundle
): string | null {
  const machine = machineOf(status);
  if (machine === null) {
    return null;
  }
  return trans.__(
    'Machine: %1; %2',
    machineLabel(machine, trans),
    machinePricing(machine, symbol, trans)
  );
}

/**
 * What the machine still costs per hour after the last budget action (`null`:
 * nothing, or no action was taken).
 */
export function stillCosts(budget: IBudgetStatus | null): number | null {
  if (budget === null || budget.state !== 'acted') {
    return null;
  }
  const still = budget.last_action?.still_per_hour;
  return typeof still === 'number' && still > 0 ? still : null;
}

/**
 * `this machine still costs $6.86/h`.
 */
export function stillCostsText(
  ratePerHour: number,
  symbol: string,
  trans: TranslationBundle
): string {
  return trans.__(
    'this machine still costs %1',
    formatRate(ratePerHour, symbol, trans)
  );
}
