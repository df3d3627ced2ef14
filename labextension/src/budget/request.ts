import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { sendJson } from '../request';
import { IBudgetStatus } from './tokens';
import { withMoneyKeys } from '../money-keys';

/**
 * The budget route, relative to the server's base URL.
 */
export const BUDGET_ROUTE = 'gpucost/api/budget';

/**
 * The URL of a budget route (`path` below the budget route, `''` for the route
 * itself), with the query appended after the path: never a trailing slash,
 * which the server would answer with a redirect.
 */
export function budgetUrl(
  settings: ServerConnection.ISettings,
  path: string,
  query: { [key: string]: string } = {}
): string {
  const search = new URLSearchParams(query).toString();
  const url = URLExt.join(settings.baseUrl, BUDGET_ROUTE, path);
  return search ? `${url}?${search}` : url;
}

/**
 * Call a budget route; resolves with the JSON body, rejects with the server's
 * message.
 */
export function budgetRequest<T>(
  settings: ServerConnection.ISettings,
  path: string,
  init: RequestInit = {},
  query: { [key: string]: string } = {}
): Promise<T> {
  return sendJson<T>(settings, budgetUrl(settings, path, query), init).then(
    withMoneyKeys
  );
}

/**
 * The budget now; `client` identifies this page (it is then asked to save).
 */
export function getBudget(
  settings: ServerConnection.ISettings,
  client: string
): Promise<IBudgetStatus> {
  return budgetRequest<IBudgetStatus>(settings, '', {}, { client });
}

/**
 * Set (or with `null` remove) the user's soft budget.
 */
export function setSoftBudget(
  settings: ServerConnection.ISettings,
  amount: number | null,
  scope: string
): Promise<IBudgetStatus> {
  return budgetRequest<IBudgetStatus>(settings, '', {
    method: 'PUT',
    // the amount is in the session's currency all the same. The server takes it
    // under its new name `amount` too, but one from before that name refuses a
    // field it does not know: the old name alone is understood by every server
    // (docs/api.md, "PUT /gpucost/api/budget")
    body: JSON.stringify({ amount_usd: amount, scope })
  });
}

/**
 * "Save and stop now": end the countdown.
 */
export function stopNow(settings: ServerConnection.ISettings): Promise<void> {
  return budgetRequest<void>(settings, 'stop-now', { method: 'POST' });
}

/**
 * Tell the server which notebooks this page saved for a save request.
 */
export function acknowledgeSave(
  settings: ServerConnection.ISettings,
  body: {
    request_id: string;
    client: string;
    saved: string[];
    failed: string[];
  }
): Promise<void> {
  return budgetRequest<void>(settings, 'saved', {
    method: 'POST',
    body: JSON.stringify(body)
  });
}
