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
      /^http:\/\/localhost:8888\/user\/alice\/gpucost\/api\/status(\?\d+)?$/
    );
  });

  it('follows 404 => missing, 200 => ok, network error => stale', async () => {
    const server = fakeServer([
      { status: 404 },
      { status: 200, body: makeStatus() },
      { throws: new TypeError('Failed to fetch') },
      { status: 200, body: makeSimulatedStatus({ cost_usd: 3.1 }) }
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
    expect(model.status?.cost_usd).toBe(2.830123);
    expect(model.error).toBeNull();

    const network = await fetchFailing(model);
    expect((network as GpuCostRequestError).kind).toBe('network');
    expect(model.state).toBe('error');
    expect(model.error).toBe('Failed to fetch');
    // The last good value is kept.
    expect(model.status?.cost_usd).toBe(2.830123);
    expect(model.receivedAt).not.toBeNull();

    await model.fetch();
    expect(model.state).toBe('simulated');
    expect(model.status?.cost_usd).toBe(3.1);
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
    expect(model.status?.cost_usd).toBe(1.23);
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
