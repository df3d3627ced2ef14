import { nullTranslator } from '@jupyterlab/translation';

import { basisText, priceLines, providerName } from '../panel/price-lines';
import { IPanelStatus } from '../panel/types';
import { makeGpu, makeStatus } from './fixtures';

const trans = nullTranslator.load('jupyter_gpucost');

function panelStatus(
  overrides: Parameters<typeof makeStatus>[0] = {}
): IPanelStatus {
  return makeStatus(overrides) as unknown as IPanelStatus;
}

describe('the Prices section leads with the price', () => {
  it('states each GPU model once: price per GPU-hour, basis, region, date', () => {
    const gpu = makeGpu({
      price_provider: 'aws',
      price_market: 'on-demand',
      price_region: 'us-east-1'
    });
    const lines = priceLines(
      panelStatus({ gpus: [gpu, { ...gpu, index: 1 }] }),
      '$',
      trans
    );
    expect(lines.map(line => line.text)).toEqual([
      'A100-80GB: $3.43 per GPU-hour — AWS list price, us-east-1, 2026-01-21'
    ]);
  });

  it('puts the whole instance first where it is priced whole', () => {
    const status = panelStatus({
      gpus: [makeGpu({ price_provider: 'aws', price_region: 'us-east-1' })],
      machine: {
        provider: 'aws',
        instance_type: 'p4de.24xlarge',
        region: 'us-east-1',
        market: 'on-demand',
        instance_id: null,
        source: 'dmi+metadata',
        shared: false,
        stoppable: true,
        priced: 'instance',
        instance_price_per_hour: 27.44705,
        instance_price_confidence: 'third-party',
        instance_price_as_of: '2026-01-21'
      }
    });
    const lines = priceLines(status, '$', trans);
    expect(lines.map(line => [line.per, line.text])).toEqual([
      [
        'instance',
        'p4de.24xlarge: $27.45 per instance-hour — AWS list price, us-east-1, 2026-01-21'
      ],
      [
        'gpu',
        'A100-80GB: $3.43 per GPU-hour — AWS list price, us-east-1, 2026-01-21'
      ]
    ]);
  });

  it('says a rental is priced at the rate its provider bills, and when it was read', () => {
    const status = panelStatus({
      gpus: [
        makeGpu({
          model: 'RTX-4090',
          price_per_hour: 0.412,
          price_basis: 'billed',
          price_provider: null,
          price_region: null
        })
      ],
      machine: {
        provider: 'vast',
        instance_type: null,
        region: null,
        market: null,
        instance_id: '28493017',
        source: 'environment',
        shared: false,
        stoppable: true,
        priced: 'instance',
        instance_price_per_hour: 0.412,
        instance_price_confidence: 'listed',
        instance_price_basis: 'billed',
        instance_price_label: 'billed rate from Vast.ai, read 14:02 UTC',
        instance_price_as_of: '2026-11-29T14:02+00:00'
      }
    });
    expect(priceLines(status, '$', trans).map(line => line.text)).toEqual([
      'Vast.ai: $0.41 per instance-hour — billed rate from Vast.ai, read 14:02 UTC',
      'RTX-4090: $0.41 per GPU-hour — billed rate from Vast.ai, read 14:02 UTC'
    ]);
  });

  it('names the basis of a spot price, an override, a bound and no price', () => {
    const base = {
      provider: 'gcp',
      market: 'spot',
      region: 'us-central1',
      asOf: null
    };
    expect(basisText({ ...base, basis: 'catalog' }, trans)).toBe(
      'Google Cloud spot price, us-central1, undated'
    );
    expect(basisText({ ...base, basis: 'override' }, trans)).toBe(
      "the administrator's price, us-central1"
    );
    expect(
      basisText({ ...base, basis: 'upper-bound', region: null }, trans)
    ).toBe('upper bound: the most it can cost, undated');
    // priced at the rate of a reconciled bill (c.GpuCost.use_billed_rate)
    expect(
      basisText(
        {
          ...base,
          basis: 'reconciled',
          market: 'on-demand',
          asOf: '2026-11-26'
        },
        trans
      )
    ).toBe('your billed rate, us-central1, 2026-11-26');
    expect(providerName('autodl')).toBe('AutoDL');
    expect(providerName('acme')).toBe('acme');
    const unpriced = priceLines(
      panelStatus({
        gpus: [makeGpu({ model: 'L40S', priced: false, price_per_hour: null })]
      }),
      'CN¥',
      trans
    );
    expect(unpriced[0].text).toBe('L40S: no price in the catalog: not counted');
  });

  it('writes the amount in the currency shown everywhere else', () => {
    const lines = priceLines(
      panelStatus({
        gpus: [makeGpu({ price_per_hour: 7.98, price_provider: 'autodl' })]
      }),
      '¥',
      trans
    );
    expect(lines[0].text).toContain('A100-80GB: ¥7.98 per GPU-hour — AutoDL');
  });
});
