import { nullTranslator } from '@jupyterlab/translation';

import { IBudgetStatus } from '../budget/tokens';
import {
  IMachine,
  machineLabel,
  machineLine,
  stillCosts,
  stillCostsText
} from '../machine/format';

const trans = nullTranslator.load('jupyter_gpucost');

const G5: IMachine = {
  provider: 'aws',
  instance_type: 'g5.xlarge',
  region: 'us-east-1',
  market: 'spot',
  instance_id: 'i-0123456789abcdef0',
  source: 'dmi+metadata',
  shared: false,
  stoppable: true,
  priced: 'gpu',
  instance_price_usd_per_hour: null,
  instance_price_confidence: null
};

function acted(still: unknown): IBudgetStatus {
  return {
    state: 'acted',
    hard: null,
    soft: null,
    binding: null,
    runs_out_at: null,
    thresholds_pct: [],
    grace_s: 0,
    grace: null,
    action: 'shutdown',
    save_request: null,
    scopes: ['session'],
    last_action: {
      at: '2026-11-25T16:00:00+00:00',
      action: 'shutdown',
      reason: 'budget',
      notebooks_saved: 1,
      still_usd_per_hour: still
    }
  };
}

describe('the machine', () => {
  it('is named as detected, with its market and region', () => {
    expect(machineLabel(G5, trans)).toBe(
      'g5.xlarge, spot, us-east-1 (detected)'
    );
  });

  it('says when it has no whole-instance price', () => {
    expect(machineLine({ machine: G5 }, '$', trans)).toBe(
      'Machine: g5.xlarge, spot, us-east-1 (detected); no whole-instance price for it: per-GPU prices'
    );
  });

  it('says its whole-instance price', () => {
    const whole = {
      ...G5,
      market: 'on-demand',
      priced: 'instance' as const,
      instance_price_usd_per_hour: 1.006
    };
    expect(machineLine({ machine: whole }, '$', trans)).toBe(
      'Machine: g5.xlarge, on-demand, us-east-1 (detected); priced as a whole instance: $1.01/h'
    );
  });

  it('is not shown when none was detected', () => {
    expect(machineLine({ machine: null }, '$', trans)).toBeNull();
    expect(machineLine({}, '$', trans)).toBeNull();
  });
});

describe('what still costs after an action', () => {
  it('is the record figure once the action is taken', () => {
    expect(stillCosts(acted(6.862))).toBe(6.862);
    expect(stillCostsText(6.862, '$', trans)).toBe(
      'this machine still costs $6.86/h'
    );
  });

  it('is nothing when the machine is stopping or no action was taken', () => {
    expect(stillCosts(acted(undefined))).toBeNull();
    expect(stillCosts(acted(0))).toBeNull();
    expect(stillCosts({ ...acted(6.862), state: 'ok' })).toBeNull();
    expect(stillCosts(null)).toBeNull();
  });
});
