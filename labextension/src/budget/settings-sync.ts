import { Notification } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { trans } from '../i18n';
import { IBudgetStatus } from './tokens';

/**
 * What the settings sync needs from the budget controller.
 */
export interface ISettingsSyncHost {
  /** The server's budget, as last received. */
  readonly status: IBudgetStatus | null;
  /** Whether a soft budget is being sent to the server now. */
  readonly applying: boolean;
  /** Send the soft budget to the server (through the shared model). */
  setSoftBudget(amount: number | null, scope: string): Promise<void>;
}

/**
 * The budget settings (*GPU Cost: budget*), kept in step with the server.
 *
 * The server's budget is the one truth: a change saved in the settings (the
 * Settings Editor) is sent to the server, and whatever the server's soft
 * budget becomes (set here, in the panel, with `%gpucost budget`, through the
 * API) is written back to the settings. Loading the page sends nothing.
 */
export class BudgetSettingsSync {
  constructor(host: ISettingsSyncHost) {
    this._host = host;
  }

  /**
   * Follow these settings.
   */
  attach(settings: ISettingRegistry.ISettings): void {
    this._settings = settings;
    this._seen = readSettings(settings);
    settings.changed.connect(this._onChanged, this);
    void this.sync();
  }

  /**
   * Stop following the settings.
   */
  dispose(): void {
    this._settings?.changed.disconnect(this._onChanged, this);
  }

  /**
   * Push the soft budget from the settings to the server.
   */
  async apply(amount: number | null, scope: string): Promise<void> {
    const status = this._host.status;
    const soft = status?.soft;
    if (
      status &&
      ((amount === null && !soft) ||
        (soft && soft.amount === amount && soft.scope === scope))
    ) {
      return;
    }
    try {
      await this._host.setSoftBudget(amount, scope);
    } catch (reason) {
      Notification.error(
        trans().__('Budget not set: %1', (reason as Error).message),
        {
          autoClose: 8000
        }
      );
      // the settings show the server's budget again
      void this.sync();
    }
  }

  /**
   * Write the server's soft budget to the settings when they differ from it.
   */
  async sync(): Promise<void> {
    const settings = this._settings;
    const status = this._host.status;
    if (!settings || !status || this._host.applying) {
      return;
    }
    const soft = status.soft;
    const target: ISettingValues = soft
      ? { amount: soft.amount, scope: soft.scope }
      : { amount: null, scope: this._seen.scope };
    if (sameSettings(target, this._seen)) {
      return;
    }
    this._seen = target;
    const raw = {
      ...(settings.user as { [key: string]: unknown }),
      softBudgetUsd: target.amount,
      scope: target.scope
    };
    this._writes += 1;
    try {
      await settings.save(JSON.stringify(raw, null, 2));
    } catch (reason) {
      console.warn(
        'jupyter-gpucost: the budget settings could not be kept in step with the server',
        reason
      );
    } finally {
      this._writes -= 1;
    }
  }

  /**
   * The settings changed: send a change made there (not one written by
   * `sync`) to the server.
   */
  private _onChanged(settings: ISettingRegistry.ISettings): void {
    if (this._writes > 0) {
      return;
    }
    const values = readSettings(settings);
    if (sameSettings(values, this._seen)) {
      return;
    }
    this._seen = values;
    void this.apply(values.amount, values.scope);
  }

  private _host: ISettingsSyncHost;
  private _settings: ISettingRegistry.ISettings | null = null;
  private _seen: ISettingValues = { amount: null, scope: 'session' };
  private _writes = 0;
}

/**
 * The budget settings' values.
 */
export interface ISettingValues {
  amount: number | null;
  scope: string;
}

/**
 * The budget settings' values now.
 */
export function readSettings(
  settings: ISettingRegistry.ISettings
): ISettingValues {
  const amount = settings.get('softBudgetUsd').composite;
  const scope = settings.get('scope').composite;
  return {
    amount: typeof amount === 'number' ? amount : null,
    scope: typeof scope === 'string' ? scope : 'session'
  };
}

/**
 * Whether two sets of values are the same budget.
 */
export function sameSettings(a: ISettingValues, b: ISettingValues): boolean {
  return a.amount === b.amount && (a.amount === null || a.scope === b.scope);
}
