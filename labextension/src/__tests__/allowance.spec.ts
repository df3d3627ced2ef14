import {
  allowanceLeft,
  allowanceLine,
  allowanceLines,
  allowancePeriod,
  allowanceRefill,
  budgetShown,
  formatLocalTime,
  IBudgetHub,
  IBudgetStatus,
  IHubAllowance,
  tightestAllowance
} from '../budget';

import aboutRule from './about-rule.json';

function allowance(overrides: Partial<IHubAllowance> = {}): IHubAllowance {
  return {
    source: 'user',
    unit: 'gpu_hours',
    period: 'week',
    amount: 10,
    left: 6.333333,
    refill_at: '2026-11-30T00:00:00Z',
    ...overrides
  };
}

describe('hub allowances', () => {
  it('says what is left in GPU time with the server’s duration words', () => {
    expect(allowanceLeft(allowance(), '$')).toBe(
      '6 h 20 min of GPU time left this week'
    );
    // the same words as "about 2 h 10 min left" (the server's rule): GPU-hours
    // as they come (whole micro-units of an hour)
    for (const { seconds, shown } of aboutRule.cases) {
      const left = Math.round((seconds / 3600) * 1e6) / 1e6;
      if (Math.abs(left * 3600 - seconds) < 1e-9) {
        expect(allowanceLeft(allowance({ left }), '$')).toBe(
          `${shown} of GPU time left this week`
        );
      }
    }
    expect(allowanceLeft(allowance({ left: 0.25 }), '$')).toBe(
      '15 min of GPU time left this week'
    );
    expect(allowanceLeft(allowance({ left: 0 }), '$')).toBe(
      '0 s of GPU time left this week'
    );
  });

  it('says what is left in money, never below nothing', () => {
    expect(
      allowanceLeft(
        allowance({ unit: 'usd', period: 'month', left: 12.4 }),
        '$'
      )
    ).toBe('$12.40 left this month');
    expect(
      allowanceLeft(allowance({ unit: 'usd', period: 'day', left: -3 }), '€')
    ).toBe('€0.00 left today');
  });

  it('names each period as the hub does', () => {
    expect(allowancePeriod('day')).toBe('today');
    expect(allowancePeriod('week')).toBe('this week');
    expect(allowancePeriod('month')).toBe('this month');
    expect(allowancePeriod('7 days')).toBe('in the last 7 days');
    expect(allowancePeriod('balance')).toBe('until it tops up');
  });

  it('says when it fills up or tops up, in local time', () => {
    const at = formatLocalTime('2026-11-30T00:00:00Z', 0);
    expect(allowanceRefill(allowance(), 0)).toBe(`fills up again at ${at}`);
    expect(allowanceRefill(allowance({ period: 'balance' }), 0)).toBe(
      `tops up at ${at}`
    );
  });

  it('says the hub set it, read-only, in the status bar tooltip', () => {
    const group = allowance({ source: 'group:students' });
    expect(allowanceLine(group, '$', 0)).toBe(
      '6 h 20 min of GPU time left this week · fills up again at ' +
        formatLocalTime('2026-11-30T00:00:00Z', 0) +
        ' · group students, set by your hub admin (read-only)'
    );
    const lines = allowanceLines(noBudget([group]), '$', 0);
    expect(lines).toEqual([`Hub allowance: ${allowanceLine(group, '$', 0)}.`]);
    // no hub, or an older server: nothing
    expect(allowanceLines({ hub: null }, '$')).toEqual([]);
    expect(allowanceLines(null, '$')).toEqual([]);
  });

  it('shows the tightest allowance in the bars where no budget is set', () => {
    const hours = allowance({ source: 'group:students', left: 6.333333 });
    const money = allowance({
      unit: 'usd',
      period: 'month',
      amount: 20,
      left: 2.5
    });
    const status = noBudget([hours, money]);
    // a money allowance with 12.5 % left runs out before 63 % of GPU time
    expect(tightestAllowance(status)).toBe(money);
    const shown = budgetShown(status, '$', 0);
    expect(shown.state).toBe('ok');
    expect(shown.text).toBe('$2.50 left this month');
    expect(shown.title.split('\n')).toEqual([
      `Hub allowance: ${allowanceLine(hours, '$', 0)}.`,
      `Hub allowance: ${allowanceLine(money, '$', 0)}.`
    ]);
    // spent: the bars mark it, and say nothing is left
    const spent = budgetShown(noBudget([allowance({ left: 0 })]), '$', 0);
    expect(spent.state).toBe('exceeded');
    expect(spent.text).toBe('0 s of GPU time left this week');
    // no allowance and no budget: nothing shown
    expect(budgetShown(noBudget([]), '$', 0)).toEqual({
      state: 'none',
      text: '',
      title: ''
    });
    expect(budgetShown(null, '$', 0).state).toBe('none');
  });
});

function noBudget(allowances: IHubAllowance[]): IBudgetStatus {
  const hub: IBudgetHub = {
    source: 'set by your hub admin',
    budgets: [],
    user: 'alice',
    today: 0,
    month: 0,
    stop_at: null,
    reason: null,
    reported_at: null,
    error: null,
    allowances
  };
  return {
    state: 'ok',
    hard: null,
    soft: null,
    hub,
    binding: null,
    runs_out_at: null,
    thresholds_pct: [50, 80, 95],
    grace_s: 120,
    grace: null,
    action: 'shutdown',
    save_request: null,
    scopes: ['session'],
    last_action: null
  };
}
