import { VDomRenderer } from '@jupyterlab/apputils';
import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';

import { IBudgetEvent, IBudgetStatus } from './budget/tokens';
import type { IMachine } from './machine/tokens';

/**
 * Types of the JSON served by `GET /gpucost/api/status` (see docs/api.md).
 *
 * Field names follow the wire format; amounts are in the session's currency,
 * the status's `currency` (an ISO 4217 code: `USD`, `CNY`, `EUR`, ...).
 */

/**
 * The provider's billing rule.
 */
export interface IBillingRule {
  /** Billed time is rounded up to a multiple of this many seconds. */
  granularity_s: number;
  /** Never less than this many seconds are billed. */
  minimum_charge_s: number;
}

/**
 * One GPU of the session.
 */
export interface IGpuCostDevice {
  index: number;
  uuid: string | null;
  /** The driver's name, e.g. `NVIDIA A100-SXM4-80GB`. */
  name: string;
  /** The catalog's model, e.g. `A100-80GB`; `null` when it is not known. */
  model: string | null;
  /** `false` when the catalog has no price: the GPU is left out of the cost. */
  priced: boolean;
  price_per_hour: number | null;
  price_source: string | null;
  price_as_of: string | null;
  price_confidence: string | null;
  /**
   * Where a catalog price applies (`aws`, `on-demand`, `us-east-1`); `null`
   * for an override or an upper bound (older servers leave them out).
   */
  price_provider?: string | null;
  price_market?: string | null;
  price_region?: string | null;
  /**
   * `catalog`, `override`, `billed` (the rate the provider bills this
   * rental), `reconciled` (the rate a reconciled bill showed), or `upper-bound`: no price fits this GPU, so it is priced at the
   * most it can cost (older servers leave it out).
   */
  price_basis?:
    'catalog' | 'override' | 'billed' | 'reconciled' | 'upper-bound' | null;
  /** Why its price is an upper bound, in the server's language. */
  price_basis_reason?: string | null;
  utilization_pct: number | null;
  memory_used_bytes: number | null;
  memory_total_bytes: number | null;
  power_w: number | null;
  energy_j: number | null;
  cost: number;
  idle_cost: number;
  /** The device stopped answering (it is still billed). */
  lost: boolean;
  /** Reading field => why it is `null`. */
  unavailable: { [field: string]: string };
}

/**
 * Where the GPU readings come from.
 */
export interface ITelemetry {
  /** e.g. `nvml`, `simulated`, `none`. */
  source: string;
  simulated: boolean;
  /** `false` when the source could not start, or telemetry is turned off. */
  available: boolean;
  reason: string | null;
  detail: { [key: string]: unknown } | null;
}

/**
 * The price catalog in use.
 */
export interface IPriceCatalog {
  provider: string | null;
  market: string | null;
  as_of: string | null;
  /** When the catalog itself was compiled. */
  catalog_date?: string | null;
  overridden_models: string[];
}

/**
 * A condition the user should know about, e.g. `unpriced-gpu`.
 */
export interface IGpuCostWarning {
  code: string;
  message: string;
}

/**
 * The live cost of this session: the body of `GET /gpucost/api/status`.
 */
export interface IGpuCostStatus {
  version: string;
  currency: string;
  currency_symbol: string;
  session_started: string;
  as_of: string;
  elapsed_s: number;
  /** The billed cost: `gpu_cost + base_cost`. */
  cost: number;
  gpu_cost: number;
  /** Priced GPUs' hourly prices plus the base price. */
  rate_per_hour: number;
  /**
   * `upper-bound` when some GPU has no price that fits and is priced at the
   * most it can cost; else `catalog` (older servers leave it out).
   */
  price_basis?: 'catalog' | 'upper-bound';
  /** Why, one sentence per reason, in the server's language. */
  price_basis_reasons?: string[];
  used_cost: number;
  idle_cost: number;
  unobserved_cost: number;
  billing_adjustment: number;
  base_price_per_hour: number;
  base_cost: number;
  energy_j: number | null;
  billing: IBillingRule;
  gpus: IGpuCostDevice[];
  telemetry: ITelemetry;
  prices: IPriceCatalog;
  warnings: IGpuCostWarning[];
  /** The budget (the body of `GET /gpucost/api/budget`), `null` without one. */
  budget?: IBudgetStatus | null;
  /** The machine this server runs on, `null` when none was detected. */
  machine?: IMachine | null;
  /** Whether a GPU is metered; absent from servers that predate it. */
  metering?: IMetering;
}

/**
 * What the session's cost stands on (`metering` in the status): GPUs; no GPU
 * seen but the machine priced whole from its instance; or nothing (unknown).
 */
export interface IMetering {
  state: 'gpus' | 'instance' | 'unknown';
  /** Why no GPU is metered, in the server's language; `null` with GPUs. */
  reason: string | null;
  /** The instance priced whole (`instance` only). */
  instance: string | null;
  /** The sentence a budget is refused with; `null` when a budget can act. */
  budget: string | null;
  /** The state in one or two sentences, `null` with GPUs. */
  message: string | null;
}

/**
 * What the status bar item shows, one value per visibly distinct state.
 *
 * It is the `data-state` attribute of the item's node.
 */
export type GpuCostState =
  | 'loading'
  | 'ok'
  | 'simulated'
  | 'unpriced'
  | 'no-telemetry'
  | 'unknown'
  | 'instance'
  | 'missing'
  | 'error';

/**
 * What the front end knows: the last good status and how the last request went.
 */
export interface IGpuCostSnapshot {
  /** The last status received, kept through errors (then it is stale). */
  readonly status: IGpuCostStatus | null;
  /** When `status` was received (ms since the epoch), or `null`. */
  readonly receivedAt: number | null;
  /** The server answered 404: the server extension is not enabled. */
  readonly missing: boolean;
  /** Why the last request failed, or `null` when it succeeded. */
  readonly error: string | null;
}

/**
 * How the model learns the status now: pushed on the server's event bus,
 * polled while the event socket is down, or not yet known.
 */
export type GpuCostTransport = 'push' | 'poll' | 'loading';

/**
 * The one live cost of the session in the front end, shared by every plugin
 * (status item, top-bar item, panel, budget, cells, export): views read it
 * and never fetch the status or the budget on their own.
 */
export interface IGpuCostModel extends IGpuCostSnapshot, VDomRenderer.IModel {
  /** Emitted for every budget event pushed by the server. */
  readonly budgetEvent: ISignal<IGpuCostModel, IBudgetEvent>;
  /** The state the status items show. */
  readonly state: GpuCostState;
  /** The budget, from the last status; `null` when not known. */
  readonly budget: IBudgetStatus | null;
  /** Pushed, polled (event socket down) or loading. */
  readonly transport: GpuCostTransport;
  /** This page's id: the server asks it to save before a budget action. */
  readonly client: string;
  /** The fallback poll's interval in seconds (a setting). */
  intervalSeconds: number;
  /** Ask the server now (after an action); resolves once answered. */
  refresh(): Promise<void>;
  /**
   * Set (a number) or remove (`null`) the user's soft budget: the one writer
   * of it in the front end. Resolves to the server's budget; rejects with the
   * server's message.
   */
  setSoftBudget(amount: number | null, scope: string): Promise<IBudgetStatus>;
}

/**
 * The token of the shared cost model.
 */
export const IGpuCostModel = new Token<IGpuCostModel>(
  'jupyter-gpucost:IGpuCostModel',
  'The live cost of the session (status and budget), pushed from the server.'
);
