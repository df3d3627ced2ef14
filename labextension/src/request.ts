import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { trans } from './i18n';
import { IGpuCostStatus } from './tokens';
import { withMoneyKeys } from './money-keys';

/**
 * The route of the status endpoint, relative to the server's base URL.
 */
export const STATUS_ROUTE = 'gpucost/api/status';

/**
 * A failed status request.
 */
export class GpuCostRequestError extends Error {
  constructor(
    readonly kind: GpuCostRequestError.Kind,
    message: string,
    readonly status: number | null = null
  ) {
    super(message);
    this.name = 'GpuCostRequestError';
  }
}

/**
 * A namespace for `GpuCostRequestError` statics.
 */
export namespace GpuCostRequestError {
  /**
   * - `missing`: 404, the server extension is not enabled;
   * - `http`: any other error status;
   * - `network`: no answer at all;
   * - `invalid`: an answer that is not a status.
   */
  export type Kind = 'missing' | 'http' | 'network' | 'invalid';
}

/**
 * Fetch the session's live cost.
 *
 * @param settings - the server connection settings (the app's `serverSettings`).
 *
 * @returns the status, or rejects with a `GpuCostRequestError`.
 */
export async function requestStatus(
  settings: ServerConnection.ISettings,
  query?: { [key: string]: string }
): Promise<IGpuCostStatus> {
  const body = await requestJson(settings, STATUS_ROUTE, query);
  const status = parseStatus(body);
  if (status === null) {
    throw new GpuCostRequestError(
      'invalid',
      trans().__('unexpected answer from %1', STATUS_ROUTE),
      200
    );
  }
  return status;
}

/**
 * A status document (fetched or pushed) checked and normalized, or `null`
 * when it is not one.
 */
export function parseStatus(body: unknown): IGpuCostStatus | null {
  const status = withMoneyKeys(body);
  return Private.isStatus(status) ? Private.normalize(status) : null;
}

/**
 * Fetch one of the extension's JSON routes.
 *
 * @param settings - the server connection settings (the app's `serverSettings`).
 * @param route - the route relative to the base URL, e.g. `gpucost/api/kernels`.
 * @param query - query parameters, if any.
 *
 * @returns the parsed body, or rejects with a `GpuCostRequestError` (`missing`
 * on 404, with the server's `message` on other errors).
 */
export async function requestJson(
  settings: ServerConnection.ISettings,
  route: string,
  query: { [key: string]: string } = {}
): Promise<unknown> {
  const search = new URLSearchParams(query).toString();
  const url =
    URLExt.join(settings.baseUrl, route) + (search ? `?${search}` : '');
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(
      url,
      { method: 'GET' },
      settings
    );
  } catch (reason) {
    throw new GpuCostRequestError('network', Private.messageOf(reason));
  }
  if (response.status === 404) {
    throw new GpuCostRequestError('missing', `${route} returned 404`, 404);
  }
  const body = await Private.readJson(response);
  if (!response.ok) {
    const detail = Private.serverMessage(body) ?? response.statusText;
    throw new GpuCostRequestError(
      'http',
      `HTTP ${response.status}${detail ? `: ${detail}` : ''}`,
      response.status
    );
  }
  if (body === null) {
    throw new GpuCostRequestError(
      'invalid',
      trans().__('unexpected answer from %1', route),
      response.status
    );
  }
  return body;
}

/**
 * Send a request to one of the extension's routes and read its JSON answer.
 *
 * @returns the body; rejects with a `GpuCostRequestError` carrying the
 * server's `message` (or the HTTP status) when the answer is not a success.
 */
export async function sendJson<T>(
  settings: ServerConnection.ISettings,
  url: string,
  init: RequestInit = {}
): Promise<T> {
  const response = await ServerConnection.makeRequest(url, init, settings);
  const body = await Private.readJson(response);
  if (!response.ok) {
    const message = Private.serverMessage(body) ?? response.statusText;
    throw new GpuCostRequestError(
      response.status === 404 ? 'missing' : 'http',
      message || `HTTP ${response.status}`,
      response.status
    );
  }
  return body as T;
}

/**
 * Module-private helpers.
 */
namespace Private {
  /**
   * The message of anything thrown.
   */
  export function messageOf(reason: unknown): string {
    if (reason instanceof Error) {
      return reason.message || reason.name;
    }
    return String(reason);
  }

  /**
   * The JSON body of a response; `null` when it has none or it is not JSON.
   */
  export async function readJson(response: Response): Promise<unknown> {
    try {
      return await response.json();
    } catch {
      return null;
    }
  }

  /**
   * The `message` of a Jupyter Server JSON error body, if any.
   */
  export function serverMessage(body: unknown): string | null {
    if (body && typeof body === 'object' && 'message' in body) {
      const message = (body as { message: unknown }).message;
      if (typeof message === 'string' && message) {
        return message;
      }
    }
    return null;
  }

  /**
   * Whether a body has the fields the status bar cannot do without.
   */
  export function isStatus(body: unknown): body is IGpuCostStatus {
    if (!body || typeof body !== 'object') {
      return false;
    }
    const candidate = body as { [key: string]: unknown };
    return (
      typeof candidate.cost === 'number' &&
      typeof candidate.rate_per_hour === 'number'
    );
  }

  /**
   * Fill in what an older or newer server may leave out.
   */
  export function normalize(body: IGpuCostStatus): IGpuCostStatus {
    const telemetry: Partial<IGpuCostStatus['telemetry']> =
      body.telemetry ?? {};
    const prices: Partial<IGpuCostStatus['prices']> = body.prices ?? {};
    return {
      ...body,
      currency: body.currency ?? 'USD',
      currency_symbol: body.currency_symbol ?? '',
      idle_cost: body.idle_cost ?? 0,
      base_price_per_hour: body.base_price_per_hour ?? 0,
      base_cost: body.base_cost ?? 0,
      gpus: Array.isArray(body.gpus) ? body.gpus : [],
      warnings: Array.isArray(body.warnings) ? body.warnings : [],
      telemetry: {
        source: telemetry.source ?? 'unknown',
        simulated: telemetry.simulated === true,
        available: telemetry.available !== false,
        reason: telemetry.reason ?? null,
        detail: telemetry.detail ?? null
      },
      prices: {
        provider: prices.provider ?? null,
        market: prices.market ?? null,
        as_of: prices.as_of ?? null,
        catalog_date: prices.catalog_date ?? null,
        overridden_models: Array.isArray(prices.overridden_models)
          ? prices.overridden_models
          : []
      }
    };
  }
}
