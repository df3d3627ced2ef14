import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { GpuCostModel } from '../model';
import { GpuCostTopBarItem } from '../topbar';
import { GpuCostStatus, STATUS_ITEM_ID } from '../view';
import {
  fakeServer,
  FakeAnswer,
  makeNoTelemetryStatus,
  makeSimulatedStatus,
  makeStatus,
  makeUnpricedStatus
} from './fixtures';

/** Render the item now and wait for React to commit. */
async function rendered(view: GpuCostStatus): Promise<HTMLElement> {
  MessageLoop.sendMessage(view, Widget.Msg.UpdateRequest);
  await view.renderPromise;
  return view.node;
}

describe('GpuCostStatus (the status bar item)', () => {
  let model: GpuCostModel;
  let view: GpuCostStatus;

  async function showAfter(...answers: FakeAnswer[]): Promise<HTMLElement> {
    const server = fakeServer(answers);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    view = new GpuCostStatus(model);
    Widget.attach(view, document.body);
    for (let i = 0; i < answers.length; i++) {
      await model.fetch().catch(() => undefined);
    }
    return rendered(view);
  }

  afterEach(() => {
    view.dispose();
    model.dispose();
  });

  it('has the id, class and a loading state before any answer', async () => {
    const server = fakeServer([]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    view = new GpuCostStatus(model);
    Widget.attach(view, document.body);
    const node = await rendered(view);
    expect(document.getElementById(STATUS_ITEM_ID)).toBe(node);
    expect(node.id).toBe('jp-gpucost-status');
    expect(node.classList).toContain('jp-gpucost-StatusItem');
    expect(node.dataset.state).toBe('loading');
    expect(node.textContent).toBe('GPU cost: …');
  });

  it('shows cost, rate and the breakdown tooltip', async () => {
    const node = await showAfter({ status: 200, body: makeStatus() });
    expect(node.dataset.state).toBe('ok');
    expect(node.textContent).toBe('$2.83 · $6.86/h');
    expect(node.querySelector('.jp-gpucost-cost')?.textContent).toBe('$2.83');
    expect(node.querySelector('.jp-gpucost-rate')?.textContent).toBe('$6.86/h');
    expect(node.querySelector('.jp-gpucost-simulated')).toBeNull();
    expect(node.querySelector('.jp-gpucost-warning')).toBeNull();
    expect(node.title).toBe(
      'This session has cost $2.83 on 2× A100-80GB (aws on-demand, prices as of 2026-01-21). Idle: $1.10.'
    );
  });

  it('tags simulated telemetry visibly', async () => {
    const node = await showAfter({ status: 200, body: makeSimulatedStatus() });
    expect(node.dataset.state).toBe('simulated');
    expect(node.textContent).toBe('$2.83 · $6.86/h · simulated');
    expect(node.querySelector('.jp-gpucost-simulated')?.textContent).toBe(
      ' · simulated'
    );
    expect(node.title).toMatch(/Simulated telemetry\.$/);
  });

  it('warns about unpriced GPUs', async () => {
    const node = await showAfter({ status: 200, body: makeUnpricedStatus() });
    expect(node.dataset.state).toBe('unpriced');
    expect(node.querySelector('.jp-gpucost-warning')?.textContent).toBe('⚠ ');
    expect(node.textContent).toBe('⚠ $1.23 · $3.43/h');
    expect(node.title).toContain('No price, not counted: 1× L40S.');
    expect(node.title).toContain('No aws on-demand price for NVIDIA L40S');
  });

  it('shows the cost without telemetry, and why', async () => {
    const node = await showAfter({
      status: 200,
      body: makeNoTelemetryStatus()
    });
    expect(node.dataset.state).toBe('no-telemetry');
    expect(node.textContent).toBe('$0.50 · $1.00/h · no GPU telemetry');
    expect(node.title).toContain('No GPU telemetry: NVML library not found');
  });

  it('says the server extension is not enabled on a 404', async () => {
    const node = await showAfter({ status: 404 });
    expect(node.dataset.state).toBe('missing');
    expect(node.textContent).toBe('GPU cost: server extension not enabled');
  });

  it('keeps the last value, marked stale, when the server stops answering', async () => {
    const node = await showAfter(
      { status: 200, body: makeStatus() },
      { throws: new TypeError('Failed to fetch') }
    );
    expect(node.dataset.state).toBe('error');
    expect(node.textContent).toBe('$2.83 · $6.86/h · stale');
    expect(node.querySelector('.jp-gpucost-stale')).not.toBeNull();
    expect(node.title).toContain('the last request failed (Failed to fetch)');
  });

  it('recovers when the server answers again', async () => {
    const node = await showAfter(
      { status: 200, body: makeStatus({ cost: 0.0123 }) },
      { throws: new TypeError('Failed to fetch') },
      { status: 200, body: makeStatus({ cost: 0.0456 }) }
    );
    expect(node.dataset.state).toBe('ok');
    expect(node.textContent).toBe('$0.0456 · $6.86/h');
  });

  it('re-renders by itself when the model changes', async () => {
    const server = fakeServer([{ status: 200, body: makeStatus() }]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    view = new GpuCostStatus(model);
    Widget.attach(view, document.body);
    await rendered(view);
    await model.fetch();
    // No explicit update: the model's stateChanged schedules one.
    await new Promise(resolve => requestAnimationFrame(resolve));
    await view.renderPromise;
    expect(view.node.dataset.state).toBe('ok');
    expect(view.node.textContent).toBe('$2.83 · $6.86/h');
  });
});

describe('GpuCostTopBarItem (Notebook 7 top bar)', () => {
  it('says what the status bar says: no GPU telemetry, simulated', async () => {
    for (const [body, shown] of [
      [makeNoTelemetryStatus(), '$0.50 · $1.00/h · no GPU telemetry'],
      [makeSimulatedStatus(), /^\$[\d.,]+ · \$[\d.,]+\/h · simulated$/]
    ] as const) {
      const server = fakeServer([{ status: 200, body }]);
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
      await item.renderPromise;
      const statusNode = await rendered(status);
      expect(item.node.textContent).toMatch(shown);
      expect(item.node.textContent).toBe(statusNode.textContent);
      item.dispose();
      status.dispose();
      model.dispose();
    }
  });
});
