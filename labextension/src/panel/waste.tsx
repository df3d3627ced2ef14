import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { formatBytes, formatCo2, formatEnergy, formatMoney } from '../format';
import { rightsizingText } from './format';
import { IKernelsAnswer, IPanelStatus } from './types';

/*
 * Idle cost, right-sizing advice, energy and CO₂.
 */

export function Waste(props: {
  status: IPanelStatus;
  /** The kernel table's figures: the idle cost is read there, so both agree. */
  kernels?: IKernelsAnswer | null;
  symbol: string;
  trans: TranslationBundle;
}): React.ReactElement {
  const { status, kernels, symbol, trans } = props;
  if (status.gpus.length === 0) {
    // nothing idles and nothing can be swapped for a cheaper GPU
    return (
      <section className="jp-gpucost-panel-waste">
        <h3>{trans.__('Waste and advice')}</h3>
        <p data-field="no-gpus">
          {trans.__(
            'No GPU is metered on this server: there is no GPU advice to give.'
          )}
        </p>
      </section>
    );
  }
  // one source for the idle cost: the kernel table's when it is there (the
  // same sample as its rows), else the status's
  const idle = kernels ? kernels.idle : status.idle_cost;
  const gpuCost = kernels ? kernels.total : status.gpu_cost;
  const share = gpuCost > 0 ? Math.round((100 * idle) / gpuCost) : 0;
  const advice = rightsizingText(status.rightsizing, symbol, trans);
  const priced = status.gpus.some(gpu => gpu.priced);
  return (
    <section className="jp-gpucost-panel-waste">
      <h3>{trans.__('Waste and advice')}</h3>
      <p data-field="idle">
        {trans.__(
          'Idle GPUs cost %1 (%2% of the GPU cost).',
          formatMoney(idle, symbol),
          share
        )}
      </p>
      <p data-field="rightsizing">
        {advice ??
          status.rightsizing_note ??
          (status.rightsizing === undefined
            ? trans.__('No right-sizing advice from this server.')
            : !priced
              ? trans.__(
                  'No right-sizing advice: the catalog has no price for these GPUs.'
                )
              : trans.__(
                  'No cheaper GPU in the catalog would have held this session’s peak memory.'
                ))}
        {status.rightsizing?.peak_memory_bytes !== undefined &&
          status.rightsizing?.peak_memory_bytes !== null &&
          ' ' +
            trans.__(
              '(peak memory %1)',
              formatBytes(status.rightsizing.peak_memory_bytes)
            )}
      </p>
    </section>
  );
}

export function Energy(props: {
  status: IPanelStatus;
  trans: TranslationBundle;
}): React.ReactElement {
  const { status, trans } = props;
  return (
    <section className="jp-gpucost-panel-energy">
      <h3>{trans.__('Energy')}</h3>
      <p>
        <span data-field="energy">{formatEnergy(status.energy_j)}</span>
        {' · '}
        <span data-field="co2">{formatCo2(status.co2_g)}</span>{' '}
        {status.carbon_intensity_g_per_kwh !== undefined &&
          status.carbon_intensity_g_per_kwh !== null &&
          trans.__(
            'CO₂ at %1 g/kWh',
            Math.round(status.carbon_intensity_g_per_kwh)
          )}
      </p>
    </section>
  );
}
