import { nullTranslator } from '@jupyterlab/translation';

import { deriveState, describe as describeStatus, groupGpus } from '../display';
import {
  currencySymbol,
  formatBudget,
  formatDuration,
  formatMoney,
  formatMoneyColumn,
  formatRate,
  moneyColumnDigits,
  setMoneyLocale
} from '../format';
import { IGpuCostSnapshot, IGpuCostStatus } from '../tokens';
import durationRule from './duration-rule.json';
import moneyRule from './money-rule.json';
import {
  makeGpu,
  makeNoTelemetryStatus,
  makeSimulatedStatus,
  makeStatus,
  makeUnpricedStatus
} from './fixtures';

const trans = nullTranslator.load('jupyter_gpucost');

function snapshot(overrides: Partial<IGpuCostSnapshot> = {}): IGpuCostSnapshot {
  return {
    status: null,
    receivedAt: null,
    missing: false,
    error: null,
    ...overrides
  };
}

function good(status: IGpuCostStatus): IGpuCostSnapshot {
  return snapshot({ status, receivedAt: Date.UTC(2026, 10, 22, 9, 20, 34) });
}

/** The text the status bar item shows, as `view.tsx` lays it out. */
function text(status: IGpuCostSnapshot): string {
  const d = describeStatus(status, trans);
  return [
    d.warning ? '⚠ ' : '',
    d.message ?? `${d.cost} · ${d.rate}`,
    d.noTelemetry ? ' · no GPU telemetry' : '',
    d.simulated ? ' · simulated' : '',
    d.stale ? ' · stale' : ''
  ].join('');
}

describe('formatMoney', () => {
  it('shows two decimals from $0.10 up', () => {
    expect(formatMoney(1.234, '$')).toBe('$1.23');
    expect(formatMoney(2.830123, '$')).toBe('$2.83');
    expect(formatMoney(0.1, '$')).toBe('$0.10');
    expect(formatMoney(6.855, '$')).toBe('$6.86');
  });

  it('shows four decimals under $0.10, so a fresh session visibly rises', () => {
    expect(formatMoney(0.01234, '$')).toBe('$0.0123');
    expect(formatMoney(0.0999, '$')).toBe('$0.0999');
    expect(formatMoney(0.0001, '$')).toBe('$0.0001');
    expect(formatMoney(0.00015, '$')).toBe('$0.0002');
  });

  it('never shows $0.0000: nothing is $0.00, a trace is < $0.0001', () => {
    expect(formatMoney(0, '$')).toBe('$0.00');
    expect(formatMoney(0.000057, '$')).toBe('< $0.0001');
    expect(formatMoney(0.000001, 'CN¥')).toBe('< CN¥0.0001');
    expect(formatMoney(-0.000001, '$')).toBe('> -$0.0001');
    for (let micro = 1; micro < 100; micro++) {
      expect(formatMoney(micro / 1e6, '$')).toBe('< $0.0001');
    }
    for (let micro = 100; micro < 2000; micro += 7) {
      expect(formatMoney(micro / 1e6, '$')).not.toMatch(/^\$0\.0+$/);
    }
  });

  it('does not show $0.1000 for an amount that rounds up to ten cents', () => {
    expect(formatMoney(0.09999, '$')).toBe('$0.10');
  });

  it('groups thousands', () => {
    expect(formatMoney(12345.678, '$')).toBe('$12,345.68');
  });

  it("writes the currency's symbol in the UI's language", () => {
    const yuan = { currency: 'CNY', currency_symbol: 'CN¥' };
    try {
      expect(currencySymbol(yuan)).toBe('CN¥');
      setMoneyLocale('zh-CN');
      expect(currencySymbol(yuan)).toBe('¥');
      expect(formatMoney(12.5, currencySymbol(yuan))).toBe('¥12.50');
      // a language the extension does not speak reads as English
      setMoneyLocale('fr-FR');
      expect(currencySymbol({ currency: 'USD', currency_symbol: '$' })).toBe(
        '$'
      );
      setMoneyLocale('zh_CN');
      // a symbol the admin chose is kept in every language
      expect(currencySymbol({ currency: 'CNY', currency_symbol: 'RMB ' })).toBe(
        'RMB '
      );
    } finally {
      setMoneyLocale('en');
    }
  });

  it('uses the currency symbol of the API', () => {
    expect(formatMoney(1.5, '€')).toBe('€1.50');
    expect(currencySymbol({ currency: 'EUR', currency_symbol: '€' })).toBe('€');
    expect(currencySymbol({ currency: 'CHF', currency_symbol: '' })).toBe(
      'CHF '
    );
  });

  it('never prints NaN', () => {
    expect(formatMoney(Number.NaN, '$')).toBe('$—');
  });
});

describe('formatRate', () => {
  it('shows the hourly rate with two decimals', () => {
    expect(formatRate(6.862, '$', trans)).toBe('$6.86/h');
    expect(formatRate(0.05, '$', trans)).toBe('$0.05/h');
    expect(formatRate(0, '€', trans)).toBe('€0.00/h');
  });
});

describe('groupGpus', () => {
  it('groups GPUs by model, priced apart from unpriced, in index order', () => {
    const gpus = [
      makeGpu({ index: 0 }),
      makeGpu({ index: 1, model: 'H100-80GB' }),
      makeGpu({ index: 2 }),
      makeGpu({ index: 3, model: null, name: 'NVIDIA L40S', priced: false })
    ];
    expect(groupGpus(gpus)).toEqual([
      { label: 'A100-80GB', count: 2, priced: true },
      { label: 'H100-80GB', count: 1, priced: true },
      { label: 'NVIDIA L40S', count: 1, priced: false }
    ]);
  });
});

describe('deriveState', () => {
  it('is loading before the first answer', () => {
    expect(deriveState(snapshot())).toBe('loading');
  });

  it('is ok on real telemetry with every GPU priced', () => {
    expect(deriveState(good(makeStatus()))).toBe('ok');
  });

  it('is simulated on simulated telemetry', () => {
    expect(deriveState(good(makeSimulatedStatus()))).toBe('simulated');
  });

  it('is unpriced when a GPU has no price, even on simulated telemetry', () => {
    expect(deriveState(good(makeUnpricedStatus()))).toBe('unpriced');
    const simulated = makeSimulatedStatus({
      gpus: makeUnpricedStatus().gpus
    });
    expect(deriveState(good(simulated))).toBe('unpriced');
  });

  it('is unpriced on an unpriced-gpu warning alone', () => {
    const status = makeStatus({ warnings: makeUnpricedStatus().warnings });
    expect(deriveState(good(status))).toBe('unpriced');
  });

  it('is no-telemetry when telemetry is unavailable', () => {
    expect(deriveState(good(makeNoTelemetryStatus()))).toBe('no-telemetry');
  });

  it('is missing on a 404', () => {
    expect(deriveState(snapshot({ missing: true }))).toBe('missing');
  });

  it('is error when the last request failed, with or without a value', () => {
    expect(deriveState(snapshot({ error: 'Failed to fetch' }))).toBe('error');
    expect(
      deriveState({ ...good(makeStatus()), error: 'Failed to fetch' })
    ).toBe('error');
  });
});

describe('describe: the text', () => {
  it('shows cost and rate', () => {
    expect(text(good(makeStatus()))).toBe('$2.83 · $6.86/h');
  });

  it('shows the precise cost of a fresh session', () => {
    const fresh = makeStatus({ cost: 0.0123, rate_per_hour: 6.862 });
    expect(text(good(fresh))).toBe('$0.0123 · $6.86/h');
  });

  it('tags simulated telemetry', () => {
    expect(text(good(makeSimulatedStatus()))).toBe(
      '$2.83 · $6.86/h · simulated'
    );
  });

  it('marks unpriced GPUs with ⚠', () => {
    expect(text(good(makeUnpricedStatus()))).toBe('⚠ $1.23 · $3.43/h');
  });

  it('still shows the (base price) cost without telemetry', () => {
    expect(text(good(makeNoTelemetryStatus()))).toBe(
      '$0.50 · $1.00/h · no GPU telemetry'
    );
  });

  it('says when the server extension is missing', () => {
    expect(text(snapshot({ missing: true }))).toBe(
      'GPU cost: server extension not enabled'
    );
  });

  it('keeps the last value, marked stale, after an error', () => {
    const stale = { ...good(makeStatus()), error: 'Failed to fetch' };
    expect(text(stale)).toBe('$2.83 · $6.86/h · stale');
  });

  it('says unavailable after an error with no value yet', () => {
    expect(text(snapshot({ error: 'HTTP 500: boom' }))).toBe(
      'GPU cost: unavailable'
    );
  });

  it('shows a placeholder while loading', () => {
    expect(text(snapshot())).toBe('GPU cost: …');
  });
});

describe('describe: the tooltip', () => {
  it('sums up cost, GPUs by model, catalog and idle cost', () => {
    const status = makeSimulatedStatus({ cost: 1.23, idle_cost: 0.4 });
    expect(describeStatus(good(status), trans).title).toBe(
      'This session has cost $1.23 on 2× A100-80GB (aws on-demand, prices as of 2026-01-21). Idle: $0.40. Simulated telemetry.'
    );
  });

  it('does not mention simulation on real telemetry', () => {
    expect(describeStatus(good(makeStatus()), trans).title).toBe(
      'This session has cost $2.83 on 2× A100-80GB (aws on-demand, prices as of 2026-01-21). Idle: $1.10.'
    );
  });

  it('explains the minimum charge while it is in force, and only then', () => {
    const fresh = makeSimulatedStatus({ elapsed_s: 12.5, cost: 0.114367 });
    expect(describeStatus(good(fresh), trans).title.split('\n')[1]).toBe(
      'The provider bills at least 60 s per session: that is what the first 60 s cost, however short the session.'
    );
    const later = makeSimulatedStatus({ elapsed_s: 61 });
    expect(describeStatus(good(later), trans).title).not.toContain('at least');
    const noMinimum = makeSimulatedStatus({
      elapsed_s: 12.5,
      billing: { granularity_s: 1, minimum_charge_s: 0 }
    });
    expect(describeStatus(good(noMinimum), trans).title).not.toContain(
      'at least'
    );
  });

  it('lists several models', () => {
    const status = makeStatus({
      gpus: [
        makeGpu({ index: 0, model: 'H100-80GB' }),
        makeGpu({ index: 1 }),
        makeGpu({ index: 2, model: 'H100-80GB' })
      ]
    });
    expect(describeStatus(good(status), trans).title).toContain(
      'on 2× H100-80GB, 1× A100-80GB (aws on-demand'
    );
  });

  it('names unpriced GPUs and repeats the server warnings', () => {
    const lines = describeStatus(good(makeUnpricedStatus()), trans).title.split(
      '\n'
    );
    expect(lines).toEqual([
      'This session has cost $1.23 on 1× A100-80GB (aws on-demand, prices as of 2026-01-21). Idle: $0.55.',
      '⚠ No price, not counted: 1× L40S.',
      '⚠ No aws on-demand price for NVIDIA L40S: it is not counted in the cost. Set c.GpuCost.price_overrides.'
    ]);
  });

  it('gives the reason there is no telemetry, and the base price', () => {
    expect(describeStatus(good(makeNoTelemetryStatus()), trans).title).toBe(
      'This session has cost $0.50 (aws on-demand, prices as of 2026-01-21). Instance base price: $1.00/h ($0.50 so far). No GPU telemetry: NVML library not found (libnvidia-ml.so.1).'
    );
  });

  it('mentions a telemetry reason even when telemetry is available', () => {
    const status = makeStatus({
      telemetry: {
        source: 'nvml',
        simulated: false,
        available: true,
        reason: 'energy counter not supported on GPU 1.',
        detail: null
      }
    });
    expect(describeStatus(good(status), trans).title).toMatch(
      / Telemetry: energy counter not supported on GPU 1\.$/
    );
  });

  it('tells how to enable a missing server extension', () => {
    expect(describeStatus(snapshot({ missing: true }), trans).title).toContain(
      'jupyter server extension enable jupyter_gpucost'
    );
  });

  it('explains a stale value: when it is from and why', () => {
    const receivedAt = Date.UTC(2026, 10, 22, 9, 20, 34);
    const stale: IGpuCostSnapshot = {
      status: makeStatus(),
      receivedAt,
      missing: false,
      error: 'Failed to fetch'
    };
    // the same day, in New York (jest.config.js): the one local time format
    const now = jest
      .spyOn(Date, 'now')
      .mockReturnValue(Date.UTC(2026, 10, 22, 15, 0, 0));
    const lines = describeStatus(stale, trans).title.split('\n');
    now.mockRestore();
    expect(lines[0]).toMatch(/^This session has cost \$2\.83 /);
    expect(lines[1]).toBe(
      '⚠ Stale: showing the value from 04:20:34 AM EST; the last request failed (Failed to fetch). Retrying.'
    );
  });
});

describe('formatBudget', () => {
  it('shows every micro-unit a budget has, and two decimals at least', () => {
    expect(formatBudget(5, '$')).toBe('$5.00');
    expect(formatBudget(0.000001, '$')).toBe('$0.000001');
    expect(formatBudget(0.05, '$')).toBe('$0.05');
    expect(formatBudget(1000.5, 'CN¥')).toBe('CN¥1,000.50');
    expect(formatBudget(1.234567, '€')).toBe('€1.234567');
    expect(formatBudget(0, '$')).toBe('$0.00');
  });
});

describe('the money rule, as the server writes it', () => {
  it('formatMoney and formatBudget agree with money.status_bar and money.budget', () => {
    for (const c of moneyRule.cases) {
      expect([c.amount, formatMoney(c.amount, '$')]).toEqual([
        c.amount,
        c.spent
      ]);
      expect([c.amount, formatBudget(c.amount, '$')]).toEqual([
        c.amount,
        c.budget
      ]);
    }
  });
});

describe('a column of amounts', () => {
  it('has one number of decimals: never $0.0608 above $0.11', () => {
    expect(formatMoneyColumn([0.0608, 0.11], '$')).toEqual([
      '$0.0608',
      '$0.1100'
    ]);
    expect(formatMoneyColumn([0.11, 2.5], '¥')).toEqual(['¥0.11', '¥2.50']);
    expect(moneyColumnDigits([0, NaN, 3])).toBe(2);
    expect(moneyColumnDigits([0.00002, 3])).toBe(4);
  });

  it('agrees with money.column, case by case', () => {
    expect(moneyRule.columns.length).toBeGreaterThanOrEqual(8);
    for (const c of moneyRule.columns) {
      expect([c.amounts, formatMoneyColumn(c.amounts, '$')]).toEqual([
        c.amounts,
        c.shown
      ]);
    }
  });
});

describe('the duration rule, as the kernel writes it', () => {
  it('formatDuration(s, true) agrees with wording.cell_seconds', () => {
    for (const c of durationRule.cases) {
      expect([c.seconds, formatDuration(c.seconds, true)]).toEqual([
        c.seconds,
        c.shown
      ]);
    }
  });
});
