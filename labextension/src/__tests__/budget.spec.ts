import {
  bindingBudget,
  budgetDisplayState,
  budgetPercent,
  budgetText,
  budgetTitle,
  formatLocalTime,
  formatRunOut,
  localizeActionTime,
  localizeRunOut,
  parseAmount,
  proposeRaise,
  runOutText
} from '../budget/format';
import { formatCountdown } from '../format';
import { budgetUrl } from '../budget/request';
import { ServerConnection } from '@jupyterlab/services';
import { IBudgetStanding, IBudgetStatus } from '../budget/tokens';

function standing(overrides: Partial<IBudgetStanding> = {}): IBudgetStanding {
  return {
    kind: 'soft',
    locked: false,
    scope: 'session',
    amount: 5,
    spent: 2.1,
    remaining: 2.9,
    share: 0.42,
    runs_out_at: '2026-11-22T14:50:00Z',
    fired_pct: [],
    ...overrides
  };
}

function budget(overrides: Partial<IBudgetStatus> = {}): IBudgetStatus {
  return {
    state: 'ok',
    hard: null,
    soft: standing(),
    binding: 'soft',
    runs_out_at: '2026-11-22T14:50:00Z',
    thresholds_pct: [50, 80, 95],
    grace_s: 120,
    grace: null,
    action: 'shutdown',
    save_request: null,
    scopes: ['session'],
    last_action: null,
    ...overrides
  };
}

describe('budget format', () => {
  it('has no state without a budget', () => {
    expect(budgetDisplayState(null)).toBe('none');
    expect(budgetDisplayState(budget({ soft: null, binding: null }))).toBe(
      'none'
    );
    expect(budgetText(budget({ soft: null, binding: null }), 0, '$')).toBe('');
  });

  it('maps the policy states to what the status bar shows', () => {
    expect(budgetDisplayState(budget())).toBe('ok');
    expect(budgetDisplayState(budget({ state: 'warning' }))).toBe('warning');
    for (const state of ['grace', 'enforcing', 'acted'] as const) {
      expect(budgetDisplayState(budget({ state }))).toBe('exceeded');
    }
  });

  it('shows the share of the binding budget, locked when it is the admin one', () => {
    expect(budgetText(budget(), 0, '$')).toBe('budget 42% of $5.00');
    const hard = standing({ kind: 'hard', locked: true, amount: 3 });
    const status = budget({ hard, binding: 'hard' });
    expect(bindingBudget(status)).toBe(hard);
    expect(budgetText(status, 0, '$')).toBe('🔒 budget 42% of $3.00');
  });

  it('counts down during the grace period', () => {
    const ends = Date.UTC(2026, 10, 22, 14, 0, 0);
    const status = budget({
      state: 'grace',
      grace: {
        started: '',
        ends: new Date(ends).toISOString(),
        remaining_s: 65,
        reason: 'budget',
        can_raise: true
      }
    });
    expect(budgetText(status, ends - 65_000, '$')).toBe(
      'budget spent · stop in 1:05'
    );
    expect(budgetText(status, ends + 5_000, '$')).toBe(
      'budget spent · stop in 0:00'
    );
    expect(formatCountdown(9.2)).toBe('0:10');
  });

  it('says before the countdown when and at what amount it stops', () => {
    const text =
      'Stops at $5.00 — in about 14 min at $21.50/h; notebooks saved first, then the kernels shut down.';
    const stop = {
      amount: 5,
      budget_kind: 'hard' as const,
      in_s: 840,
      at: '2026-11-22T14:14:00Z',
      rate_per_hour: 21.5,
      action: 'shutdown',
      text
    };
    const hard = standing({ kind: 'hard', locked: true, amount: 5 });
    const status = budget({ hard, soft: null, binding: 'hard', stop });
    expect(budgetTitle(status, '$')).toContain(text);
    expect(budgetText(status, 0, '$')).toBe('🔒 budget 42% of $5.00');
    // the countdown ends at the budget: it stops there, it is not spent yet
    const ends = Date.UTC(2026, 10, 22, 14, 14, 0);
    const counting = budget({
      hard,
      soft: null,
      binding: 'hard',
      stop: { ...stop, in_s: 28 },
      state: 'grace',
      grace: {
        started: '',
        ends: new Date(ends).toISOString(),
        remaining_s: 28,
        reason: 'budget',
        can_raise: false,
        shortened: 'overrun',
        shortened_text:
          'The 120 s grace is shortened to 28 s: at $21.50/h the full grace would go past the budget.'
      }
    });
    expect(budgetText(counting, ends - 28_000, '$')).toBe(
      '🔒 stops at $5.00 in 0:28'
    );
    expect(budgetTitle(counting, '$')).toContain(
      'The 120 s grace is shortened to 28 s'
    );
    expect(budgetTitle(counting, '$')).toContain(
      'a 120 s countdown ends at the budget: notebooks saved, then the kernels shut down.'
    );
  });

  it('explains both budgets, the run-out time and the last action', () => {
    const title = budgetTitle(
      budget({
        hard: standing({ kind: 'hard', locked: true, amount: 10 }),
        last_action: {
          at: '2026-11-22T14:02:00Z',
          action: 'shutdown',
          reason: 'budget',
          notebooks_saved: 2,
          message: 'stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved'
        }
      }),
      '$',
      Date.parse('2026-11-22T12:00:00Z')
    );
    expect(title).toContain("Administrator's budget (locked): $10.00");
    expect(title).toContain('Your budget: $5.00 per session, $2.10 spent.');
    expect(title).toContain('At the current rate it runs out at');
    expect(title).toContain('Warnings at 50/80/95 %');
    expect(title).toContain(
      'Last action: stopped at $5.00 budget at Nov 22, 09:02 AM EST; 2 notebooks saved.'
    );
  });
});

describe('budget sources', () => {
  const hubBudget = (overrides: Partial<IBudgetStanding> = {}) =>
    standing({
      kind: 'hub',
      locked: true,
      source: 'set by your hub admin',
      owner: 'user',
      scope: 'day',
      amount: 10,
      spent: 3,
      remaining: 7,
      share: 0.3,
      ...overrides
    });
  const hub = (budgets: IBudgetStanding[], stop_at: string | null = null) => ({
    source: 'set by your hub admin',
    budgets,
    user: 'alice',
    today: 3,
    month: 40,
    stop_at,
    reason: stop_at ? 'daily budget spent' : null,
    reported_at: '2026-11-22T12:00:00Z',
    error: null
  });

  it("names where the admin's budget comes from", () => {
    const title = budgetTitle(
      budget({
        hard: standing({
          kind: 'hard',
          locked: true,
          amount: 2.5,
          source: 'set by the spawner (GPUCOST_BUDGET_USD)'
        })
      }),
      '$'
    );
    expect(title).toContain(
      "Administrator's budget (locked, set by the spawner (GPUCOST_BUDGET_USD)): $2.50"
    );
  });

  it("shows the hub's budgets locked, set by your hub admin", () => {
    const group = hubBudget({
      owner: 'group:physics',
      scope: 'month',
      amount: 100,
      spent: 40,
      remaining: 60,
      share: 0.4
    });
    const status = budget({
      soft: null,
      binding: 'hub',
      hub: hub([hubBudget(), group])
    });
    expect(budgetDisplayState(status)).toBe('ok');
    // the hub's budget with the least money left binds
    expect(bindingBudget(status)).toEqual(hubBudget());
    expect(budgetText(status, 0, '$')).toBe('🔒 budget 30% of $10.00');
    const title = budgetTitle(status, '$');
    expect(title).toContain(
      'Hub budget (locked, set by your hub admin): $10.00 per day, $3.00 spent.'
    );
    expect(title).toContain(
      'Hub budget for group physics (locked, set by your hub admin): $100.00 per month'
    );
  });

  it('says when the hub stops the server, and why', () => {
    const status = budget({
      soft: null,
      binding: 'hub',
      hub: hub(
        [hubBudget({ spent: 10, remaining: 0, share: 1 })],
        '2026-11-22T12:30:00Z'
      )
    });
    const title = budgetTitle(status, '$', Date.parse('2026-11-22T12:00:00Z'));
    expect(title).toContain('The hub stops this server at');
    expect(title).toContain('(daily budget spent)');
  });
});

describe('budget share', () => {
  it('is one whole percentage, rounded down, in the status bar and the panel', () => {
    expect(budgetPercent(0.0084)).toBe('0');
    expect(budgetPercent(0.0354)).toBe('3');
    expect(budgetPercent(0.1799)).toBe('17');
    expect(budgetPercent(0.57)).toBe('57');
    expect(budgetPercent(0.29)).toBe('29');
    expect(budgetPercent(0.9999)).toBe('99');
    expect(budgetPercent(1)).toBe('100');
    expect(budgetPercent(1.91)).toBe('191');
    expect(budgetPercent(9.999)).toBe('999');
    expect(budgetPercent(10)).toBe('>999');
    expect(budgetPercent(114367)).toBe('>999');
    expect(budgetPercent(null)).toBe('?');
    expect(
      budgetText(budget({ soft: standing({ share: 0.0354 }) }), 0, '$')
    ).toBe('budget 3% of $5.00');
  });
});

describe('budget run-out time', () => {
  // the tests run in New York time (jest.config.js)
  const now = Date.parse('2026-11-23T15:00:00Z');

  it('is the local time with its zone, and the date when not today', () => {
    expect(formatRunOut('2026-11-23T18:33:57Z', now)).toBe('01:33 PM EST');
    expect(formatRunOut('2026-11-24T18:33:57Z', now)).toBe(
      'Nov 24, 01:33 PM EST'
    );
  });

  it('is the one local time format of the front end, with seconds when asked', () => {
    expect(formatLocalTime('2026-11-23T18:33:57Z', now)).toBe('01:33 PM EST');
    expect(
      formatLocalTime('2026-11-23T18:33:57Z', now, { seconds: true })
    ).toBe('01:33:57 PM EST');
    expect(
      formatLocalTime('2026-11-22T14:02:05Z', now, { seconds: true })
    ).toBe('Nov 22, 09:02:05 AM EST');
  });

  it("writes an action's time as every other time of the panel", () => {
    expect(
      localizeActionTime(
        'stopped at $0.0500 budget at 14:02 UTC; 1 notebook saved',
        '2026-11-23T14:02:05Z',
        now
      )
    ).toBe('stopped at $0.0500 budget at 09:02 AM EST; 1 notebook saved');
    expect(localizeActionTime('stopped at 14:02 UTC', undefined, now)).toBe(
      'stopped at 14:02 UTC'
    );
  });

  it("writes an action's time in a Chinese summary as in an English one", () => {
    expect(
      localizeActionTime(
        '已于 14:02 UTC 因 ¥5.00 预算停止；已保存 1 个笔记本',
        '2026-11-23T14:02:05Z',
        now
      )
    ).toBe('已于 09:02 AM EST 因 ¥5.00 预算停止；已保存 1 个笔记本');
    expect(
      localizeActionTime('已于14:02 UTC停止', '2026-11-23T14:02:05Z', now)
    ).toBe('已于09:02 AM EST停止');
  });

  it('gives the year of a time that is not this year', () => {
    expect(formatLocalTime('2025-11-22T14:02:05Z', now)).toBe(
      'Nov 22, 2025, 09:02 AM EST'
    );
    expect(formatLocalTime('9999-06-01T12:00:00Z', now)).toBe(
      'Jun 1, 9999, 08:00 AM EDT'
    );
  });

  it('is not shown once the budget is spent', () => {
    const line = {
      share: 0.5,
      remaining: 2.5,
      runs_out_at: '2026-11-23T18:33:57Z'
    };
    expect(runOutText(line, now)).toBe('01:33 PM EST');
    expect(runOutText({ ...line, share: 1.91, remaining: 0 }, now)).toBe(null);
    expect(runOutText({ ...line, share: 1 }, now)).toBe(null);
    expect(runOutText({ ...line, runs_out_at: null }, now)).toBe(null);
    const spent = budget({
      state: 'acted',
      soft: standing({
        spent: 0.9,
        amount: 0.47,
        remaining: 0,
        share: 1.91,
        runs_out_at: '2026-11-23T18:33:57Z'
      })
    });
    expect(budgetTitle(spent, '€', now)).not.toContain('runs out');
    expect(budgetTitle(budget(), '€', now)).toContain(
      'At the current rate it runs out at Nov 22, 09:50 AM EST.'
    );
  });

  it("rewrites a server message's UTC run-out time in local time", () => {
    expect(
      localizeRunOut(
        '95% of your $0.14 session budget is spent; at the current rate it runs out at 18:19 UTC.',
        '2026-11-23T18:19:00Z',
        now
      )
    ).toBe(
      '95% of your $0.14 session budget is spent; at the current rate it runs out at 01:19 PM EST.'
    );
    const plain = 'The GPUs have been idle for 30 minutes while costing money.';
    expect(localizeRunOut(plain, undefined, now)).toBe(plain);
  });

  it("rewrites a Chinese message's run-out time as an English one's", () => {
    const local = formatRunOut('2026-11-23T03:03:00Z', now);
    expect(local).not.toContain('UTC');
    // the translation as it is, and as it was ("UTC 03:03")
    for (const message of [
      '您的 ¥5.00 会话预算已用 95%；按当前速率，将于 03:03 UTC 用完。',
      '您的 ¥5.00 会话预算已用 95%；按当前速率，将于 UTC 03:03 用完。'
    ]) {
      expect(localizeRunOut(message, '2026-11-23T03:03:00Z', now)).toBe(
        `您的 ¥5.00 会话预算已用 95%；按当前速率，将于 ${local} 用完。`
      );
    }
  });
});

describe('budget amounts typed by a person', () => {
  it('accepts plain decimal numbers with up to 6 decimals', () => {
    for (const [text, value] of [
      ['5', 5],
      ['7.5', 7.5],
      [' 0.3 ', 0.3],
      ['.25', 0.25],
      ['12.123456', 12.123456],
      ['1000000', 1_000_000]
    ] as const) {
      expect(parseAmount(text)).toEqual({ value, error: null });
    }
  });

  it('refuses anything else, with a message', () => {
    for (const text of [
      '0x10',
      '0b11',
      '1e3',
      'Infinity',
      '-5',
      '+5',
      '1,000',
      '5 dollars',
      '',
      '  '
    ]) {
      expect([text, parseAmount(text)]).toEqual([
        text,
        {
          value: null,
          error: 'Enter the amount as a plain decimal number, e.g. 5 or 7.50.'
        }
      ]);
    }
    expect(parseAmount('0.1234567')).toEqual({
      value: null,
      error: 'Enter the amount with at most 6 decimals.'
    });
  });
});

describe('budget URLs', () => {
  it('have no trailing slash before the query', () => {
    const settings = ServerConnection.makeSettings({
      baseUrl: 'http://localhost:8888/user/alice/'
    });
    expect(budgetUrl(settings, '', { client: 'a b' })).toBe(
      'http://localhost:8888/user/alice/gpucost/api/budget?client=a+b'
    );
    expect(budgetUrl(settings, '')).toBe(
      'http://localhost:8888/user/alice/gpucost/api/budget'
    );
    expect(budgetUrl(settings, 'stop-now')).toBe(
      'http://localhost:8888/user/alice/gpucost/api/budget/stop-now'
    );
  });
});

describe('Raise budget', () => {
  it('proposes an amount above what is spent', () => {
    // $1.85 spent under a $0.50 budget: not "1", which is still spent
    expect(proposeRaise(0.5, 1.85)).toBe(3.7);
    expect(proposeRaise(0.5, 1.85)).toBeGreaterThan(1.85);
    expect(proposeRaise(5, 5.01)).toBe(10.02);
    expect(proposeRaise(0.000001, 0.000001)).toBe(0.01);
    expect(proposeRaise(0, 0)).toBe(0.01);
    for (const [amount, spent] of [
      [0.1, 0.29],
      [1, 1.005],
      [12.5, 12.5],
      [0.3, 0.3000001]
    ]) {
      expect(proposeRaise(amount, spent)).toBeGreaterThan(spent);
    }
  });
});
