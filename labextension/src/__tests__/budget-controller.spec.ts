import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, Notification } from '@jupyterlab/apputils';
import { Event, ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry, SettingRegistry } from '@jupyterlab/settingregistry';
import { IDataConnector } from '@jupyterlab/statedb';
import { Signal } from '@lumino/signaling';
import * as json5 from 'json5';

import {
  BUDGET_EVENT_SCHEMA,
  BudgetController,
  budgetPlugin,
  IBudgetStanding,
  IBudgetStatus
} from '../budget';
import { GpuCostModel } from '../model';
import { makeStatus } from './fixtures';

import schema from '../../schema/budget.json';

const PLUGIN = 'jupyter-gpucost:budget';

function standing(overrides: Partial<IBudgetStanding> = {}): IBudgetStanding {
  return {
    kind: 'soft',
    locked: false,
    scope: 'session',
    amount: 5,
    spent: 2.1,
    remaining: 2.9,
    share: 0.42,
    runs_out_at: null,
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
    runs_out_at: null,
    thresholds_pct: [50, 80, 95],
    grace_s: 120,
    grace: null,
    action: 'shutdown',
    save_request: null,
    scopes: ['session', 'day', 'month'],
    last_action: null,
    ...overrides
  };
}

/**
 * A Jupyter server with the budget routes: it keeps the soft budget it is
 * given, and records every request.
 */
class BudgetServer {
  constructor(public status: IBudgetStatus) {}

  readonly requests: { method: string; url: string; body: unknown }[] = [];

  readonly settings = ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/user/alice/',
    fetch: async (input: RequestInfo, init?: RequestInit) => {
      const request = new Request(input, init);
      const text = await request.text();
      const body = text ? JSON.parse(text) : null;
      this.requests.push({ method: request.method, url: request.url, body });
      const path = new URL(request.url).pathname;
      if (path.endsWith('/gpucost/api/status')) {
        // the budget comes with the status
        return this.answer(
          makeStatus({
            currency: 'EUR',
            currency_symbol: '€',
            budget: this.status
          })
        );
      }
      if (path.endsWith('/gpucost/api/budget/')) {
        // what the server does with a trailing slash
        return new Response(null, { status: 302 });
      }
      if (path.endsWith('/gpucost/api/budget')) {
        if (request.method === 'PUT') {
          const { amount_usd: amount, scope } = body as {
            amount_usd: number | null;
            scope: 'session' | 'day' | 'month';
          };
          this.status = {
            ...this.status,
            soft:
              amount === null
                ? null
                : standing({ amount: amount, scope, share: 2.1 / amount })
          };
        }
        return this.answer(this.status);
      }
      if (path.endsWith('/gpucost/api/budget/stop-now')) {
        this.status = { ...this.status, state: 'enforcing' };
        return this.answer({ stopping: true });
      }
      return new Response('', { status: 404 });
    }
  });

  puts(): unknown[] {
    return this.requests.filter(r => r.method === 'PUT').map(r => r.body);
  }

  private answer(body: unknown): Response {
    return new Response(JSON.stringify(body), {
      status: 200,
      headers: { 'Content-Type': 'application/json' }
    });
  }
}

/**
 * Where the settings are stored: the user settings file of the budget plugin.
 */
class SettingsFile implements IDataConnector<ISettingRegistry.IPlugin, string> {
  constructor(public raw: string) {}

  async list(): Promise<{ ids: string[]; values: ISettingRegistry.IPlugin[] }> {
    return { ids: [], values: [] };
  }

  async remove(): Promise<void> {
    this.raw = '{}';
  }

  async fetch(id: string): Promise<ISettingRegistry.IPlugin | undefined> {
    return {
      id,
      raw: this.raw,
      schema: schema as ISettingRegistry.ISchema,
      version: '0.1.0',
      data: { composite: {}, user: {} }
    };
  }

  async save(id: string, raw: string): Promise<void> {
    this.raw = raw;
  }

  user(): { [key: string]: unknown } {
    return json5.parse(this.raw);
  }
}

/**
 * The budget plugin, started as JupyterLab starts it.
 */
async function activate(
  server: BudgetServer,
  file: SettingsFile
): Promise<ISettingRegistry> {
  const stream = new Signal<unknown, Event.Emission>({});
  const app = {
    serviceManager: {
      serverSettings: server.settings,
      events: { stream },
      sessions: { refreshRunning: async () => undefined },
      kernels: { refreshRunning: async () => undefined }
    }
  } as unknown as JupyterFrontEnd;
  const registry = new SettingRegistry({ connector: file });
  // without an event socket the shared model polls
  const model = new GpuCostModel({ serverSettings: server.settings });
  models.push(model);
  void budgetPlugin.activate(app, model, null, null, registry);
  return registry;
}

async function until(what: string, predicate: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!predicate()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out: ${what}`);
    }
    await new Promise(resolve => setTimeout(resolve, 20));
  }
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

function countdownNotification(): Notification.INotification | undefined {
  return Notification.manager.notifications.find(
    n =>
      n.message.includes('budget is spent') ||
      n.message.includes('runs out at the current rate')
  );
}

function click(action: Notification.IAction): MouseEvent {
  const event = new MouseEvent('click', { cancelable: true });
  action.callback(event);
  return event;
}

function action(label: string): Notification.IAction {
  const found = (countdownNotification()?.options.actions ?? []).find(
    a => a.label === label
  );
  if (!found) {
    throw new Error(`no ${label} on the countdown`);
  }
  return found;
}

async function dialogInput(): Promise<HTMLInputElement> {
  await until('the dialog', () => !!document.querySelector('.jp-Dialog input'));
  return document.querySelector('.jp-Dialog input') as HTMLInputElement;
}

function pressDialog(label: RegExp): void {
  const buttons = Array.from(
    document.querySelectorAll<HTMLButtonElement>('.jp-Dialog button')
  );
  const button = buttons.find(b => label.test(b.textContent ?? ''));
  if (!button) {
    throw new Error(`no ${label} button in the dialog`);
  }
  button.click();
}

let controllers: BudgetController[] = [];
let models: GpuCostModel[] = [];

function makeController(server: BudgetServer): BudgetController {
  const model = new GpuCostModel({ serverSettings: server.settings });
  models.push(model);
  const controller = new BudgetController(model, server.settings, null);
  controllers.push(controller);
  return controller;
}

afterEach(() => {
  jest.restoreAllMocks();
  for (const controller of controllers) {
    controller.dispose();
  }
  controllers = [];
  for (const model of models) {
    model.dispose();
  }
  models = [];
  Notification.dismiss();
  Dialog.flush();
  document.body.innerHTML = '';
});

describe('the budget settings and the server', () => {
  it('does not send the budget of the settings when the page loads', async () => {
    const server = new BudgetServer(budget({ soft: standing({ amount: 50 }) }));
    const file = new SettingsFile('{"softBudgetUsd": 20}');
    await activate(server, file);
    await until('a first answer', () =>
      server.requests.some(r => r.url.includes('api/status'))
    );
    await sleep(200);
    expect(server.puts()).toEqual([]);
    expect(server.status.soft?.amount).toBe(50);
    // the settings now say what the server has
    await until('the settings to follow the server', () => {
      return file.user().softBudgetUsd === 50;
    });
  });

  it("follows the server's budget however it was set, and sends a change saved in the settings", async () => {
    const server = new BudgetServer(budget({ soft: standing({ amount: 8 }) }));
    const file = new SettingsFile('{"softBudgetUsd": 8}');
    const registry = await activate(server, file);
    await until('a first answer', () =>
      server.requests.some(r => r.url.includes('api/status'))
    );
    // set elsewhere (the panel, %gpucost budget, the API)
    server.status = budget({
      soft: standing({ amount: 50, scope: 'day' })
    });
    await until('the settings to follow the server', () => {
      const user = file.user();
      return user.softBudgetUsd === 50 && user.scope === 'day';
    });
    expect(server.puts()).toEqual([]);

    // a change saved in the Settings Editor goes to the server
    await registry.set(PLUGIN, 'softBudgetUsd', 12.5);
    await until('the PUT', () => server.puts().length === 1);
    expect(server.puts()).toEqual([{ amount_usd: 12.5, scope: 'day' }]);
    expect(server.status.soft?.amount).toBe(12.5);

    // removed elsewhere: the settings say so, and nothing is sent back
    server.status = budget({ soft: null, binding: null });
    await until('the settings to follow the removal', () => {
      return file.user().softBudgetUsd === null;
    });
    await sleep(100);
    expect(server.puts()).toHaveLength(1);
    expect(server.status.soft).toBeNull();
  });
});

describe('the budget requests', () => {
  it('reads the budget with the status, naming this page, and never asks the budget route for it', async () => {
    const server = new BudgetServer(budget());
    const controller = makeController(server);
    await controller.refresh();
    const gets = server.requests.filter(r => r.url.includes('/api/status'));
    expect(gets.length).toBeGreaterThan(0);
    for (const get of gets) {
      expect(get.url).toMatch(
        /^http:\/\/localhost:8888\/user\/alice\/gpucost\/api\/status\?client=[0-9a-f-]+(&\d+)?$/
      );
      expect(get.url).toContain(`client=${controller.client}`);
    }
    expect(
      server.requests.filter(
        r => r.method === 'GET' && r.url.includes('/api/budget')
      )
    ).toEqual([]);
    expect(controller.status?.soft?.amount).toBe(5);
  });
});

describe('the budget in the currency of the server', () => {
  it('writes amounts with the symbol the server is configured with', async () => {
    const server = new BudgetServer(
      budget({ soft: standing({ runs_out_at: '2030-01-01T12:00:00Z' }) })
    );
    const controller = makeController(server);
    await controller.refresh();
    expect(controller.item.node.textContent).toBe('budget 42% of €5.00');
    expect(controller.item.node.title).toContain(
      'Your budget: €5.00 per session, €2.10 spent.'
    );
    expect(controller.item.node.textContent).not.toContain('$');
    expect(controller.item.node.title).not.toContain('$');
  });
});

describe('the countdown', () => {
  function graceBudget(): IBudgetStatus {
    return budget({
      state: 'grace',
      soft: standing({ spent: 5.1, remaining: 0, share: 1.02 }),
      grace: {
        started: new Date().toISOString(),
        ends: new Date(Date.now() + 120_000).toISOString(),
        remaining_s: 120,
        reason: 'budget',
        can_raise: true
      }
    });
  }

  it('stays after Raise budget, then Cancel', async () => {
    const server = new BudgetServer(graceBudget());
    const controller = makeController(server);
    await controller.refresh();
    expect(countdownNotification()).toBeDefined();

    // the action keeps its notification: the toast would otherwise close
    const event = click(action('Raise budget'));
    expect(event.defaultPrevented).toBe(true);
    await dialogInput();
    pressDialog(/cancel/i);
    await sleep(1100);
    expect(countdownNotification()?.message).toMatch(
      /Your budget is spent\. .* in 1:5\d\./
    );
    expect(action('Save and stop now')).toBeDefined();
    expect(server.puts()).toEqual([]);
  });

  it("says the GPUs are idle when the hub's stop is for idle GPUs", async () => {
    const ends = new Date(Date.now() + 60_000).toISOString();
    const server = new BudgetServer(
      budget({
        state: 'grace',
        soft: null,
        binding: null,
        grace: {
          started: new Date().toISOString(),
          ends,
          remaining_s: 60,
          reason: 'hub',
          can_raise: false
        },
        hub: {
          source: 'set by your hub admin',
          budgets: [],
          user: 'alice',
          today: 1,
          month: 2,
          stop_at: ends,
          reason: 'idle',
          stop_kind: 'idle',
          reported_at: new Date().toISOString(),
          error: null
        }
      })
    );
    const controller = makeController(server);
    await controller.refresh();
    const shown = Notification.manager.notifications.find(n =>
      n.message.includes('have been idle')
    );
    expect(shown?.message).toMatch(
      /^Your server's GPUs have been idle with no kernel busy: the hub stops the server to free them\. Run something to keep it\. Notebooks are saved and the kernels shut down in (1:00|0:5\d)\.$/
    );
    expect(shown?.message).not.toMatch(/budget is spent/);
  });

  it('says the budget runs out, not that it is spent, before it is', async () => {
    const hard = standing({
      kind: 'hard',
      locked: true,
      amount: 5,
      spent: 4.9,
      remaining: 0.1,
      share: 0.98
    });
    const server = new BudgetServer(
      budget({
        ...graceBudget(),
        hard,
        soft: null,
        binding: 'hard',
        stop: {
          amount: 5,
          budget_kind: 'hard',
          in_s: 17,
          at: new Date(Date.now() + 17_000).toISOString(),
          rate_per_hour: 21.5,
          action: 'shutdown',
          text: 'Stops at €5.00 — in about 17 s at €21.50/h; notebooks saved first, then the kernels shut down.'
        },
        grace: {
          started: new Date().toISOString(),
          ends: new Date(Date.now() + 17_000).toISOString(),
          remaining_s: 17,
          reason: 'budget',
          can_raise: false,
          shortened: 'overrun',
          shortened_text:
            'The 120 s grace is shortened to 17 s: at €21.50/h the full grace would go past the budget.'
        }
      })
    );
    const controller = makeController(server);
    await controller.refresh();
    expect(countdownNotification()?.message).toMatch(
      /^The administrator's budget of €5\.00 runs out at the current rate\. Notebooks are saved and the kernels shut down in 0:1\d\. The 120 s grace is shortened to 17 s: at €21\.50\/h the full grace would go past the budget\.$/
    );
    expect(() => action('Raise budget')).toThrow();
  });

  it('comes back when its notification is dismissed', async () => {
    const server = new BudgetServer(graceBudget());
    const controller = makeController(server);
    await controller.refresh();
    Notification.dismiss(countdownNotification()!.id);
    expect(countdownNotification()).toBeUndefined();
    await sleep(1100);
    expect(countdownNotification()?.message).toMatch(/in 1:5\d\./);
    expect(action('Save and stop now')).toBeDefined();
    expect(action('Raise budget')).toBeDefined();
  });

  it('says it is stopping after Save and stop now', async () => {
    const server = new BudgetServer(graceBudget());
    const controller = makeController(server);
    await controller.refresh();
    const event = click(action('Save and stop now'));
    expect(event.defaultPrevented).toBe(true);
    await until('stop-now', () =>
      server.requests.some(r => r.url.includes('/budget/stop-now'))
    );
    expect(countdownNotification()?.message).toBe(
      'Your budget is spent. Saving notebooks, then the kernels shut down.'
    );
    expect(countdownNotification()?.options.actions).toEqual([]);
  });

  it('raises the budget by any amount with up to 6 decimals, in the server currency', async () => {
    const server = new BudgetServer(
      budget({
        ...graceBudget(),
        soft: standing({
          amount: 0.12,
          spent: 0.13,
          remaining: 0,
          share: 1.08
        })
      })
    );
    const controller = makeController(server);
    await controller.refresh();
    click(action('Raise budget'));
    const input = await dialogInput();
    // what is spent is said, and the amount proposed is above it
    expect(document.querySelector('.jp-Dialog label')?.textContent).toBe(
      '€0.13 spent so far. New budget (€, up to 6 decimals)'
    );
    expect(input.value).toBe('0.26');
    for (const ok of ['0.24', '7.5', '0.3', '12.123456', '50']) {
      input.value = ok;
      expect([ok, input.checkValidity()]).toEqual([ok, true]);
    }
    for (const refused of ['0x10', '1e3', '1.1234567', '-2', '']) {
      input.value = refused;
      expect([refused, input.checkValidity()]).toEqual([refused, false]);
    }
    input.value = '7.5';
    pressDialog(/ok/i);
    await until('the PUT', () => server.puts().length === 1);
    expect(server.puts()).toEqual([{ amount_usd: 7.5, scope: 'session' }]);
    expect(stillSpentWarnings()).toEqual([]);
  });

  it('says so when the amount chosen is still spent', async () => {
    // $1.85 spent under a $0.50 budget
    const server = new BudgetServer(
      budget({
        ...graceBudget(),
        soft: standing({
          amount: 0.5,
          spent: 1.85,
          remaining: 0,
          share: 3.7
        })
      })
    );
    const controller = makeController(server);
    await controller.refresh();
    click(action('Raise budget'));
    const input = await dialogInput();
    expect(Number(input.value)).toBeGreaterThan(1.85);
    input.value = '1';
    pressDialog(/ok/i);
    await until('the PUT', () => server.puts().length === 1);
    await until('the warning', () => stillSpentWarnings().length === 1);
    expect(stillSpentWarnings()).toEqual([
      'Your new budget of €1.00 is already spent (€2.10 spent): the countdown goes on. Raise it above €2.10 to keep working.'
    ]);
  });
});

function stillSpentWarnings(): string[] {
  return Notification.manager.notifications
    .filter(n => n.message.includes('is already spent'))
    .map(n => n.message);
}

describe('the budget warnings', () => {
  it('gives the run-out time in the browser’s time zone', () => {
    const server = new BudgetServer(budget());
    const controller = makeController(server);
    // the same day in New York as in UTC, whatever the hour the tests run at
    // (a run-out time on another day is written with its date)
    const runsOut = new Date('2026-01-15T18:19:00Z');
    jest
      .spyOn(Date, 'now')
      .mockReturnValue(new Date('2026-01-15T15:00:00Z').getTime());
    controller.onEvent({
      schema_id: BUDGET_EVENT_SCHEMA,
      version: 1,
      kind: 'threshold',
      message:
        '50% of your €0.47 session budget is spent; at the current rate it runs out at 18:19 UTC.',
      threshold_pct: 50,
      runs_out_at: runsOut.toISOString()
    } as unknown as Event.Emission);
    const warning = Notification.manager.notifications.find(n =>
      n.message.startsWith('50% of your')
    );
    // 18:19 UTC is 13:19 in New York in winter, 14:19 in summer
    expect(warning?.message).toMatch(
      /^50% of your €0\.47 session budget is spent; at the current rate it runs out at 0[12]:19 PM E[SD]T\.$/
    );
  });
});

describe('the threshold warnings once the budget changes', () => {
  function threshold(
    controller: BudgetController,
    pct: number,
    amount = 3.2
  ): void {
    controller.onEvent({
      schema_id: BUDGET_EVENT_SCHEMA,
      version: 1,
      kind: 'threshold',
      message: `${pct}% of your $${amount.toFixed(2)} session budget is spent.`,
      threshold_pct: pct,
      budget_kind: 'soft',
      scope: 'session',
      amount: amount,
      spent: 3.05
    } as unknown as Event.Emission);
  }

  const warnings = (): string[] =>
    Notification.manager.notifications
      .filter(n => n.message.includes('session budget is spent'))
      .map(n => n.message);

  function spent(amount: number, share: number): IBudgetStatus {
    return budget({
      state: share >= 0.5 ? 'warning' : 'ok',
      soft: standing({
        amount: amount,
        spent: amount * share,
        remaining: amount * (1 - share),
        share
      })
    });
  }

  it('stay while the budget is the same and still spent past them', async () => {
    const server = new BudgetServer(spent(3.2, 0.953));
    const controller = makeController(server);
    threshold(controller, 95);
    await controller.refresh();
    await controller.refresh();
    expect(warnings()).toEqual(['95% of your $3.20 session budget is spent.']);
  });

  it('go when the budget is raised elsewhere (another page, the magic)', async () => {
    const server = new BudgetServer(spent(3.2, 0.953));
    const controller = makeController(server);
    threshold(controller, 80);
    threshold(controller, 95);
    await controller.refresh();
    expect(warnings()).toHaveLength(2);
    server.status = spent(50, 0.061);
    await controller.refresh();
    expect(warnings()).toEqual([]);
  });

  it('go when the budget is raised or removed from this page', async () => {
    const server = new BudgetServer(spent(3.2, 0.953));
    const controller = makeController(server);
    await controller.refresh();
    threshold(controller, 95);
    await controller.applySetting(50, 'session');
    expect(warnings()).toEqual([]);
    threshold(controller, 50, 50);
    await controller.applySetting(null, 'session');
    expect(warnings()).toEqual([]);
  });

  it('go when the share falls back under their threshold (a new period)', async () => {
    const server = new BudgetServer(spent(3.2, 0.953));
    const controller = makeController(server);
    threshold(controller, 50);
    threshold(controller, 95);
    server.status = spent(3.2, 0.6);
    await controller.refresh();
    expect(warnings()).toEqual(['50% of your $3.20 session budget is spent.']);
    server.status = spent(3.2, 0.01);
    await controller.refresh();
    expect(warnings()).toEqual([]);
  });
});

describe('a spot interruption', () => {
  function notification(text: string): Notification.INotification | undefined {
    return Notification.manager.notifications.find(n =>
      n.message.includes(text)
    );
  }

  it('counts down from the pushed event, then shows what was done', async () => {
    const server = new BudgetServer(budget());
    const controller = makeController(server);
    const deadline = new Date(Date.now() + 90_000).toISOString();
    controller.onEvent({
      schema_id: BUDGET_EVENT_SCHEMA,
      kind: 'interruption',
      message: 'AWS is taking this spot machine back in 90 s',
      provider: 'aws',
      deadline,
      seconds_left: 90
    } as unknown as Event.Emission);
    const shown = notification('AWS takes this spot machine back in 1:');
    expect(shown?.type).toBe('error');
    expect(controller.interruption.item.node.textContent).toMatch(
      /^spot: taken back in 1:(30|29)$/
    );
    controller.onEvent({
      schema_id: BUDGET_EVENT_SCHEMA,
      kind: 'interruption-done',
      message: 'Spot interruption: told: done; notebooks saved: done',
      provider: 'aws'
    } as unknown as Event.Emission);
    expect(
      notification('Spot interruption: told: done; notebooks saved: done')
    ).toBeDefined();
    // the countdown goes on to the deadline
    expect(controller.interruption.active).toBe(true);
  });

  it('a page that polls saves on the interruption and counts down', async () => {
    const deadline = new Date(Date.now() + 60_000).toISOString();
    const server = new BudgetServer(
      budget({
        save_request: { id: 'req-1' },
        interruption: {
          current: {
            provider: 'gcp',
            action: 'preempt',
            deadline,
            message: '',
            steps: [{ name: 'tell', state: 'done', detail: '' }]
          },
          last: null
        }
      })
    );
    const controller = makeController(server);
    await controller.refresh();
    await until('the save acknowledged', () =>
      server.requests.some(
        r =>
          r.method === 'POST' &&
          new URL(r.url).pathname.endsWith('/gpucost/api/budget/saved')
      )
    );
    const ack = server.requests.find(r => r.method === 'POST')!.body as {
      request_id: string;
    };
    expect(ack.request_id).toBe('req-1');
    expect(
      notification('Google Cloud takes this spot machine back in')
    ).toBeDefined();
  });

  it('says what the last interruption cost, once, in local time', async () => {
    const server = new BudgetServer(
      budget({
        interruption: {
          current: null,
          last: {
            line: 'interrupted at 14:02 UTC by AWS (spot): $0.41 since the last checkpoint',
            deadline: '2026-11-27T14:02:00+00:00'
          }
        }
      })
    );
    const controller = makeController(server);
    await controller.refresh();
    await until('the line shown', () => !!notification('by AWS (spot)'));
    expect(notification('by AWS (spot)')!.message).not.toContain('UTC');
    await controller.refresh();
    expect(
      Notification.manager.notifications.filter(n =>
        n.message.includes('by AWS (spot)')
      )
    ).toHaveLength(1);
  });
});
