import { Event } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';

import { GpuCostModel } from '../model';
import { GpuCostRequestError } from '../request';
import {
  fakeServer,
  makeSimulatedStatus,
  makeStatus,
  makeUnpricedStatus
} from './fixtures';

/** Swallow the rejection a failed request must produce (it drives backoff). */
async function fetchFailing(model: GpuCostModel): Promise<unknown> {
  try {
    await model.fetch();
  } catch (reason) {
    return reason;
  }
  throw new Error('fetch() should have rejected');
}

describe('GpuCostModel against a mocked server', () => {
  let model: GpuCostModel | null = null;

  afterEach(() => {
    model?.dispose();
    model = null;
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it('asks the status route under the base URL', async () => {
    const server = fakeServer([{ status: 200, body: makeStatus() }]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    await model.fetch();
    expect(server.urls).toHaveLength(1);
    expect(server.urls[0]).toMatch(
      /^http:\/\/localhost:8888\/user\/alice\/gpucost\/api\/status\?client=[0-9a-f-]{36}(&\d+)?$/
    );
    expect(server.urls[0]).toContain(`client=${model.client}`);
  });

  it('follows 404 => missing, 200 => ok, network error => stale', async () => {
    const server = fakeServer([
      { status: 404 },
      { status: 200, body: makeStatus() },
      { throws: new TypeError('Failed to fetch') },
      { status: 200, body: makeSimulatedStatus({ cost: 3.1 }) }
    ]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    const changes: string[] = [];
    model.stateChanged.connect(() => changes.push(model!.state));

    expect(model.state).toBe('loading');

    const missing = await fetchFailing(model);
    expect(missing).toBeInstanceOf(GpuCostRequestError);
    expect((missing as GpuCostRequestError).kind).toBe('missing');
    expect(model.state).toBe('missing');
    expect(model.status).toBeNull();

    await model.fetch();
    expect(model.state).toBe('ok');
    expect(model.status?.cost).toBe(2.830123);
    expect(model.error).toBeNull();

    const network = await fetchFailing(model);
    expect((network as GpuCostRequestError).kind).toBe('network');
    expect(model.state).toBe('error');
    expect(model.error).toBe('Failed to fetch');
    // The last good value is kept.
    expect(model.status?.cost).toBe(2.830123);
    expect(model.receivedAt).not.toBeNull();

    await model.fetch();
    expect(model.state).toBe('simulated');
    expect(model.status?.cost).toBe(3.1);
    expect(model.error).toBeNull();

    expect(changes).toEqual(['missing', 'ok', 'error', 'simulated']);
  });

  it('reports a server error with its message and keeps the value', async () => {
    const server = fakeServer([
      { status: 200, body: makeUnpricedStatus() },
      { status: 500, body: { message: 'meter crashed' } }
    ]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    await model.fetch();
    expect(model.state).toBe('unpriced');
    const error = await fetchFailing(model);
    expect((error as GpuCostRequestError).kind).toBe('http');
    expect(model.error).toBe('HTTP 500: meter crashed');
    expect(model.status?.cost).toBe(1.23);
  });

  it('rejects an answer that is not a status', async () => {
    const server = fakeServer([{ status: 200, body: { hello: 'world' } }]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    const error = await fetchFailing(model);
    expect((error as GpuCostRequestError).kind).toBe('invalid');
    expect(model.state).toBe('error');
  });

  it('fills in fields an older server leaves out', async () => {
    const partial: { [key: string]: unknown } = { ...makeStatus() };
    delete partial.warnings;
    delete partial.telemetry;
    const server = fakeServer([{ status: 200, body: partial }]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      autoStart: false
    });
    await model.fetch();
    expect(model.status?.warnings).toEqual([]);
    expect(model.status?.telemetry.available).toBe(true);
    expect(model.state).toBe('ok');
  });
});

describe('GpuCostModel polling', () => {
  let model: GpuCostModel | null = null;

  afterEach(() => {
    model?.dispose();
    model = null;
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it('polls at the interval and backs off after errors', async () => {
    jest.useFakeTimers();
    // Make the poll's randomised backoff take its longest step.
    jest.spyOn(Math, 'random').mockReturnValue(0.999);
    const server = fakeServer([
      { status: 200, body: makeStatus() },
      { status: 200, body: makeStatus() },
      { throws: new TypeError('Failed to fetch') }
    ]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      intervalSeconds: 1
    });

    await jest.advanceTimersByTimeAsync(10);
    expect(server.urls).toHaveLength(1);
    expect(model.state).toBe('ok');

    await jest.advanceTimersByTimeAsync(1000);
    expect(server.urls).toHaveLength(2);

    // Third request fails: the value is kept, marked as an error...
    await jest.advanceTimersByTimeAsync(1000);
    expect(server.urls).toHaveLength(3);
    expect(model.state).toBe('error');
    expect(model.status).not.toBeNull();
    expect(model.poll.state.phase).toBe('rejected');

    // ...and the poll waits longer than its interval before the next try.
    await jest.advanceTimersByTimeAsync(1500);
    expect(server.urls).toHaveLength(3);
    await jest.advanceTimersByTimeAsync(2000);
    expect(server.urls).toHaveLength(4);
    expect(model.poll.state.interval).toBeGreaterThan(3000);
  });

  it('applies a new interval at once', async () => {
    jest.useFakeTimers();
    const server = fakeServer([{ status: 200, body: makeStatus() }]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      intervalSeconds: 60
    });
    await jest.advanceTimersByTimeAsync(10);
    expect(server.urls).toHaveLength(1);

    model.intervalSeconds = 5;
    expect(model.poll.frequency.interval).toBe(5000);
    await jest.advanceTimersByTimeAsync(10);
    expect(server.urls).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(5000);
    expect(server.urls).toHaveLength(3);
  });

  it('clamps the interval to the schema bounds', () => {
    model = new GpuCostModel({ autoStart: false, intervalSeconds: 0.1 });
    expect(model.intervalSeconds).toBe(1);
    model.intervalSeconds = 1e9;
    expect(model.intervalSeconds).toBe(3600);
  });

  it('stops polling when disposed', async () => {
    jest.useFakeTimers();
    const server = fakeServer([{ status: 200, body: makeStatus() }]);
    model = new GpuCostModel({
      serverSettings: server.settings,
      intervalSeconds: 1
    });
    await jest.advanceTimersByTimeAsync(10);
    model.dispose();
    await jest.advanceTimersByTimeAsync(5000);
    expect(server.urls).toHaveLength(1);
  });
});

describe('GpuCostModel pushed by the server (event bus)', () => {
  const STATUS = 'https://events.jupyter-gpucost.org/status/v1';
  let model: GpuCostModel | null = null;

  afterEach(() => {
    model?.dispose();
    model = null;
  });

  const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

  function pushed(
    stream: Signal<unknown, Event.Emission>,
    cost: number,
    heartbeat = 0
  ): void {
    stream.emit({
      schema_id: STATUS,
      version: 1,
      status: makeStatus({ cost: cost }),
      interval_s: 0,
      heartbeat_s: heartbeat
    } as unknown as Event.Emission);
  }

  function setup() {
    const server = fakeServer([{ status: 200, body: makeStatus() }]);
    const stream = new Signal<unknown, Event.Emission>({});
    model = new GpuCostModel({
      serverSettings: server.settings,
      events: { stream } as unknown as Event.IManager,
      intervalSeconds: 1
    });
    return { server, stream, model };
  }

  it('asks once at load, then takes the pushed status and asks nothing more', async () => {
    const { server, stream, model } = setup();
    await sleep(50);
    expect(server.urls).toHaveLength(1);
    for (const cost of [3, 3.5, 4]) {
      pushed(stream, cost, 10);
      await sleep(400);
    }
    expect(model.status?.cost).toBe(4);
    expect(model.transport).toBe('push');
    expect(model.state).toBe('ok');
    // 1.2 s at a 1 s poll interval: no request while the pushes arrive
    expect(server.urls).toHaveLength(1);
  });

  it('polls while no push arrives (the socket is down), and stops when pushes come back', async () => {
    const { server, stream, model } = setup();
    await sleep(50);
    pushed(stream, 3); // heartbeat 0: silence after 1 s means the socket is down
    await sleep(2600);
    expect(model.transport).toBe('poll');
    // the load, then the poll at once and after one interval
    expect(server.urls.length).toBeGreaterThanOrEqual(3);
    expect(model.status?.cost).toBe(makeStatus().cost);
    expect(model.error).toBeNull();
    pushed(stream, 5, 10);
    const asked = server.urls.length;
    await sleep(1500);
    expect(model.transport).toBe('push');
    expect(server.urls.length).toBe(asked);
    expect(model.status?.cost).toBe(5);
  });

  it('passes budget events on and ignores other schemas', () => {
    const { stream, model } = setup();
    const seen: string[] = [];
    model.budgetEvent.connect((_, event) => seen.push(event.kind));
    stream.emit({
      schema_id: 'https://events.jupyter-gpucost.org/budget/v1',
      version: 1,
      kind: 'threshold',
      message: '50%'
    } as unknown as Event.Emission);
    stream.emit({
      schema_id: 'https://events.jupyter.org/other',
      version: 1,
      status: makeStatus({ cost: 99 })
    } as unknown as Event.Emission);
    expect(seen).toEqual(['threshold']);
    expect(model.status?.cost).not.toBe(99);
  });
});
