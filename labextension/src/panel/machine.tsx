import { ServerConnection } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { confirmStop } from '../budget/confirm';
import { budgetRequest } from '../budget/request';
import { machineLine, machineOf } from '../machine/format';
import { IPanelBudget, IPanelStatus } from './types';

/**
 * What the panel needs of the budget to show a stop the user asked for.
 */
interface IStopState {
  state: string;
  grace?: { can_cancel?: boolean; action?: string } | null;
  /** Waiting for the busy kernels to end before the countdown. */
  stop_when_idle?: { action: string } | null;
}

/*
 * The machine: what it is, how it is priced, and the user's own stop — now, or when
 * the running cells and training runs end (finished or failed) — with the countdown
 * and cancel of a budget stop.
 */
export function Machine(props: {
  status: IPanelStatus;
  symbol: string;
  trans: TranslationBundle;
  settings?: ServerConnection.ISettings;
}): React.ReactElement {
  const { status, symbol, trans } = props;
  const settings = props.settings ?? ServerConnection.makeSettings();
  const [error, setError] = React.useState<string | null>(null);
  const machine = machineOf(status);
  const line = machineLine(status, symbol, trans);
  const budget = (status.budget ?? null) as (IPanelBudget & IStopState) | null;
  const action = machine?.stoppable ? 'stop-instance' : 'stop-server';
  const send = (init: RequestInit): void => {
    setError(null);
    budgetRequest<unknown>(settings, 'stop', init).catch(reason =>
      setError(String(reason))
    );
  };
  // a manual stop asks first: Cancel starts nothing
  const stop = (when: 'now' | 'idle'): void => {
    void confirmStop(action, when).then(confirmed => {
      if (confirmed) {
        send({
          method: 'POST',
          body: JSON.stringify({
            action,
            reason: when === 'now' ? 'user' : 'done',
            when
          })
        });
      }
    });
  };
  const waiting = budget?.stop_when_idle ?? null;
  const counting = budget?.state === 'grace' && !!budget.grace?.can_cancel;
  return (
    <section className="jp-gpucost-panel-machine">
      <h3>{trans.__('Machine')}</h3>
      <p data-field="machine">
        {line ??
          trans.__('No cloud machine detected: prices from the settings.')}
      </p>
      {waiting !== null && (
        <p data-field="stop-when-done">
          {trans.__(
            'When the running cells end (finished or failed): save, export, then %1.',
            waiting.action
          )}
        </p>
      )}
      <div className="jp-gpucost-panel-actions">
        {waiting !== null || counting ? (
          <button
            className="jp-Button jp-mod-styled"
            onClick={() => send({ method: 'DELETE' })}
          >
            {trans.__('Cancel stop')}
          </button>
        ) : (
          <>
            <button
              className="jp-Button jp-mod-styled jp-gpucost-stop-button"
              data-stop="idle"
              title={trans.__(
                'When the running cells end: save the notebooks, export the checkpoints, then stop (after a countdown you can cancel)'
              )}
              onClick={() => stop('idle')}
            >
              {machine?.stoppable
                ? trans.__('Stop machine when done')
                : trans.__('Stop server when done')}
            </button>
            <button
              className="jp-Button jp-mod-styled jp-gpucost-stop-button"
              data-stop="now"
              onClick={() => stop('now')}
            >
              {machine?.stoppable
                ? trans.__('Stop machine')
                : trans.__('Stop server')}
            </button>
          </>
        )}
      </div>
      {error !== null && (
        <p className="jp-gpucost-panel-error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
