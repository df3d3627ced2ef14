import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { AlertsModel } from './alerts-model';

/*
 * Where the budget's alerts go (docs/alerts.md): the admin's targets by kind only, the
 * user's own masked, with a test and a remove button, and a field to add one. What it
 * shows is the panel's `AlertsModel`; the view only keeps the URL being typed.
 */

export function Alerts(props: {
  model: AlertsModel;
  trans: TranslationBundle;
}): React.ReactElement | null {
  const { model, trans } = props;
  const [url, setUrl] = React.useState('');
  const { answer, error, note } = model;
  if (answer === null) {
    return null;
  }
  const add = (event: React.FormEvent): void => {
    event.preventDefault();
    void model.add(url).then(ok => {
      if (ok) {
        setUrl('');
      }
    });
  };
  const test = (id: string): void => {
    void model.test(
      id,
      trans.__('Test alert sent; its delivery is listed below.')
    );
  };
  const remove = (id: string): void => {
    void model.remove(id);
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
