import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { trans } from '../i18n';
import { GpuCostRequestError, sendJson } from '../request';

/**
 * The exports route, relative to the server's base URL.
 */
export const EXPORTS_ROUTE = 'gpucost/api/exports';

/**
 * A place exports can go (never with its credentials).
 */
export interface IExportTarget {
  name: string;
  label: string;
  kind: string;
  url: string;
  default: boolean;
}

/**
 * One exported path.
 */
export interface IExportResult {
  path: string;
  url: string;
  manifest_url: string;
  size_bytes: number;
  sha256: string | null;
  verified: string;
}

/**
 * The state of an export job.
 */
export type ExportState =
  'queued' | 'running' | 'done' | 'failed' | 'cancelled';

/**
 * An export job, as the server reports it.
 */
export interface IExportJob {
  id: string;
  state: ExportState;
  target: string;
  target_url: string;
  paths: string[];
  bytes_done: number;
  bytes_total: number;
  progress: number;
  rate_bytes_per_s: number | null;
  eta_s: number | null;
  created: string | null;
  started: string | null;
  finished: string | null;
  error: string | null;
  results: IExportResult[];
  user: string;
}

/**
 * `GET /gpucost/api/exports`.
 */
export interface IExportsPayload {
  default_target: string;
  targets: IExportTarget[];
  jobs: IExportJob[];
}

/**
 * Call an export route; resolves with the JSON body, rejects with the
 * server's message.
 */
export async function exportRequest<T>(
  settings: ServerConnection.ISettings,
  path: string,
  init: RequestInit = {}
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, EXPORTS_ROUTE, path);
  try {
    return await sendJson<T>(settings, url, init);
  } catch (reason) {
    if (reason instanceof ServerConnection.NetworkError) {
      throw new Error(
        trans().__('the server could not be reached (%1)', reason.message)
      );
    }
    if (
      reason instanceof GpuCostRequestError &&
      reason.status === 404 &&
      !path
    ) {
      throw new Error(
        'the jupyter-gpucost server extension is not enabled on this server'
      );
    }
    throw reason;
  }
}

/**
 * The targets and the jobs.
 */
export function listExports(
  settings: ServerConnection.ISettings
): Promise<IExportsPayload> {
  return exportRequest<IExportsPayload>(settings, '');
}

/**
 * Start exporting `paths` (relative to the server's root) to `target` (the
 * server's default when omitted).
 */
export function startExport(
  settings: ServerConnection.ISettings,
  paths: string[],
  target?: string
): Promise<IExportJob> {
  const body: { paths: string[]; target?: string } = { paths };
  if (target) {
    body.target = target;
  }
  return exportRequest<IExportJob>(settings, '', {
    method: 'POST',
    body: JSON.stringify(body)
  });
}

/**
 * One job.
 */
export function getExport(
  settings: ServerConnection.ISettings,
  id: string
): Promise<IExportJob> {
  return exportRequest<IExportJob>(settings, id);
}

/**
 * Cancel a job: it stops and removes what it wrote.
 */
export function cancelExport(
  settings: ServerConnection.ISettings,
  id: string
): Promise<IExportJob> {
  return exportRequest<IExportJob>(settings, id, { method: 'DELETE' });
}
