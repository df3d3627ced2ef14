import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { formatDuration, formatRate } from '../format';
import { machineLine } from '../machine/format';
import { priceLines } from './price-lines';
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
      <ul className="jp-gpucost-price-lines">
        {priceLines(status, symbol, trans).map(line => (
          <li
            key={`${line.per}-${line.key}`}
            data-price-per={line.per}
            data-price-of={line.key}
          >
            {line.text}
          </li>
        ))}
        {status.base_price_per_hour > 0 && (
          <li data-field="base-price">
            {trans.__(
              'Base price of the instance: %1',
              formatRate(status.base_price_per_hour, symbol, trans)
            )}
          </li>
        )}
      </ul>
      <p className="jp-gpucost-panel-note">
        {trans.__(
          'Billing: per %1 s, at least %2 s.',
          status.billing?.granularity_s ?? 1,
          status.billing?.minimum_charge_s ?? 0
        )}
      </p>
      <details className="jp-gpucost-price-provenance">
        <summary>{trans.__('Where these prices come from')}</summary>
        <ul>
          {machine !== null && <li data-field="machine">{machine}</li>}
          {[...sources.entries()].map(([label, source]) => (
            <li key={label}>
              <strong>{label}</strong>: {source}
            </li>
          ))}
        </ul>
        <p className="jp-gpucost-panel-note">
          {trans.__(
            '%1 %2 prices; catalog of %3.',
            status.prices.provider ?? '—',
            status.prices.market ?? '',
            catalogDate ?? status.prices.as_of ?? '—'
          )}
        </p>
      </details>
      <p className="jp-gpucost-panel-note">
        {trans.__('Session running for %1.', formatDuration(status.elapsed_s))}
      </p>
    </section>
  );
}
