import { TranslationBundle } from '@jupyterlab/translation';

import { formatRateAmount } from '../format';
import { IGpuCostDevice } from '../tokens';
import { IPanelStatus } from './types';

/**
 * One price in force, as the Prices section leads with it: what is priced,
 * the amount per hour and its basis (`AWS list price, us-east-1, 2026-01-21`).
 */
export interface IPriceLine {
  /** A GPU model (`A100-80GB`) or an instance type (`p4de.24xlarge`). */
  key: string;
  /** `gpu` (per GPU-hour) or `instance` (per instance-hour). */
  per: 'gpu' | 'instance';
  /** The whole line: `A100-80GB: $3.43 per GPU-hour — AWS list price, …`. */
  text: string;
}

/**
 * The price lines of a status: the whole instance's first where it is priced
 * whole, then one per GPU model. A GPU with no price says it is not counted.
 */
export function priceLines(
  status: IPanelStatus,
  symbol: string,
  trans: TranslationBundle
): IPriceLine[] {
  const lines: IPriceLine[] = [];
  const machine = status.machine ?? null;
  if (
    machine &&
    machine.priced === 'instance' &&
    machine.instance_price_per_hour !== null
  ) {
    const key = machine.instance_type ?? providerName(machine.provider);
    const upper = machine.instance_price_basis === 'upper-bound';
    const billed = machine.instance_price_basis === 'billed';
    const reconciled = machine.instance_price_basis === 'reconciled';
    lines.push({
      key,
      per: 'instance',
      text: trans.__(
        '%1: %2 per instance-hour — %3',
        key,
        formatRateAmount(machine.instance_price_per_hour, symbol),
        basisText(
          {
            basis: upper
              ? 'upper-bound'
              : billed
                ? 'billed'
                : reconciled
                  ? 'reconciled'
                  : 'catalog',
            provider: machine.provider,
            market: machine.instance_price_market ?? machine.market,
            region: machine.instance_price_region ?? machine.region,
            asOf: machine.instance_price_as_of ?? null,
            label: machine.instance_price_label ?? null
          },
          trans
        )
      )
    });
  }
  const seen = new Set<string>();
  for (const gpu of status.gpus) {
    const key = gpu.model ?? gpu.name;
    if (seen.has(key)) {
      continue;
    }
    seen.add(key);
    const label = machine?.instance_price_label ?? null;
    lines.push({
      key,
      per: 'gpu',
      text: gpuLine(key, gpu, symbol, label, trans)
    });
  }
  return lines;
}

/**
 * The basis of a price in one phrase: `AWS list price, us-east-1,
 * 2026-01-21`, `AWS spot price, …`, `the administrator's price`, `upper bound`,
 * `your billed rate, us-east-1, 2026-11-26` (a reconciled bill's rate),
 * or the server's own label of a rate the provider bills (`billed rate from
 * Vast.ai, read 14:02 UTC`).
 */
export function basisText(
  price: {
    basis: string | null | undefined;
    provider: string | null | undefined;
    market: string | null | undefined;
    region: string | null | undefined;
    asOf: string | null | undefined;
    label?: string | null;
  },
  trans: TranslationBundle
): string {
  if (price.basis === 'billed' && price.label) {
    return price.label;
  }
  let kind: string;
  if (price.basis === 'override') {
    kind = trans.__("the administrator's price");
  } else if (price.basis === 'upper-bound') {
    kind = trans.__('upper bound: the most it can cost');
  } else if (price.basis === 'reconciled') {
    // c.GpuCost.use_billed_rate: the catalog's price at the rate a reconciled bill showed
    kind = trans.__('your billed rate');
  } else if (price.provider) {
    const name = providerName(price.provider);
    kind =
      price.market === 'spot'
        ? trans.__('%1 spot price', name)
        : trans.__('%1 list price', name);
  } else {
    kind = trans.__('catalog price');
  }
  const parts = [kind];
  if (price.region) {
    parts.push(price.region);
  }
  if (price.basis !== 'override') {
    parts.push(price.asOf ?? trans.__('undated'));
  }
  return parts.join(trans.__(', '));
}

/**
 * A provider as people write it: `aws` is `AWS`.
 */
export function providerName(provider: string): string {
  return Private.NAMES[provider.toLowerCase()] ?? provider;
}

function gpuLine(
  key: string,
  gpu: IGpuCostDevice,
  symbol: string,
  billedLabel: string | null,
  trans: TranslationBundle
): string {
  if (!gpu.priced || gpu.price_per_hour === null) {
    return trans.__('%1: no price in the catalog: not counted', key);
  }
  return trans.__(
    '%1: %2 per GPU-hour — %3',
    key,
    formatRateAmount(gpu.price_per_hour, symbol),
    basisText(
      {
        basis: gpu.price_basis ?? 'catalog',
        provider: gpu.price_provider,
        market: gpu.price_market,
        region: gpu.price_region,
        asOf: gpu.price_as_of,
        label: billedLabel
      },
      trans
    )
  );
}

/**
 * Module-private helpers.
 */
namespace Private {
  /**
   * Providers' names as they write them.
   */
  export const NAMES: { [id: string]: string } = {
    aws: 'AWS',
    gcp: 'Google Cloud',
    azure: 'Azure',
    autodl: 'AutoDL',
    lambda: 'Lambda',
    runpod: 'RunPod',
    vast: 'Vast.ai',
    vastai: 'Vast.ai',
    coreweave: 'CoreWeave',
    oci: 'OCI',
    alibaba: 'Alibaba Cloud'
  };
}
