import { isCurrencyCode } from '../format';

import { ICellRecord } from './format';

/**
 * The MIME type of the display output a kernel publishes a priced cell's
 * record with (`jupyter_gpucost/core/saved_cost.py`).
 */
export const SAVED_MIMETYPE = 'application/vnd.jupyter-gpucost.cell+json';

/**
 * The key of the record in a cell's metadata.
 */
export const SAVED_KEY = 'gpucost';

/**
 * A cell's record as the notebook keeps it (schema version 1). Its amounts are
 * in its `currency` (the session's, an ISO 4217 code): the `_usd` names are
 * historic.
 */
export interface ISavedCell {
  version: 1;
  cost_micro_usd: number;
  cost_usd: string;
  currency: string;
  wall_s: number;
  gpu_busy_s: { [index: string]: number } | null;
  gpus: { name: string; usd_per_hour: string | null }[];
  base_usd_per_hour: string;
  rate_usd_per_hour: string;
  priced_by: string;
  simulated: boolean;
  simulated_by: string;
  mode: 'auto' | 'magic';
  status: 'ok' | 'error' | 'interrupted';
  started: string;
  at: string;
}

const MAX_COST_MICRO_USD = 1e15;
const MAX_WALL_S = 366 * 24 * 3600;
const MAX_RATE = 1e6;
const MAX_TEXT = 500;
const DECIMAL = /^\d{1,12}(\.\d{1,12})?$/;

function text(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_TEXT;
}

function decimal(value: unknown): number | null {
  if (typeof value !== 'string' || !DECIMAL.test(value)) {
    return null;
  }
  const n = Number(value);
  return n <= MAX_RATE ? n : null;
}

function seconds(value: unknown): value is number {
  return (
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= 0 &&
    value <= MAX_WALL_S
  );
}

/** The earliest time a record may carry, and how far past now (as in
 * `core/record_rules.py`, the one rule of the Python side). */
const EARLIEST_MS = Date.UTC(2000, 0, 1);
const MAX_AHEAD_MS = 24 * 3600 * 1000;

/**
 * An ISO 8601 time that says its zone (a zone-less time is read in whatever
 * zone the reader is in), from 2000 to a day from now.
 */
function time(value: unknown): value is string {
  if (!text(value) || !/(?:Z|[+-]\d{2}:\d{2})$/i.test(value)) {
    return false;
  }
  const at = Date.parse(value);
  return (
    !Number.isNaN(at) && at >= EARLIEST_MS && at <= Date.now() + MAX_AHEAD_MS
  );
}

/**
 * A record read from a notebook, checked field by field (a notebook can come
 * from anyone); `null` when it is not a sound version-1 record: it is then
 * neither shown nor summed. The same checks as the server's
 * `parse_cell`, the cost within a micro-dollar of its rate and wall time.
 */
export function parseSavedCell(value: unknown): ISavedCell | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const r = value as { [key: string]: unknown };
  const cost = r.cost_micro_usd;
  if (
    r.version !== 1 ||
    typeof cost !== 'number' ||
    !Number.isInteger(cost) ||
    cost < 0 ||
    cost > MAX_COST_MICRO_USD ||
    !isCurrencyCode(r.currency) ||
    !seconds(r.wall_s) ||
    !text(r.priced_by) ||
    (r.mode !== 'auto' && r.mode !== 'magic') ||
    (r.status !== 'ok' && r.status !== 'error' && r.status !== 'interrupted') ||
    !time(r.started) ||
    !time(r.at) ||
    Date.parse(r.at) < Date.parse(r.started) ||
    typeof (r.simulated ?? false) !== 'boolean' ||
    !text(r.simulated_by ?? '')
  ) {
    return null;
  }
  const rate = decimal(r.rate_usd_per_hour);
  const base = decimal(r.base_usd_per_hour);
  if (rate === null || base === null || !Array.isArray(r.gpus)) {
    return null;
  }
  let sum = base;
  for (const gpu of r.gpus as unknown[]) {
    const g = gpu as { [key: string]: unknown } | null;
    if (typeof g !== 'object' || g === null || !text(g.name)) {
      return null;
    }
    if (g.usd_per_hour !== null) {
      const price = decimal(g.usd_per_hour);
      if (price === null) {
        return null;
      }
      sum += price;
    }
  }
  const busy = r.gpu_busy_s ?? null;
  if (busy !== null) {
    if (typeof busy !== 'object' || Array.isArray(busy)) {
      return null;
    }
    if (!Object.values(busy as object).every(seconds)) {
      return null;
    }
  }
  // the rate is its GPUs' and the instance's prices, and the cost is the wall
  // time at that rate (float slack: the exact check is the server's)
  const expected = (rate * (r.wall_s as number) * 1e6) / 3600;
  if (
    Math.abs(sum - rate) > 1e-6 * Math.max(1, rate) ||
    Math.abs(expected - cost) > 1 + 1e-9 * expected
  ) {
    return null;
  }
  return {
    version: 1,
    cost_micro_usd: cost,
    cost_usd: String(r.cost_usd ?? cost / 1e6),
    currency: r.currency,
    wall_s: r.wall_s as number,
    gpu_busy_s: busy as { [index: string]: number } | null,
    gpus: (r.gpus as { name: string; usd_per_hour: string | null }[]).map(
      g => ({ name: g.name, usd_per_hour: g.usd_per_hour })
    ),
    base_usd_per_hour: r.base_usd_per_hour as string,
    rate_usd_per_hour: r.rate_usd_per_hour as string,
    priced_by: r.priced_by as string,
    simulated: (r.simulated ?? false) as boolean,
    simulated_by: (r.simulated_by ?? '') as string,
    mode: r.mode as 'auto' | 'magic',
    status: r.status as 'ok' | 'error' | 'interrupted',
    started: r.started as string,
    at: r.at as string
  };
}

/**
 * A record as the notebook keeps it (the kernel's `SavedCell.to_json`): the
 * same keys in the same order, the optional ones (`gpu_busy_s`, `simulated`,
 * `simulated_by`) only where they say something.
 */
export function savedJSON(saved: ISavedCell): { [key: string]: unknown } {
  const out: { [key: string]: unknown } = {
    version: saved.version,
    cost_micro_usd: saved.cost_micro_usd,
    cost_usd: saved.cost_usd,
    currency: saved.currency,
    wall_s: saved.wall_s
  };
  if (saved.gpu_busy_s && Object.keys(saved.gpu_busy_s).length) {
    out.gpu_busy_s = saved.gpu_busy_s;
  }
  out.gpus = saved.gpus;
  out.base_usd_per_hour = saved.base_usd_per_hour;
  out.rate_usd_per_hour = saved.rate_usd_per_hour;
  out.priced_by = saved.priced_by;
  if (saved.simulated) {
    out.simulated = true;
    out.simulated_by = saved.simulated_by;
  }
  out.mode = saved.mode;
  out.status = saved.status;
  out.started = saved.started;
  out.at = saved.at;
  return out;
}

/**
 * A saved record as the badge and the panel read a cell's record.
 */
export function recordOf(saved: ISavedCell, cellId: string): ICellRecord {
  return {
    cell_id: cellId,
    notebook_path: null,
    kernel_id: null,
    started: saved.started,
    ended: saved.at,
    wall_s: saved.wall_s,
    gpu_busy_s: saved.gpu_busy_s,
    peak_memory_bytes: null,
    energy_j: null,
    cost_usd: saved.cost_micro_usd / 1e6,
    status: saved.status,
    mode: saved.mode,
    rate_usd_per_hour: Number(saved.rate_usd_per_hour),
    currency: saved.currency
  };
}

/**
 * An output as the notebook model gives it (`toJSON()`).
 */
export interface IOutputJSON {
  output_type: string;
  data?: { [mime: string]: unknown };
  [key: string]: unknown;
}

/**
 * Whether an output is the kernel's record of the cell.
 */
export function isCarrier(output: IOutputJSON): boolean {
  return (
    output.output_type === 'display_data' &&
    output.data !== undefined &&
    SAVED_MIMETYPE in output.data
  );
}

/**
 * The notebook's `metadata.gpucost` as the page keeps it: the cells' current
 * records summed (schema version 1, as a headless run writes it), all in one
 * currency.
 */
export interface INotebookSummary {
  version: 1;
  total_micro_usd: number;
  total_usd: string;
  currency: string;
  cells: number;
  by_gpu_micro_usd: { [model: string]: number };
  price_sources: string[];
  simulated: boolean;
  simulated_by: string;
  started: string;
  at: string;
  runner: string;
  /**
   * The records in another currency than the total's (a run in another
   * session), never added into it: per currency, their sum in its micro-units
   * (only where there are some).
   */
  other_currencies?: { [currency: string]: number };
}

/**
 * The key of the instance's own (non-GPU) price in `by_gpu_micro_usd`.
 */
export const BASE_KEY = '(instance)';

/**
 * `total` split in proportion to `weights`, largest remainders first: whole
 * micro-dollars that add up to `total` exactly.
 */
export function splitExactly(
  total: number,
  weights: { [key: string]: number }
): { [key: string]: number } {
  const positive = Object.entries(weights).filter(([, w]) => w > 0);
  if (total === 0) {
    return {};
  }
  if (!positive.length) {
    return { [BASE_KEY]: total };
  }
  const whole = positive.reduce((sum, [, w]) => sum + w, 0);
  const shares = positive.map(([key, w]) => ({
    key,
    share: (total * w) / whole
  }));
  const parts: { [key: string]: number } = {};
  for (const { key, share } of shares) {
    parts[key] = Math.floor(share);
  }
  let left = total - Object.values(parts).reduce((a, b) => a + b, 0);
  const order = [...shares].sort(
    (a, b) =>
      b.share - Math.floor(b.share) - (a.share - Math.floor(a.share)) ||
      a.key.localeCompare(b.key)
  );
  for (const { key } of order) {
    if (left <= 0) {
      break;
    }
    parts[key] += 1;
    left -= 1;
  }
  return parts;
}

/**
 * A cell's cost split by GPU model (and the instance's base price).
 */
export function byGpu(saved: ISavedCell): { [model: string]: number } {
  const weights: { [key: string]: number } = {};
  for (const gpu of saved.gpus) {
    const price = gpu.usd_per_hour === null ? 0 : Number(gpu.usd_per_hour);
    if (price > 0) {
      weights[gpu.name] = (weights[gpu.name] ?? 0) + price;
    }
  }
  const base = Number(saved.base_usd_per_hour);
  if (base > 0) {
    weights[BASE_KEY] = (weights[BASE_KEY] ?? 0) + base;
  }
  return splitExactly(saved.cost_micro_usd, weights);
}

/**
 * The notebook's summary of its cells' records; `null` when none has one.
 * Amounts in two currencies are never added up: the total is in the newest
 * record's currency (the session that ran the notebook last), the records in
 * any other are summed apart, per currency, in `other_currencies`.
 */
export function summarise(
  all: ISavedCell[],
  runner = 'jupyterlab'
): INotebookSummary | null {
  if (!all.length) {
    return null;
  }
  const newest = all.reduce((a, b) =>
    Date.parse(b.at) > Date.parse(a.at) ? b : a
  );
  const cells = all.filter(cell => cell.currency === newest.currency);
  const summary: INotebookSummary = {
    version: 1,
    total_micro_usd: 0,
    total_usd: '0',
    currency: newest.currency,
    cells: cells.length,
    by_gpu_micro_usd: {},
    price_sources: [],
    simulated: false,
    simulated_by: '',
    started: cells[0].started,
    at: cells[0].at,
    runner
  };
  for (const cell of cells) {
    summary.total_micro_usd += cell.cost_micro_usd;
    for (const [model, micro] of Object.entries(byGpu(cell))) {
      summary.by_gpu_micro_usd[model] =
        (summary.by_gpu_micro_usd[model] ?? 0) + micro;
    }
    if (cell.priced_by && !summary.price_sources.includes(cell.priced_by)) {
      summary.price_sources.push(cell.priced_by);
    }
    if (cell.simulated) {
      summary.simulated = true;
      summary.simulated_by = cell.simulated_by || summary.simulated_by;
    }
    if (Date.parse(cell.started) < Date.parse(summary.started)) {
      summary.started = cell.started;
    }
    if (Date.parse(cell.at) > Date.parse(summary.at)) {
      summary.at = cell.at;
    }
  }
  summary.total_usd = microToDecimal(summary.total_micro_usd);
  const others: { [currency: string]: number } = {};
  for (const cell of all) {
    if (cell.currency !== summary.currency) {
      others[cell.currency] =
        (others[cell.currency] ?? 0) + cell.cost_micro_usd;
    }
  }
  if (Object.keys(others).length) {
    summary.other_currencies = others;
  }
  return summary;
}

/**
 * Whole micro-dollars as an exact decimal string (`1234` -> `0.001234`).
 */
export function microToDecimal(micro: number): string {
  const whole = Math.floor(micro / 1e6);
  const fraction = String(micro % 1e6)
    .padStart(6, '0')
    .replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : String(whole);
}
