/**
 * Types of the JSON the cost panel reads (see docs/api.md).
 *
 * Field names follow the wire format. Everything the ledger adds to the
 * status is optional: an older server, or one whose ledger could not open,
 * leaves it out and the panel says so.
 */
import { IHubAllowance } from '../budget/tokens';
import { IGpuCostStatus } from '../tokens';

/**
 * The cheapest GPU of the catalog that would have fit the session.
 */
export interface IRightsizing {
  /** The catalog model, e.g. `L4`. */
  model: string;
  /** What the session would have cost on it. */
  cost: number;
  /** What the session cost on the GPUs it had. */
  instead_of: number;
  price_per_hour: number | null;
  peak_memory_bytes: number | null;
  reason: string | null;
}

/**
 * Whether GPU processes could be matched to kernels.
 */
export interface IAttribution {
  pids_visible: boolean;
  note: string | null;
}

/**
 * One budget against what was spent in its scope (see docs/api.md).
 */
export interface IBudgetLine {
  kind: 'hard' | 'soft' | 'hub';
  locked: boolean;
  /** Where a locked budget comes from (e.g. "set by your hub admin"). */
  source?: string | null;
  /** A hub budget's owner: `user` or `group:<name>`. */
  owner?: string;
  scope: string;
  amount: number;
  spent: number | null;
  remaining: number | null;
  share: number | null;
  runs_out_at: string | null;
}

/**
 * The budget object of the status.
 */
export interface IPanelBudget {
  state: string;
  hard: IBudgetLine | null;
  soft: IBudgetLine | null;
  /** The hub service's budgets (`null` or absent: no hub service). */
  hub?: {
    budgets: IBudgetLine[];
    stop_at: string | null;
    reason: string | null;
    /** Why the hub stops it: `budget`, `idle` (older servers: absent). */
    stop_kind?: string | null;
    error: string | null;
    /** The hub's allowances, read-only (older servers: absent). */
    allowances?: IHubAllowance[];
  } | null;
  scopes: string[];
  /** When, at what amount and how it stops (absent or `null`: it does not). */
  stop?: {
    text: string;
    amount: number;
    in_s: number;
    /** The rate it is timed at (older servers leave it out). */
    rate_per_hour?: number;
  } | null;
  /**
   * The countdown: when it ends, why (`budget`, `idle`, `hub`, `user`,
   * `done`), and why it is shorter than the grace period (if it is).
   */
  grace?: {
    ends?: string;
    reason?: string;
    shortened_text?: string | null;
  } | null;
  /** Why it counts down or acts now (`grace`, `enforcing`), else `null`. */
  reason?: string | null;
  last_action: { message?: string; at?: string } | null;
  /** A spot machine's interruptions (absent or `null`: nothing is watched). */
  interruption?: {
    last: { line: string; deadline?: string } | null;
  } | null;
}

/**
 * The status, with what the ledger and attribution add.
 */
export interface IPanelStatus extends Omit<IGpuCostStatus, 'budget'> {
  session_id?: string;
  today?: number | null;
  month?: number | null;
  all_time?: number | null;
  co2_g?: number | null;
  carbon_intensity_g_per_kwh?: number | null;
  rightsizing?: IRightsizing | null;
  /** Why there is no right-sizing advice, when there is a reason to tell. */
  rightsizing_note?: string | null;
  attribution?: IAttribution | null;
  budget?: IPanelBudget | null;
  /** This machine's reconciled bill (`jupyter gpucost reconcile`); `null`: none read. */
  bill?: IBillFigure | null;
}

/**
 * The estimate beside the bill, summed over this machine's reconciled days.
 */
export interface IBillFigure {
  estimated: number;
  billed: number;
  /** The last day the bill covers (`YYYY-MM-DD`). */
  to: string;
}

/**
 * One kernel and what it cost: `GET /gpucost/api/kernels`.
 */
export interface IKernelCost {
  id: string;
  /** The kernel spec's name, e.g. `python3`. */
  name: string;
  notebook_path: string | null;
  execution_state: string;
  started: string | null;
  uptime_s: number | null;
  pids: number[];
  /** No local process: its GPU use cannot be attributed. */
  remote: boolean;
  /** GPU index => share of that GPU (0–1) in the last sample. */
  gpu_share: { [index: string]: number };
  /**
   * GPU index => how that share was made: `sm_samples` (the driver's per-process
   * samples), `kernel_gpu_time` (the kernel's own measured GPU time), `memory`, `even`.
   * Absent from servers that predate it.
   */
  gpu_share_by?: { [index: string]: string };
  /**
   * GPU index => the host pids this kernel identified as its own where the GPU
   * driver lists host pids (a container); absent from servers that predate it.
   */
  gpu_host_pids?: { [index: string]: number[] };
  memory_bytes: number | null;
  /** The kernel's GPU use: its part of the GPUs' used time. */
  cost: number;
  /**
   * The machine's cost while the kernel's priced cells ran this session (the
   * sum of its cells' costs), and how many cells; absent from servers that
   * predate them.
   */
  cells?: number;
  cells_cost?: number;
}

/**
 * A GPU process no kernel identified as its own (another container's, or a
 * process a kernel started), where kernels identify theirs.
 */
export interface IOtherProcess {
  gpu: number;
  host_pid: number;
  memory_bytes: number | null;
}

/**
 * The body of `GET /gpucost/api/kernels`.
 */
export interface IKernelsAnswer {
  as_of: string;
  pids_visible: boolean;
  note: string | null;
  total: number;
  idle: number;
  unattributed: number;
  /**
   * The part of `unattributed` the billing rule adds (minimum charge,
   * rounding); absent from older servers.
   */
  minimum_charge?: number;
  /** The same figures in exact micro-units. */
  micro?: {
    total: number;
    idle: number;
    unattributed: number;
    minimum_charge?: number;
  };
  /** Where kernels identify their GPU processes: the others (not from these kernels). */
  other_processes?: IOtherProcess[];
  kernels: IKernelCost[];
}

/**
 * One GPU's readings at one point of the history.
 */
export interface IHistoryGpu {
  index: number;
  utilization_pct: number | null;
  memory_used_bytes: number | null;
  power_w: number | null;
}

/**
 * One point of the history.
 */
export interface IHistoryPoint {
  t: string;
  /** Cumulative cost of this session at `t`. */
  cost: number;
  rate_per_hour: number;
  gpus: IHistoryGpu[];
}

/**
 * The body of `GET /gpucost/api/history`.
 */
export interface IHistoryAnswer {
  window_s: number;
  step_s: number;
  start: string;
  end: string;
  gpus: { index: number; name: string }[];
  points: IHistoryPoint[];
  totals: {
    sessions: {
      id: string;
      started: string;
      ended: string | null;
      cost: number;
    }[];
    days: { date: string; cost: number }[];
  };
}

/**
 * One cell's cost: `GET /gpucost/api/cells`.
 */
export interface ICellCost {
  cell_id: string;
  notebook_path: string | null;
  kernel_id: string | null;
  started: string;
  ended: string;
  wall_s: number;
  gpu_busy_s: { [index: string]: number } | null;
  peak_memory_bytes: number | null;
  energy_j: number | null;
  /** the name the kernel's record keeps (saved data, see docs/api.md "Money keys") */
  cost_usd: number;
  status: string;
  mode: string;
  /** read from the notebook file (a run before this page), not measured live */
  recorded?: boolean;
  /** a recorded cell's currency (ISO 4217): its amount is in it, whatever the
   * session's */
  currency?: string;
}

/**
 * The body of `GET /gpucost/api/cells`.
 */
export interface ICellsAnswer {
  cells: ICellCost[];
}

/**
 * The history windows the panel offers, as the API spells them.
 */
export const HISTORY_WINDOWS = ['15m', '1h', '24h', '7d'] as const;

/**
 * One of `HISTORY_WINDOWS`.
 */
export type HistoryWindow = (typeof HISTORY_WINDOWS)[number];
