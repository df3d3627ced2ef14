import { ServerConnection } from '@jupyterlab/services';

import { IGpuCostDevice, IGpuCostStatus } from '../tokens';

/**
 * A GPU as the server reports it (an A100-80GB priced on aws on-demand).
 */
export function makeGpu(
  overrides: Partial<IGpuCostDevice> = {}
): IGpuCostDevice {
  return {
    index: 0,
    uuid: 'GPU-3f1c0000-0000-0000-0000-000000000000',
    name: 'NVIDIA A100-SXM4-80GB',
    model: 'A100-80GB',
    priced: true,
    price_per_hour: 3.431,
    price_source: 'aws on-demand us-east-1 (p4de.24xlarge), as of 2026-01-21',
    price_as_of: '2026-01-21',
    price_confidence: 'listed',
    utilization_pct: 97.0,
    memory_used_bytes: 61203267584,
    memory_total_bytes: 85899345920,
    power_w: 391.2,
    energy_j: 256172.5,
    cost: 1.415061,
    idle_cost: 0.551,
    lost: false,
    unavailable: {},
    ...overrides
  };
}

/**
 * The status of docs/api.md: 2× A100-80GB on real (NVML) telemetry.
 */
export function makeStatus(
  overrides: Partial<IGpuCostStatus> = {}
): IGpuCostStatus {
  return {
    version: '0.1.0',
    currency: 'USD',
    currency_symbol: '$',
    session_started: '2026-11-22T09:00:00.000000+00:00',
    as_of: '2026-11-22T09:20:34.512000+00:00',
    elapsed_s: 1234.5,
    cost: 2.830123,
    gpu_cost: 2.830123,
    rate_per_hour: 6.862,
    used_cost: 1.702456,
    idle_cost: 1.102,
    unobserved_cost: 0.0,
    billing_adjustment: 0.025667,
    base_price_per_hour: 0.0,
    base_cost: 0.0,
    energy_j: 512345.0,
    billing: { granularity_s: 1, minimum_charge_s: 60 },
    gpus: [
      makeGpu(),
      makeGpu({ index: 1, uuid: 'GPU-3f1c0000-0000-0000-0000-000000000001' })
    ],
    telemetry: {
      source: 'nvml',
      simulated: false,
      available: true,
      reason: null,
      detail: null
    },
    prices: {
      provider: 'aws',
      market: 'on-demand',
      as_of: '2026-01-21',
      overridden_models: []
    },
    warnings: [],
    ...overrides
  };
}

/**
 * The same session on simulated telemetry.
 */
export function makeSimulatedStatus(
  overrides: Partial<IGpuCostStatus> = {}
): IGpuCostStatus {
  return makeStatus({
    telemetry: {
      source: 'simulated',
      simulated: true,
      available: true,
      reason: null,
      detail: { trace: '2x A100-80GB training session' }
    },
    ...overrides
  });
}

/**
 * A session with an A100 and an L40S the catalog has no price for.
 */
export function makeUnpricedStatus(): IGpuCostStatus {
  return makeStatus({
    cost: 1.23,
    rate_per_hour: 3.431,
    idle_cost: 0.551,
    gpus: [
      makeGpu(),
      makeGpu({
        index: 1,
        name: 'NVIDIA L40S',
        model: 'L40S',
        priced: false,
        price_per_hour: null,
        price_source: null,
        price_as_of: null,
        price_confidence: null,
        cost: 0,
        idle_cost: 0
      })
    ],
    warnings: [
      {
        code: 'unpriced-gpu',
        message:
          'No aws on-demand price for NVIDIA L40S: it is not counted in the cost. Set c.GpuCost.price_overrides.'
      }
    ]
  });
}

/**
 * A server with no GPU telemetry (no driver), but a base price.
 */
export function makeNoTelemetryStatus(): IGpuCostStatus {
  return makeStatus({
    cost: 0.5,
    gpu_cost: 0,
    rate_per_hour: 1.0,
    used_cost: 0,
    idle_cost: 0,
    billing_adjustment: 0,
    base_price_per_hour: 1.0,
    base_cost: 0.5,
    energy_j: null,
    gpus: [],
    telemetry: {
      source: 'none',
      simulated: false,
      available: false,
      reason: 'NVML library not found (libnvidia-ml.so.1)',
      detail: null
    }
  });
}

/**
 * What a mocked `fetch` answers with: a body and a status, or a thrown error.
 */
export type FakeAnswer = { status: number; body?: unknown } | { throws: Error };

/**
 * Server settings whose `fetch` answers from a queue (the last answer repeats)
 * and records the URLs it was asked for.
 */
export function fakeServer(answers: FakeAnswer[]): {
  settings: ServerConnection.ISettings;
  urls: string[];
  push: (...more: FakeAnswer[]) => void;
} {
  const queue = [...answers];
  const urls: string[] = [];
  let last: FakeAnswer | undefined;
  const fetch = async (input: RequestInfo): Promise<Response> => {
    urls.push(typeof input === 'string' ? input : input.url);
    last = queue.shift() ?? last;
    if (!last) {
      throw new Error('no answer queued');
    }
    if ('throws' in last) {
      throw last.throws;
    }
    const body =
      last.body === undefined
        ? last.status === 404
          ? '<html><body>404: Not Found</body></html>'
          : JSON.stringify({ message: 'error' })
        : JSON.stringify(last.body);
    return new Response(body, {
      status: last.status,
      headers: { 'Content-Type': 'application/json' }
    });
  };
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/user/alice/',
    fetch
  });
  return { settings, urls, push: (...more) => queue.push(...more) };
}
