import { Dialog, Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import * as React from 'react';

import {
  BudgetCountdown,
  budgetDisplayState,
  budgetText,
  confirmStop,
  countdownReason,
  formatAhead,
  IBudgetGrace,
  IBudgetStanding,
  IBudgetStatus,
  offersRaise,
  timeLeftText
} from '../budget';
import { Machine } from '../panel/machine';
import { IPanelStatus } from '../panel/types';
import { fakeServer, makeStatus } from './fixtures';

import aboutRule from './about-rule.json';

const trans = nullTranslator.load('jupyter_gpucost');

function standing(overrides: Partial<IBudgetStanding> = {}): IBudgetStanding {
  return {
    kind: 'soft',
    locked: false,
    scope: 'session',
    amount: 1000,
    spent: 0.11,
    remaining: 999.89,
    share: 0.00011,
    runs_out_at: null,
    fired_pct: [],
    ...overrides
  };
}

const ENDS = Date.UTC(2026, 10, 29, 8, 10, 0);

function grace(
  reason: IBudgetGrace['reason'],
  more: Partial<IBudgetGrace> = {}
): IBudgetGrace {
  return {
    started: new Date(ENDS - 600_000).toISOString(),
    ends: new Date(ENDS).toISOString(),
    remaining_s: 598,
    reason,
    can_raise: false,
    ...more
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
    grace_s: 600,
    grace: null,
    action: 'shutdown',
    save_request: null,
    scopes: ['session'],
    last_action: null,
    ...overrides
  };
}

/** `budgetText` 598 s before the countdown ends. */
function shown(status: IBudgetStatus): string {
  return budgetText(status, ENDS - 598_000, '$');
}

/** Press the button labelled `label` of the dialog once it is shown. */
async function pressDialog(label: RegExp): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const button = Array.from(
      document.querySelectorAll<HTMLButtonElement>('.jp-Dialog button')
    ).find(b => label.test(b.textContent ?? ''));
    if (button) {
      button.click();
      await new Promise(resolve => setTimeout(resolve, 0));
      return;
    }
    await new Promise(resolve => setTimeout(resolve, 20));
  }
  throw new Error(`no ${label} button in a dialog`);
}

/** The title of the dialog shown, once it has one (`''` if none comes). */
async function dialogTitle(): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const title =
      document.querySelector('.jp-Dialog .jp-Dialog-header')?.textContent ?? '';
    if (title) {
      return title;
    }
    await new Promise(resolve => setTimeout(resolve, 20));
  }
  return '';
}

// a busy machine: the dialogs and the panel take a while to render
jest.setTimeout(30_000);

afterEach(() => {
  Notification.dismiss();
  Dialog.flush();
  document.body.innerHTML = '';
});

describe('a countdown is worded by its reason', () => {
  it('calls a manual stop a manual stop, never a spent budget', () => {
    // $0.11 of a $1,000 budget spent, then "Stop server"
    const status = budget({
      state: 'grace',
      grace: grace('user', { can_cancel: true }),
      reason: 'user'
    });
    expect(shown(status)).toBe('manual stop in 9:58');
    expect(shown(status)).not.toContain('budget');
    expect(countdownReason(status)).toBe('user');
    // not the budget's red "exceeded"
    expect(budgetDisplayState(status)).toBe('stop');
    expect(
      shown({ ...status, state: 'enforcing', grace: null, reason: 'user' })
    ).toBe('manual stop · saving and stopping');
    expect(
      shown({
        ...status,
        state: 'acted',
        grace: null,
        reason: null,
        last_action: {
          at: '',
          action: 'stop-server',
          reason: 'user',
          notebooks_saved: 1
        }
      })
    ).toBe('stopped as you asked');
  });

  it('shows a manual stop where no budget is set', () => {
    const status = budget({
      state: 'grace',
      soft: null,
      binding: null,
      grace: grace('user', { can_cancel: true })
    });
    expect(shown(status)).toBe('manual stop in 9:58');
    expect(budgetDisplayState(status)).toBe('stop');
  });

  it('words each reason as its own', () => {
    const hub = {
      source: 'set by your hub admin',
      budgets: [],
      user: 'alice',
      today: null,
      month: null,
      stop_at: new Date(ENDS).toISOString(),
      reason: null,
      reported_at: null,
      error: null
    };
    const cases: [IBudgetStatus, string][] = [
      [
        budget({ state: 'grace', grace: grace('done') }),
        'run done · stop in 9:58'
      ],
      [
        budget({ state: 'grace', grace: grace('idle') }),
        'idle GPUs · stop in 9:58'
      ],
      [
        budget({
          state: 'grace',
          grace: grace('hub'),
          hub: { ...hub, stop_kind: 'idle' }
        }),
        'hub reclaims idle GPUs in 9:58'
      ],
      [
        budget({
          state: 'grace',
          grace: grace('hub'),
          hub: { ...hub, stop_kind: 'budget' }
        }),
        'hub budget spent · stop in 9:58'
      ],
      [
        budget({
          state: 'grace',
          soft: standing({ amount: 5, spent: 5.2, share: 1.04 }),
          grace: grace('budget', { can_raise: true })
        }),
        'budget spent · stop in 9:58'
      ]
    ];
    for (const [status, text] of cases) {
      expect(shown(status)).toBe(text);
    }
    // a budget's countdown is the budget's: the cost item turns red
    expect(budgetDisplayState(cases[4][0])).toBe('exceeded');
    expect(budgetDisplayState(cases[0][0])).toBe('stop');
  });

  it('offers Raise budget on a budget countdown only', () => {
    const mine = budget({
      state: 'grace',
      grace: grace('budget', { can_raise: true })
    });
    expect(offersRaise(mine, true)).toBe(true);
    // an older server said can_raise for any countdown with a budget of one's own
    const manual = budget({
      state: 'grace',
      grace: grace('user', { can_raise: true })
    });
    expect(offersRaise(manual, true)).toBe(false);
    // before the status arrives, the pushed event's reason decides
    expect(offersRaise(null, true, 'user')).toBe(false);
    expect(offersRaise(null, true, 'budget')).toBe(true);
  });
});

describe('the countdown notification by reason', () => {
  function countdown(status: IBudgetStatus): BudgetCountdown {
    const host = {
      status,
      symbol: '$',
      stopNow: () => Promise.resolve(),
      raise: () => Promise.resolve(),
      render: () => undefined
    };
    return new BudgetCountdown(host);
  }

  function shownNotification(): Notification.INotification {
    const found = Notification.manager.notifications[0];
    if (!found) {
      throw new Error('no countdown notification');
    }
    return found;
  }

  it('a manual stop: as you asked, with no Raise budget', () => {
    const ends = new Date(Date.now() + 600_000).toISOString();
    const status = budget({
      state: 'grace',
      grace: { ...grace('user', { can_raise: true }), ends }
    });
    const shownCountdown = countdown(status);
    shownCountdown.show(ends, true);
    const note = shownNotification();
    expect(note.message).toMatch(/^Stopping as you asked\. /);
    expect(note.message).not.toContain('budget');
    const labels = (note.options.actions ?? []).map(a => a.label);
    expect(labels).toEqual(['Save and stop now']);
    shownCountdown.close();
  });

  it("a budget's: the budget, with Raise budget", () => {
    const ends = new Date(Date.now() + 120_000).toISOString();
    const status = budget({
      state: 'grace',
      soft: standing({ amount: 5, spent: 5.1, share: 1.02 }),
      grace: { ...grace('budget', { can_raise: true }), ends }
    });
    const shownCountdown = countdown(status);
    shownCountdown.show(ends, true);
    const note = shownNotification();
    expect(note.message).toMatch(/^Your budget is spent\. /);
    const labels = (note.options.actions ?? []).map(a => a.label);
    expect(labels).toEqual(['Save and stop now', 'Raise budget']);
    shownCountdown.close();
  });

  it("the server's idle GPUs: not a budget", () => {
    const ends = new Date(Date.now() + 60_000).toISOString();
    const status = budget({
      state: 'grace',
      grace: { ...grace('idle'), ends }
    });
    const shownCountdown = countdown(status);
    shownCountdown.show(ends, false);
    expect(shownNotification().message).toMatch(
      /^The GPUs have been idle while costing money/
    );
    shownCountdown.close();
  });
});

describe('the time left at the current rate', () => {
  it("writes a duration ahead as the server's stop plan does", () => {
    for (const { seconds, shown } of aboutRule.cases) {
      expect(formatAhead(seconds)).toBe(shown);
    }
  });

  it('is the headline: about 2 h 10 min left at $6.86/h', () => {
    expect(
      timeLeftText({ stop: { in_s: 7800, rate_per_hour: 6.862 } }, '$')
    ).toBe('about 2 h 10 min left at $6.86/h');
    expect(
      timeLeftText({ stop: { in_s: 840, rate_per_hour: 21.5 } }, '€')
    ).toBe('about 14 min left at €21.50/h');
    // an older server without the rate
    expect(timeLeftText({ stop: { in_s: 840 } }, '$')).toBe(
      'about 14 min left'
    );
    // nothing runs out: no headline
    expect(timeLeftText({ stop: null }, '$')).toBeNull();
    expect(timeLeftText({}, '$')).toBeNull();
  });
});

describe('a manual stop asks first', () => {
  it('Cancel starts nothing; the stop button confirms', async () => {
    let answer = confirmStop('stop-server');
    await pressDialog(/^Cancel$/);
    expect(await answer).toBe(false);
    answer = confirmStop('stop-instance');
    expect(await dialogTitle()).toBe('Stop this machine?');
    await pressDialog(/^Stop machine$/);
    expect(await answer).toBe(true);
  });

  it("the panel's stop buttons are secondary and ask before they send", async () => {
    const server = fakeServer([{ status: 200, body: {} }]);
    const status = {
      ...makeStatus(),
      budget: {
        state: 'ok',
        hard: null,
        soft: null,
        scopes: ['session'],
        last_action: null
      }
    } as unknown as IPanelStatus;
    const widget = ReactWidget.create(
      <Machine
        status={status}
        symbol="$"
        trans={trans}
        settings={server.settings}
      />
    );
    Widget.attach(widget, document.body);
    MessageLoop.sendMessage(widget, Widget.Msg.UpdateRequest);
    await widget.renderPromise;
    await new Promise(resolve => setTimeout(resolve, 0));
    const host = widget.node;
    const now = host.querySelector<HTMLButtonElement>('[data-stop="now"]')!;
    const idle = host.querySelector<HTMLButtonElement>('[data-stop="idle"]')!;
    for (const button of [now, idle]) {
      expect(button.classList.contains('jp-mod-warn')).toBe(false);
      expect(button.classList.contains('jp-gpucost-stop-button')).toBe(true);
    }
    now.click();
    await pressDialog(/^Cancel$/);
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(server.urls).toEqual([]);
    now.click();
    await pressDialog(/^Stop server$/);
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(server.urls.map(url => url.split('?')[0])).toEqual([
      'http://localhost:8888/user/alice/gpucost/api/budget/stop'
    ]);
    widget.dispose();
  });
});
