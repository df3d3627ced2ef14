import { nullTranslator } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';

import { IBudgetStatus } from '../budget/tokens';
import {
  IMachine,
  machineLabel,
  machineLine,
  stillCosts,
  stillCostsText
} from '../machine/format';
import { MachineItem } from '../machine';
import { IGpuCostModel, IGpuCostStatus } from '../tokens';
import { fakeServer, makeStatus } from './fixtures';

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
  instance_price_per_hour: null,
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
      still_per_hour: still
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

  it('says a rental is priced at the rate its provider bills', () => {
    const billed = {
      ...G5,
      market: 'on-demand',
      priced: 'instance' as const,
      instance_price_per_hour: 1.006,
      instance_price_basis: 'billed',
      instance_price_label: 'billed rate from Lambda, read 14:02 UTC'
    };
    expect(machineLine({ machine: billed }, '$', trans)).toBe(
      'Machine: g5.xlarge, on-demand, us-east-1 (detected); priced as a whole instance: $1.01/h (billed rate from Lambda, read 14:02 UTC)'
    );
  });

  it('says its whole-instance price', () => {
    const whole = {
      ...G5,
      market: 'on-demand',
      priced: 'instance' as const,
      instance_price_per_hour: 1.006
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

/**
 * Press the button labelled `label` of the dialog once it is shown.
 */
async function pressDialog(label: RegExp): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const button = Array.from(
      document.querySelectorAll<HTMLButtonElement>('.jp-Dialog button')
    ).find(b => label.test(b.textContent ?? ''));
    if (button) {
      button.click();
      // the dialog resolves when it closes
      await new Promise(resolve => setTimeout(resolve, 0));
      return;
    }
    await new Promise(resolve => setTimeout(resolve, 20));
  }
  throw new Error(`no ${label} button in a dialog`);
}

class FakeModel {
  readonly stateChanged = new Signal<FakeModel, void>(this);
  status: IGpuCostStatus | null = null;
  budget: IBudgetStatus | null = null;

  show(status: IGpuCostStatus, budget: IBudgetStatus): void {
    this.status = status;
    this.budget = budget;
    this.stateChanged.emit();
  }
}

function item(): {
  model: FakeModel;
  widget: MachineItem;
  server: ReturnType<typeof fakeServer>;
} {
  const model = new FakeModel();
  const server = fakeServer([{ status: 200, body: acted(6.862) }]);
  const widget = new MachineItem(
    model as unknown as IGpuCostModel,
    server.settings
  );
  return { model, widget, server };
}

describe('the machine status item', () => {
  it('says what still costs after the action, with Stop machine', async () => {
    const { model, widget, server } = item();
    expect(widget.active).toBe(false);
    model.show({ ...makeStatus(), machine: G5 }, acted(6.862));
    expect(widget.active).toBe(true);
    expect(widget.node.textContent).toContain(
      'this machine still costs $6.86/h'
    );
    const button = widget.node.querySelector('button')!;
    expect(button.textContent).toBe('Stop machine');
    // secondary, not a filled red button
    expect(button.classList.contains('jp-mod-warn')).toBe(false);
    expect(button.classList.contains('jp-gpucost-stop-button')).toBe(true);
    button.click();
    // it asks first: Cancel sends nothing
    await pressDialog(/^Cancel$/);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(server.urls).toEqual([]);
    expect(button.disabled).toBe(false);
    button.click();
    await pressDialog(/^Stop machine$/);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(server.urls.map(url => url.split('?')[0])).toEqual([
      'http://localhost:8888/user/alice/gpucost/api/budget/stop'
    ]);
    // asked once: the button waits for the answer
    expect(button.disabled).toBe(true);
  });

  it('offers Stop server where the machine cannot be stopped from inside', () => {
    const { model, widget } = item();
    model.show(
      { ...makeStatus(), machine: { ...G5, stoppable: false } },
      acted(6.862)
    );
    expect(widget.node.querySelector('button')!.textContent).toBe(
      'Stop server'
    );
  });

  it('offers Cancel stop during a countdown the user started', () => {
    const { model, widget } = item();
    model.show(makeStatus(), {
      ...acted(undefined),
      state: 'grace',
      grace: {
        started: '2026-11-25T16:00:00+00:00',
        ends: '2026-11-25T16:02:00+00:00',
        remaining_s: 120,
        reason: 'user',
        can_raise: false,
        action: 'stop-instance',
        can_cancel: true
      }
    });
    expect(widget.node.querySelector('button')!.textContent).toBe(
      'Cancel stop'
    );
  });

  it('is hidden when nothing still costs', () => {
    const { model, widget } = item();
    model.show(makeStatus(), acted(undefined));
    expect(widget.active).toBe(false);
    expect(widget.node.querySelector('button')).toBeNull();
  });
});
