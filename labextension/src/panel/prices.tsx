import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { formatDuration, formatRate } from '../format';
import { machineLine } from '../machine/format';
import { IPanelStatus } from './types';

/*
 * The prices in force and the billing rule.
 */

export function Prices(props: {
  status: IPanelStatus;
  symbol: string;
  trans: TranslationBundle;
}): React.ReactElement {
  const { status, symbol, trans } = props;
  const sources = new Map<string, string>();
  for (const gpu of status.gpus) {
    const label = gpu.model ?? gpu.name;
    if (!sources.has(label)) {
      const source = gpu.priced
        ? (gpu.price_source ?? trans.__('no source given'))
        : trans.__('no price in the catalog: not counted');
      sources.set(
        label,
        gpu.price_basis === 'upper-bound'
          ? trans.__(
              '%1 (upper bound: %2)',
              source,
              gpu.price_basis_reason ?? ''
            )
          : source
      );
    }
  }
  const catalogDate = status.prices.catalog_date;
  const machine = machineLine(status, symbol, trans);
  return (
    <section className="jp-gpucost-panel-prices">
      <h3>{trans.__('Prices')}</h3>
      <ul>
        {machine !== null && <li data-field="machine">{machine}</li>}
        {[...sources.entries()].map(([label, source]) => (
          <li key={label}>
            <strong>{label}</strong>: {source}
          </li>
        ))}
        {status.base_price_usd_per_hour > 0 && (
          <li data-field="base-price">
            {trans.__(
              'Base price of the instance: %1',
              formatRate(status.base_price_usd_per_hour, symbol, trans)
            )}
          </li>
        )}
      </ul>
      <p className="jp-gpucost-panel-note">
        {trans.__(
          '%1 %2 prices; catalog of %3. Billing: per %4 s, at least %5 s.',
          status.prices.provider ?? '—',
          status.prices.market ?? '',
          catalogDate ?? status.prices.as_of ?? '—',
          status.billing?.granularity_s ?? 1,
          status.billing?.minimum_charge_s ?? 0
        )}
      </p>
      <p className="jp-gpucost-panel-note">
        {trans.__('Session running for %1.', formatDuration(status.elapsed_s))}
      </p>
    </section>
  );
}
