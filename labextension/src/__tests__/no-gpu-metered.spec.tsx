import { nullTranslator } from '@jupyterlab/translation';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import * as React from 'react';

import { describe as describeStatus } from '../display';
import { GpuCostModel } from '../model';
import { BudgetCannotAct, MeteringBanner } from '../panel/metering';
import { Totals } from '../panel/summary';
import { IPanelStatus } from '../panel/types';
import { IGpuCostStatus } from '../tokens';
import { GpuCostTopBarItem } from '../topbar';
import { GpuCostStatus } from '../view';
import { fakeServer, makeNoTelemetryStatus } from './fixtures';
import { renderNode } from './render';

/*
 * No GPU seen is a state, not $0: "GPU cost unknown ⚠" with the reason, budgets
 * off with a sentence, and a known machine priced whole and labelled so.
 */

const trans = nullTranslator.load('jupyter_gpucost');
const REASON = 'libnvidia-ml.so not found: no NVIDIA driver on this machine';
const REFUSAL = 'no GPU is metered: a budget cannot act';

function unknownStatus(): IGpuCostStatus {
  return {
    ...makeNoTelemetryStatus(),
    cost: 0,
    rate_per_hour: 0,
    base_price_per_hour: 0,
    base_cost: 0,
    telemetry: {
      source: 'nvml',
      simulated: false,
      available: false,
      reason: REASON,
      detail: null
    },
    metering: {
      state: 'unknown',
      reason: REASON,
      instance: null,
      budget: REFUSAL,
      message: `No GPU is metered (${REASON}): the machine may still bill, and a budget cannot act.`
    }
  } as IGpuCostStatus;
}

function wholeStatus(): IGpuCostStatus {
  const message = `No GPU is seen (${REASON}): the p5.48xlarge is priced whole from its instance, $55.04/h.`;
  return {
    ...makeNoTelemetryStatus(),
    cost: 0.92,
    rate_per_hour: 55.04,
    base_price_per_hour: 55.04,
    base_cost: 0.92,
    warnings: [{ code: 'instance-whole', message }],
    metering: {
      state: 'instance',
      reason: REASON,
      instance: 'p5.48xlarge',
      budget: null,
      message
    }
  } as IGpuCostStatus;
}

function snapshot(status: IGpuCostStatus) {
  return { status, receivedAt: 0, missing: false, error: null };
}

describe('no GPU seen, nothing to price the machine by', () => {
  it('says the GPU cost is unknown, never $0.00, and why', () => {
    const shown = describeStatus(snapshot(unknownStatus()), trans);
    expect(shown.state).toBe('unknown');
    expect(shown.message).toBe('GPU cost unknown ⚠');
    expect(shown.cost).toBeNull();
    expect(shown.rate).toBeNull();
    expect(shown.title).toContain(REASON);
    expect(shown.title).toContain('a budget cannot act');
  });

  it('reads the same in the status bar and the Notebook 7 chip', async () => {
    const server = fakeServer([{ status: 200, body: unknownStatus() }]);
    const model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    const item = new GpuCostTopBarItem({ model });
    const status = new GpuCostStatus(model);
    Widget.attach(item, document.body);
    Widget.attach(status, document.body);
    await model.fetch();
    MessageLoop.sendMessage(item, Widget.Msg.UpdateRequest);
    MessageLoop.sendMessage(status, Widget.Msg.UpdateRequest);
    await item.renderPromise;
    await status.renderPromise;
    expect(status.node.textContent).toBe('GPU cost unknown ⚠');
    expect(status.node.dataset.state).toBe('unknown');
    expect(status.node.title).toContain(REASON);
    expect(item.node.textContent).toBe(status.node.textContent);
    expect(item.node.title).toContain(REASON);
    expect(status.node.textContent).not.toContain('$0.00');
    item.dispose();
    status.dispose();
    model.dispose();
  });

  it('shows the banner with the reason and no $0 totals in the panel', async () => {
    const s = unknownStatus() as unknown as IPanelStatus;
    const banner = await renderNode(
      <MeteringBanner status={s} trans={trans} />
    );
    const shown = banner.querySelector('[data-state="cost-unknown"]');
    expect(shown?.textContent).toContain('GPU cost unknown ⚠');
    expect(shown?.textContent).toContain(REASON);
    const totals = await renderNode(
      <Totals status={s} symbol="$" trans={trans} />
    );
    for (const key of ['session', 'rate']) {
      expect(
        totals.querySelector(`[data-total="${key}"] .jp-gpucost-total-value`)
          ?.textContent
      ).toBe('unknown ⚠');
    }
  });

  it('turns the budget off with a sentence', async () => {
    const node = await renderNode(
      <BudgetCannotAct sentence={REFUSAL} trans={trans} />
    );
    expect(
      node.querySelector('[data-state="budget-disabled"]')?.textContent
    ).toBe('Budgets are off: no GPU is metered: a budget cannot act.');
    expect(node.querySelector('input, button')).toBeNull();
  });
});

describe('no GPU seen on a known instance', () => {
  it('prices the machine whole and labels it so', () => {
    const shown = describeStatus(snapshot(wholeStatus()), trans);
    expect(shown.state).toBe('instance');
    expect(shown.cost).toBe('$0.92');
    expect(shown.rate).toBe('$55.04/h');
    expect(shown.wholeInstance).toBe('p5.48xlarge, priced whole');
    expect(shown.noTelemetry).toBe(false);
    expect(shown.title).toContain('priced whole from its instance, $55.04/h');
  });

  it('shows the label in the panel too', async () => {
    const s = wholeStatus() as unknown as IPanelStatus;
    const node = await renderNode(<MeteringBanner status={s} trans={trans} />);
    expect(
      node.querySelector('[data-state="whole-instance"]')?.textContent
    ).toContain('p5.48xlarge, priced whole');
  });
});
