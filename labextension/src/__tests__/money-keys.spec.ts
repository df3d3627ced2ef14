/**
 * The money names: the readers read the currency-neutral keys (`cost`,
 * `rate_per_hour`, `amount`), and an older server's answer, which has only
 * the `_usd` names, is given them (docs/api.md, "Money keys").
 */
import { parseStatus } from '../request';
import { withMoneyKeys } from '../money-keys';
import { makeSimulatedStatus } from './fixtures';

/**
 * The status as a server from before the new names sent it.
 */
function olderServer(): { [key: string]: unknown } {
  const status = makeSimulatedStatus() as unknown as {
    [key: string]: unknown;
  };
  const old: { [key: string]: unknown } = {};
  for (const [key, value] of Object.entries(status)) {
    const renamed: { [key: string]: string } = {
      cost: 'cost_usd',
      rate_per_hour: 'rate_usd_per_hour',
      idle_cost: 'idle_cost_usd',
      base_cost: 'base_cost_usd'
    };
    old[renamed[key] ?? key] = value;
  }
  return old;
}

describe('withMoneyKeys', () => {
  it('gives an older server answer the new names, at every depth', () => {
    const answer = withMoneyKeys({
      cost_usd: 1.5,
      micro_usd: { total: 3 },
      kernels: [{ id: 'k', cost_usd: 0.5, cells_cost_micro_usd: 7 }],
      budget: { hard: { amount_usd: 5, spent_usd: null } }
    }) as unknown as {
      cost: number;
      micro: { total: number };
      kernels: { cost: number; cells_cost_micro: number }[];
      budget: { hard: { amount: number; spent: number | null } };
    };
    expect(answer.cost).toBe(1.5);
    expect(answer.micro).toEqual({ total: 3 });
    expect(answer.kernels[0].cost).toBe(0.5);
    expect(answer.kernels[0].cells_cost_micro).toBe(7);
    expect(answer.budget.hard.amount).toBe(5);
    expect(answer.budget.hard.spent).toBeNull();
  });

  it('keeps what a new server sends under the new name', () => {
    const answer = withMoneyKeys({ cost: 2, cost_usd: 2, name: 'x' });
    expect(answer).toEqual({ cost: 2, cost_usd: 2, name: 'x' });
  });

  it('leaves what is not an object as it is', () => {
    expect(withMoneyKeys(null)).toBeNull();
    expect(withMoneyKeys(3)).toBe(3);
    expect(withMoneyKeys(undefined)).toBeUndefined();
  });
});

describe('a status from an older server', () => {
  it('is read by the new names', () => {
    const status = parseStatus(olderServer());
    expect(status).not.toBeNull();
    expect(status!.cost).toBe(makeSimulatedStatus().cost);
    expect(status!.rate_per_hour).toBe(makeSimulatedStatus().rate_per_hour);
  });

  it('is still refused when it has no cost under either name', () => {
    const old = olderServer();
    delete old.cost_usd;
    expect(parseStatus(old)).toBeNull();
  });
});
