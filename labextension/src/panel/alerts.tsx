import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { sendJson } from '../request';

/*
 * Where the budget's alerts go (docs/alerts.md): the admin's targets by kind only, the
 * user's own masked, with a test and a remove button, and a field to add one.
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

export function Alerts(props: {
  settings: ServerConnection.ISettings;
  trans: TranslationBundle;
}): React.ReactElement | null {
  const { settings, trans } = props;
  const [answer, setAnswer] = React.useState<IAlertsAnswer | null>(null);
  const [url, setUrl] = React.useState('');
  const [error, setError] = React.useState<string | null>(null);
  const [note, setNote] = React.useState<string | null>(null);
  const route = (...parts: string[]): string =>
    URLExt.join(settings.baseUrl, ALERTS_ROUTE, ...parts);

  const call = async (
    what: () => Promise<IAlertsAnswer | null>
  ): Promise<void> => {
    try {
      const next = await what();
      if (next !== null) {
        setAnswer(next);
      }
      setError(null);
    } catch (reason) {
      setError(reason instanceof Error ? reason.message : String(reason));
    }
  };

  React.useEffect(() => {
    void call(() => sendJson<IAlertsAnswer>(settings, route()));
  }, [settings]);

  if (answer === null) {
    return null;
  }
  const add = (event: React.FormEvent): void => {
    event.preventDefault();
    void call(async () => {
      const next = await sendJson<IAlertsAnswer>(settings, route('targets'), {
        method: 'POST',
        body: JSON.stringify({ url: url.trim() })
      });
      setUrl('');
      return next;
    });
  };
  const test = (id: string): void => {
    void call(async () => {
      await sendJson(settings, route('targets', id, 'test'), {
        method: 'POST',
        body: '{}'
      });
      setNote(trans.__('Test alert sent; its delivery is listed below.'));
      return null;
    });
  };
  const remove = (id: string): void => {
    void call(() =>
      sendJson<IAlertsAnswer>(settings, route('targets', id), {
        method: 'DELETE'
      })
    );
  };
  const nowhere = answer.admin.length === 0 && answer.yours.length === 0;
  return (
    <div className="jp-gpucost-alerts">
      <h4>{trans.__('Alerts')}</h4>
      <p>
        {nowhere
          ? trans.__('Alerts go nowhere.')
          : trans.__(
              'Alerts at %1 of a budget, and when the server is stopped, go to:',
              answer.thresholds_pct.map(p => `${p}%`).join(', ')
            )}
      </p>
      <ul>
        {answer.admin.map((kind, i) => (
          <li key={`admin-${i}`} data-field="admin-target">
            {trans.__('%1 (set by your administrator)', kind)}
          </li>
        ))}
        {answer.yours.map(t => (
          <li key={t.id} data-field="your-target">
            <code>{t.target}</code>{' '}
            <button className="jp-mod-styled" onClick={() => test(t.id)}>
              {trans.__('Test')}
            </button>{' '}
            <button className="jp-mod-styled" onClick={() => remove(t.id)}>
              {trans.__('Remove')}
            </button>
          </li>
        ))}
      </ul>
      {answer.can_add && (
        <form className="jp-gpucost-alerts-add" onSubmit={add}>
          <input
            className="jp-mod-styled"
            type="password"
            autoComplete="off"
            placeholder={trans.__('mailtos://…, slack://…, webhooks://…')}
            aria-label={trans.__('Where your alerts go (a URL)')}
            value={url}
            onChange={e => setUrl(e.target.value)}
          />{' '}
          <button className="jp-mod-styled jp-mod-accept" type="submit">
            {trans.__('Add')}
          </button>
        </form>
      )}
      {note && <p className="jp-gpucost-alerts-note">{note}</p>}
      {error && <p className="jp-gpucost-alerts-error">{error}</p>}
      {answer.recent.length > 0 && (
        <ul className="jp-gpucost-alerts-recent">
          {answer.recent
            .slice(-5)
            .reverse()
            .map((d, i) => (
              <li key={`${d.at}-${i}`} data-ok={d.ok}>
                {d.ok
                  ? trans.__('%1: sent to %2', d.title, d.target)
                  : trans.__(
                      '%1: not delivered to %2 (%3)',
                      d.title,
                      d.target,
                      d.error
                    )}
              </li>
            ))}
        </ul>
      )}
    </div>
  );
}
