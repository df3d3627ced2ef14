/**
 * Types of the budget API (`/gpucost/api/budget`, see docs/api.md) and of the
 * budget events pushed on the server's event bus.
 */

/**
 * The `$id` of the budget events' schema.
 */
export const BUDGET_EVENT_SCHEMA =
  'https://events.jupyter-gpucost.org/budget/v1';

/**
 * The budget policy's state.
 */
export type BudgetState =
  'none' | 'ok' | 'warning' | 'grace' | 'enforcing' | 'acted';

/**
 * One budget against what was spent in its scope.
 */
export interface IBudgetStanding {
  kind: 'hard' | 'soft' | 'hub';
  /** The admin's and the hub's budgets are locked. */
  locked: boolean;
  /**
   * Where a locked budget comes from, as the UI says it: "set by the spawner
   * (GPUCOST_BUDGET_USD)", "set in the server's config
   * (c.GpuCost.hard_budget_usd)", "set by your hub admin".
   */
  source?: string | null;
  /** A hub budget's owner: `user` or `group:<name>`. */
  owner?: string;
  scope: 'session' | 'day' | 'month';
  amount: number;
  spent: number | null;
  remaining: number | null;
  /** Spent / amount (1 = all spent), `null` when not known. */
  share: number | null;
  /** When it runs out at the current rate (ISO-8601 UTC), `null` if never. */
  runs_out_at: string | null;
  fired_pct: number[];
}

/**
 * The countdown between a budget running out and the action.
 */
export interface IBudgetGrace {
  started: string;
  ends: string;
  remaining_s: number;
  reason: 'budget' | 'idle' | 'user' | 'hub' | 'done';
  /** Whether the binding budget is the user's, so it can be raised. */
  can_raise: boolean;
  /** The action at the end of the countdown (older servers leave it out). */
  action?: string;
  /** Whether the user started this countdown and may cancel it. */
  can_cancel?: boolean;
  /**
   * Why the countdown is shorter than the grace period (`overrun`: the full
   * grace would go past the budget; `spent`: it was spent at the check), and
   * the sentence that says so; older servers leave them out.
   */
  shortened?: 'overrun' | 'spent' | null;
  shortened_text?: string | null;
}

/**
 * When, at what amount and how the budget acts, at the current rate: the
 * countdown ends at the budget (older servers leave it out).
 */
export interface IBudgetStop {
  amount: number;
  budget_kind: 'hard' | 'soft' | 'hub';
  /** Seconds until the action, at the current rate. */
  in_s: number;
  /** When (ISO-8601 UTC). */
  at: string;
  rate_per_hour: number;
  action: string;
  /** "Stops at $5.00 — in about 14 min at $21.50/h; notebooks saved first, …" */
  text: string;
}

/**
 * What was done at a budget.
 */
export interface IBudgetAction {
  at: string;
  action: string;
  reason: string;
  result?: string;
  message?: string;
  notebooks_saved: number;
  [key: string]: unknown;
}

/**
 * One allowance the hub enforces on this user (read-only: the hub sets it),
 * as the server's status reports it (`budget.hub.allowances`).
 */
export interface IHubAllowance {
  /** `user` or `group:<name>` */
  source: string;
  /** `usd` (money) or `gpu_hours` */
  unit: string;
  /** `day`, `week`, `month`, `N days` (a rolling window) or `balance` */
  period: string;
  /** A period's amount, a balance's cap: dollars or GPU-hours. */
  amount: number;
  /** What is left: dollars or GPU-hours. */
  left: number;
  /** When it fills up again (ISO-8601 UTC). */
  refill_at: string;
}

/**
 * The hub service's budgets and its latest answer (`null` when the server does
 * not report to a hub service).
 */
export interface IBudgetHub {
  /** "set by your hub admin" */
  source: string;
  budgets: IBudgetStanding[];
  user: string | null;
  today: number | null;
  month: number | null;
  /** When the hub stops this server (ISO-8601 UTC), `null` while it does not. */
  stop_at: string | null;
  reason: string | null;
  /**
   * Why the hub stops it: a spent `budget`, or `idle` GPUs (anything run
   * clears it); `null` or absent from a server that does not say.
   */
  stop_kind?: 'budget' | 'idle' | null;
  reported_at: string | null;
  /** Why the last report did not get through, `null` when it did. */
  error: string | null;
  /** The hub's allowances and what is left of them (older servers: absent). */
  allowances?: IHubAllowance[];
}

/**
 * The body of `GET /gpucost/api/budget` (and `budget` in the status).
 */
export interface IBudgetStatus {
  state: BudgetState;
  hard: IBudgetStanding | null;
  soft: IBudgetStanding | null;
  /** Older servers leave it out. */
  hub?: IBudgetHub | null;
  binding: 'hard' | 'soft' | 'hub' | null;
  runs_out_at: string | null;
  thresholds_pct: number[];
  grace_s: number;
  grace: IBudgetGrace | null;
  /** When the budget acts, at the current rate (`null`: it does not run out). */
  stop?: IBudgetStop | null;
  /**
   * Why the server counts down or acts now (`grace`, `enforcing`): `budget`,
   * `idle`, `hub`, `user` or `done`; `null` otherwise (older servers leave it out).
   */
  reason?: string | null;
  action: string;
  save_request: { id: string } | null;
  scopes: string[];
  last_action: IBudgetAction | null;
  /** A spot machine's interruption (older servers and other machines: absent or null). */
  interruption?: IInterruptionStatus | null;
}

/**
 * A budget event (its `kind` says which).
 */
export interface IBudgetEvent {
  kind:
    | 'threshold'
    | 'grace'
    | 'cleared'
    | 'save-request'
    | 'action'
    | 'idle'
    | 'interruption'
    | 'interruption-warning'
    | 'interruption-done';
  message: string;
  threshold_pct?: number;
  budget_kind?: 'hard' | 'soft' | 'hub';
  scope?: 'session' | 'day' | 'month';
  amount?: number;
  spent?: number;
  grace_ends?: string;
  request_id?: string;
  runs_out_at?: string;
  /** When the action was taken (kind `action`). */
  at?: string;
  reason?: string;
  /** The action at the end of the countdown (kind grace and action). */
  action?: string;
  /** What the machine still costs per hour after the action (kind action). */
  still_per_hour?: number;
  /** The cloud taking the machine back (kinds interruption*). */
  provider?: string;
  /** When the machine goes (ISO-8601 UTC; kind interruption). */
  deadline?: string;
  /** Seconds from the notice to the deadline (kind interruption). */
  seconds_left?: number;
}

/**
 * One step the server took before the machine went.
 */
export interface IInterruptionStep {
  name: 'tell' | 'save' | 'checkpoint' | 'export' | string;
  state: 'done' | 'late' | 'failed' | 'skipped' | string;
  detail: string;
}

/**
 * The notice being answered (`current`) and the newest interruption of an
 * earlier session (`last`, with its sentence in `line`): `interruption` of
 * `GET /gpucost/api/budget`, `null` where nothing is watched.
 */
export interface IInterruptionStatus {
  current: {
    provider: string;
    action: string;
    deadline: string | null;
    message: string;
    steps: IInterruptionStep[];
  } | null;
  last: { line: string; deadline?: string; provider?: string } | null;
}
