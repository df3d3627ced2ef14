import { VDomModel } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { sendJson } from '../request';

/**
 * The alerts route, relative to the server's base URL.
 */
export const ALERTS_ROUTE = 'gpucost/api/alerts';

export interface IAlertDelivery {
  at: string;
  kind: string;
  title: string;
  target: string;
  ok: boolean;
  attempts: number;
  error: string;
}

export interface IAlertsAnswer {
  admin: string[];
  yours: { id: string; target: string }[];
  can_add: boolean;
  thresholds_pct: number[];
  recent: IAlertDelivery[];
}

/**
 * Where the budget's alerts go (docs/alerts.md), as the panel shows it: the
 * server's answer, read once when the panel is first shown and after each
 * change; the last error and the note of a test sent. The panel's view only
 * reads it and calls its methods.
 */
export class AlertsModel extends VDomModel {
  constructor(serverSettings: ServerConnection.ISettings) {
    super();
    this._settings = serverSettings;
  }

  /**
   * The last answer, or `null` before the first (or when it failed).
   */
  get answer(): IAlertsAnswer | null {
    return this._answer;
  }

  /**
   * Why the last request failed, or `null`.
   */
  get error(): string | null {
    return this._error;
  }

  /**
   * Set when a test alert was sent.
   */
  get note(): string | null {
    return this._note;
  }

  /**
   * Read the alerts once (later calls do nothing): the panel calls it when
   * it is first shown.
   */
  load(): Promise<boolean> {
    if (this._loaded === null) {
      this._loaded = this._call(() =>
        sendJson<IAlertsAnswer>(this._settings, this._route())
      );
    }
    return this._loaded;
  }

  /**
   * Add the user's own target; resolves `true` when the server took it.
   */
  add(url: string): Promise<boolean> {
    return this._call(() =>
      sendJson<IAlertsAnswer>(this._settings, this._route('targets'), {
        method: 'POST',
        body: JSON.stringify({ url: url.trim() })
      })
    );
  }

  /**
   * Send a test alert to one of the user's targets; `note` says it was sent.
   */
  test(id: string, sent: string): Promise<boolean> {
    return this._call(async () => {
      await sendJson(this._settings, this._route('targets', id, 'test'), {
        method: 'POST',
        body: '{}'
      });
      this._note = sent;
      return null;
    });
  }

  /**
   * Remove one of the user's targets.
   */
  remove(id: string): Promise<boolean> {
    return this._call(() =>
      sendJson<IAlertsAnswer>(this._settings, this._route('targets', id), {
        method: 'DELETE'
      })
    );
  }

  private _route(...parts: string[]): string {
    return URLExt.join(this._settings.baseUrl, ALERTS_ROUTE, ...parts);
  }

  /**
   * One request: its answer (when it has one) kept, its error shown.
   */
  private async _call(
    what: () => Promise<IAlertsAnswer | null>
  ): Promise<boolean> {
    let ok = true;
    try {
      const next = await what();
      if (next !== null) {
        this._answer = next;
      }
      this._error = null;
    } catch (reason) {
      this._error = reason instanceof Error ? reason.message : String(reason);
      ok = false;
    }
    if (!this.isDisposed) {
      this.stateChanged.emit();
    }
    return ok;
  }

  private _settings: ServerConnection.ISettings;
  private _answer: IAlertsAnswer | null = null;
  private _error: string | null = null;
  private _note: string | null = null;
  private _loaded: Promise<boolean> | null = null;
}
