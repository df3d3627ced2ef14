/*
 * The machine's types: what the status API says of the machine. Imports nothing, so the
 * status's own types (`../tokens`) can name it without an import cycle.
 */

/**
 * The machine this server runs on (`machine` in `GET /gpucost/api/status`).
 */
export interface IMachine {
  provider: string;
  instance_type: string | null;
  region: string | null;
  /** `on-demand` or `spot`, `null` when not known. */
  market: string | null;
  instance_id: string | null;
  /** How it was found: `dmi`, `dmi+metadata`, `environment`. */
  source: string;
  /** A Kubernetes pod: its node is shared. */
  shared: boolean;
  /** Whether `stop-instance` can stop it through its cloud. */
  stoppable: boolean;
  /** Why it cannot be stopped (an AWS one-time Spot Instance), in the server's language. */
  cannot_stop?: string | null;
  /** `instance`: priced whole from its catalog row; `gpu`: per-GPU prices. */
  priced: 'instance' | 'gpu';
  instance_price_per_hour: number | null;
  instance_price_confidence: string | null;
  /**
   * `upper-bound`: a spot instance priced at its on-demand row; `billed`: the
   * rate its provider says it bills.
   */
  instance_price_basis?: string | null;
  /** `billed rate from Vast.ai, read 14:02 UTC`, in the server's language. */
  instance_price_label?: string | null;
  /** The instance row's date, region and market (older servers leave them out). */
  instance_price_as_of?: string | null;
  instance_price_region?: string | null;
  instance_price_market?: string | null;
  /** How the prices were chosen, in the server's language. */
  price_note?: string | null;
}

/**
 * A status that may carry the machine (older servers leave it out).
 */
export interface IWithMachine {
  machine?: IMachine | null;
}
