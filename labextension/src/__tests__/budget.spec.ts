import {
  bindingBudget,
  budgetDisplayState,
  budgetText,
  budgetTitle,
  formatCountdown
} from '../budget/format';
import { IBudgetStanding, IBudgetStatus } from '../budget/tokens';

function standing(overrides: Partial<IBudgetStanding> = {}): IBudgetStanding {
  return {
    kind: 'soft',
    locked: false,
    scope: 'session',
    amount_usd: 5,
    spent_usd: 2.1,
    remaining_usd: 2.9,
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
    expect(budgetText(budget({ soft: null, binding: null }), 0)).toBe('');
  });

  it('maps the policy states to what the status bar shows', () => {
    expect(budgetDisplayState(budget())).toBe('ok');
    expect(budgetDisplayState(budget({ state: 'warning' }))).toBe('warning');
    for (const state of ['grace', 'enforcing', 'acted'] as const) {
      expect(budgetDisplayState(budget({ state }))).toBe('exceeded');
    }
  });

  it('shows the share of the binding budget, locked when it is the admin one', () => {
    expect(budgetText(budget(), 0)).toBe('budget 42% of $5.00');
    const hard = standing({ kind: 'hard', locked: true, amount_usd: 3 });
    const status = budget({ hard, binding: 'hard' });
    expect(bindingBudget(status)).toBe(hard);
    expect(budgetText(status, 0)).toBe('🔒 budget 42% of $3.00');
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
    expect(budgetText(status, ends - 65_000)).toBe(
      'budget spent · stop in 1:05'
    );
    expect(budgetText(status, ends + 5_000)).toBe(
      'budget spent · stop in 0:00'
    );
    expect(formatCountdown(9.2)).toBe('0:10');
  });

  it('explains both budgets, the run-out time and the last action', () => {
    const title = budgetTitle(
      budget({
        hard: standing({ kind: 'hard', locked: true, amount_usd: 10 }),
        last_action: {
          at: '2026-11-22T14:02:00Z',
          action: 'shutdown',
          reason: 'budget',
          notebooks_saved: 2,
          message: 'stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved'
        }
      })
    );
    expect(title).toContain("Administrator's budget (locked): $10.00");
    expect(title).toContain('Your budget: $5.00 per session, $2.10 spent.');
    expect(title).toContain('At the current rate it runs out at');
    expect(title).toContain('Warnings at 50/80/95 %');
    expect(title).toContain(
      'Last action: stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved.'
    );
  });
});
