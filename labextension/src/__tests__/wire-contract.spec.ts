/**
 * The TypeScript types of the server's documents against the wire contract.
 *
 * `wire-contract.json` is the Python side's types (jupyter_gpucost/core/wire.py)
 * written out by scripts/wire_contract.py; the Python tests check that real
 * servers send what it says. Here each interface the front end reads a
 * document through is written as a shape: every key it declares, with the
 * JSON kinds its type accepts. The compiler holds each shape to its
 * interface (a key left out, one too many, or a kind the type does not
 * accept does not compile); the tests hold the shape to the contract: no key
 * the server does not send, and no kind the server sends that the type does
 * not accept.
 */
import { IPanelLive } from '../panel/feed';
import {
  IAttribution,
  IHistoryAnswer,
  IHistoryGpu,
  IHistoryPoint,
  IKernelCost,
  IKernelsAnswer,
  IOtherProcess,
  IPanelStatus,
  IRightsizing
} from '../panel/types';
import {
  IBillingRule,
  IGpuCostDevice,
  IGpuCostStatus,
  IGpuCostWarning,
  IMetering,
  IPriceCatalog,
  ITelemetry
} from '../tokens';
import contract from './wire-contract.json';

/**
 * The JSON kind of a TypeScript type (`any`: it accepts every kind).
 */
type Kind<T> = T extends undefined
  ? never
  : T extends string
    ? 'string'
    : T extends number
      ? 'number'
      : T extends boolean
        ? 'boolean'
        : T extends null
          ? 'null'
          : T extends readonly unknown[]
            ? 'array'
            : T extends object
              ? 'object'
              : 'any';

/**
 * Every key of `T`, each with exactly the kinds its type accepts.
 */
type Shape<T> = { [K in keyof T]-?: { [P in Kind<T[K]>]: true } };

type Totals = IHistoryAnswer['totals'];
type Micro = NonNullable<IKernelsAnswer['micro']>;

const STATUS: Shape<IGpuCostStatus> = {
  version: { string: true },
  currency: { string: true },
  currency_symbol: { string: true },
  session_started: { string: true },
  as_of: { string: true },
  elapsed_s: { number: true },
  cost: { number: true },
  gpu_cost: { number: true },
  rate_per_hour: { number: true },
  price_basis: { string: true },
  price_basis_reasons: { array: true },
  used_cost: { number: true },
  idle_cost: { number: true },
  unobserved_cost: { number: true },
  billing_adjustment: { number: true },
  base_price_per_hour: { number: true },
  base_cost: { number: true },
  energy_j: { number: true, null: true },
  billing: { object: true },
  gpus: { array: true },
  telemetry: { object: true },
  prices: { object: true },
  warnings: { array: true },
  budget: { object: true, null: true },
  machine: { object: true, null: true },
  metering: { object: true }
};

const PANEL_STATUS: Shape<IPanelStatus> = {
  ...STATUS,
  session_id: { string: true },
  today: { number: true, null: true },
  month: { number: true, null: true },
  all_time: { number: true, null: true },
  carbon_intensity_g_per_kwh: { number: true, null: true },
  co2_g: { number: true, null: true },
  rightsizing: { object: true, null: true },
  rightsizing_note: { string: true, null: true },
  attribution: { object: true, null: true },
  budget: { object: true, null: true },
  bill: { object: true, null: true }
};

const GPU: Shape<IGpuCostDevice> = {
  index: { number: true },
  uuid: { string: true, null: true },
  name: { string: true },
  model: { string: true, null: true },
  priced: { boolean: true },
  price_per_hour: { number: true, null: true },
  price_source: { string: true, null: true },
  price_as_of: { string: true, null: true },
  price_confidence: { string: true, null: true },
  price_provider: { string: true, null: true },
  price_market: { string: true, null: true },
  price_region: { string: true, null: true },
  price_basis: { string: true, null: true },
  price_basis_reason: { string: true, null: true },
  utilization_pct: { number: true, null: true },
  memory_used_bytes: { number: true, null: true },
  memory_total_bytes: { number: true, null: true },
  power_w: { number: true, null: true },
  energy_j: { number: true, null: true },
  cost: { number: true },
  idle_cost: { number: true },
  lost: { boolean: true },
  unavailable: { object: true }
};

const BILLING: Shape<IBillingRule> = {
  granularity_s: { number: true },
  minimum_charge_s: { number: true }
};

const TELEMETRY: Shape<ITelemetry> = {
  source: { string: true },
  simulated: { boolean: true },
  available: { boolean: true },
  reason: { string: true, null: true },
  detail: { object: true, null: true }
};

const PRICES: Shape<IPriceCatalog> = {
  provider: { string: true, null: true },
  market: { string: true, null: true },
  as_of: { string: true, null: true },
  catalog_date: { string: true, null: true },
  overridden_models: { array: true }
};

const WARNING: Shape<IGpuCostWarning> = {
  code: { string: true },
  message: { string: true }
};

const METERING: Shape<IMetering> = {
  state: { string: true },
  reason: { string: true, null: true },
  instance: { string: true, null: true },
  budget: { string: true, null: true },
  message: { string: true, null: true }
};

const RIGHTSIZING: Shape<IRightsizing> = {
  model: { string: true },
  cost: { number: true },
  instead_of: { number: true },
  price_per_hour: { number: true, null: true },
  peak_memory_bytes: { number: true, null: true },
  reason: { string: true, null: true }
};

const ATTRIBUTION: Shape<IAttribution> = {
  pids_visible: { boolean: true },
  note: { string: true, null: true }
};

const KERNEL: Shape<IKernelCost> = {
  id: { string: true },
  name: { string: true },
  notebook_path: { string: true, null: true },
  execution_state: { string: true },
  started: { string: true, null: true },
  uptime_s: { number: true, null: true },
  pids: { array: true },
  remote: { boolean: true },
  gpu_share: { object: true },
  gpu_share_by: { object: true },
  gpu_host_pids: { object: true },
  memory_bytes: { number: true, null: true },
  cost: { number: true },
  cells: { number: true },
  cells_cost: { number: true }
};

const OTHER_PROCESS: Shape<IOtherProcess> = {
  gpu: { number: true },
  host_pid: { number: true },
  memory_bytes: { number: true, null: true }
};

const KERNELS: Shape<IKernelsAnswer> = {
  as_of: { string: true },
  pids_visible: { boolean: true },
  note: { string: true, null: true },
  total: { number: true },
  idle: { number: true },
  unattributed: { number: true },
  minimum_charge: { number: true },
  micro: { object: true },
  other_processes: { array: true },
  kernels: { array: true }
};

const MICRO: Shape<Micro> = {
  total: { number: true },
  idle: { number: true },
  unattributed: { number: true },
  minimum_charge: { number: true }
};

const POINT_GPU: Shape<IHistoryGpu> = {
  index: { number: true },
  utilization_pct: { number: true, null: true },
  memory_used_bytes: { number: true, null: true },
  power_w: { number: true, null: true }
};

const POINT: Shape<IHistoryPoint> = {
  t: { string: true },
  cost: { number: true },
  rate_per_hour: { number: true },
  gpus: { array: true }
};

const HISTORY: Shape<IHistoryAnswer> = {
  window_s: { number: true },
  step_s: { number: true },
  start: { string: true },
  end: { string: true },
  gpus: { array: true },
  points: { array: true },
  totals: { object: true }
};

const HISTORY_GPU: Shape<IHistoryAnswer['gpus'][number]> = {
  index: { number: true },
  name: { string: true }
};

const TOTALS: Shape<Totals> = {
  sessions: { array: true },
  days: { array: true }
};

const SESSION: Shape<Totals['sessions'][number]> = {
  id: { string: true },
  started: { string: true },
  ended: { string: true, null: true },
  cost: { number: true }
};

const DAY: Shape<Totals['days'][number]> = {
  date: { string: true },
  cost: { number: true }
};

const PANEL: Shape<IPanelLive> = {
  kernels: { object: true },
  cells: { array: true },
  exports: { object: true, null: true },
  point: { object: true, null: true }
};

/**
 * Each interface beside the contract's part it reads.
 */
const CHECKED: [string, string, object][] = [
  ['IGpuCostStatus', 'StatusDocument', STATUS],
  ['IPanelStatus', 'StatusDocument', PANEL_STATUS],
  ['IGpuCostDevice', 'StatusGpu', GPU],
  ['IBillingRule', 'Billing', BILLING],
  ['ITelemetry', 'Telemetry', TELEMETRY],
  ['IPriceCatalog', 'PricesJson', PRICES],
  ['IGpuCostWarning', 'StatusWarning', WARNING],
  ['IMetering', 'MeteringState', METERING],
  ['IRightsizing', 'Rightsizing', RIGHTSIZING],
  ['IAttribution', 'AttributionState', ATTRIBUTION],
  ['IKernelCost', 'KernelCostJson', KERNEL],
  ['IOtherProcess', 'OtherProcessJson', OTHER_PROCESS],
  ['IKernelsAnswer', 'KernelsDocument', KERNELS],
  ["IKernelsAnswer['micro']", 'KernelsMicro', MICRO],
  ['IHistoryGpu', 'PointGpu', POINT_GPU],
  ['IHistoryPoint', 'HistoryPoint', POINT],
  ['IHistoryAnswer', 'HistoryDocument', HISTORY],
  ["IHistoryAnswer['gpus']", 'HistoryGpu', HISTORY_GPU],
  ["IHistoryAnswer['totals']", 'HistoryTotals', TOTALS],
  ['…sessions', 'HistorySession', SESSION],
  ['…days', 'HistoryDay', DAY],
  ['IPanelLive', 'PanelDocument', PANEL]
];

const PARTS = contract.parts as { [part: string]: { [key: string]: string } };

/**
 * The contract's kinds of a value as JSON sees them: a listed part is an
 * object, a list of parts an array; `absent` is no value at all.
 */
function jsonKinds(allowed: string): string[] {
  return allowed
    .split('|')
    .filter(kind => kind !== 'absent')
    .map(kind =>
      kind.startsWith('#') ? (kind.endsWith('[]') ? 'array' : 'object') : kind
    );
}

/**
 * What in `shape` the contract's `part` does not allow.
 */
function mismatches(part: string, shape: object): string[] {
  const keys = PARTS[part];
  const found: string[] = [];
  for (const [key, kinds] of Object.entries(shape)) {
    if (!(key in keys)) {
      found.push(`${key}: the server does not send it`);
      continue;
    }
    const accepted = Object.keys(kinds as object);
    if (accepted.includes('any')) {
      continue;
    }
    for (const sent of jsonKinds(keys[key])) {
      if (sent !== 'any' && !accepted.includes(sent)) {
        found.push(
          `${key}: the server sends ${sent}, the type does not accept it`
        );
      }
    }
  }
  return found;
}

describe('the wire contract', () => {
  it.each(CHECKED)('%s reads %s as the server sends it', (_, part, shape) => {
    expect(PARTS[part]).toBeDefined();
    expect(mismatches(part, shape)).toEqual([]);
  });

  it('names the documents the front end reads', () => {
    const documents = contract.documents as { [name: string]: string };
    expect(documents.status).toBe('StatusDocument');
    expect(documents.kernels).toBe('KernelsDocument');
    expect(documents.history).toBe('HistoryDocument');
    expect(documents.panel).toBe('PanelDocument');
  });

  it('sees a key the server does not send, or a kind the type refuses', () => {
    // the check above must be able to fail
    expect(
      mismatches('HistoryPoint', {
        t: { string: true },
        cost: { string: true },
        rate: { number: true }
      })
    ).toEqual([
      'cost: the server sends number, the type does not accept it',
      'rate: the server does not send it'
    ]);
    expect(
      mismatches('StatusDocument', { energy_j: { number: true } })
    ).toEqual(['energy_j: the server sends null, the type does not accept it']);
  });
});
