import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { CostChart } from './chart';
import { CostPanelModel } from './model';
import { HISTORY_WINDOWS, HistoryWindow } from './types';

/*
 * Spend over time: the window buttons and the chart.
 */

export function History(props: {
  model: CostPanelModel;
  symbol: string;
  trans: TranslationBundle;
  onWindow: (w: HistoryWindow) => void;
}): React.ReactElement {
  const { model, symbol, trans, onWindow } = props;
  const history = model.history;
  let body: React.ReactElement;
  if (history.missing) {
    body = (
      <div className="jp-gpucost-panel-note">
        {trans.__('This server keeps no history (no /gpucost/api/history).')}
      </div>
    );
  } else if (history.value) {
    body = <CostChart history={history.value} symbol={symbol} trans={trans} />;
  } else {
    body = (
      <div className="jp-gpucost-panel-note">
        {history.error
          ? trans.__('Could not read the history: %1', history.error)
          : trans.__('Loading…')}
      </div>
    );
  }
  return (
    <section className="jp-gpucost-panel-history">
      <header>
        <h3>{trans.__('Over time')}</h3>
        <span className="jp-gpucost-window" role="group">
          {HISTORY_WINDOWS.map(w => (
            <button
              key={w}
              className="jp-gpucost-window-button"
              aria-pressed={model.window === w}
              onClick={() => onWindow(w)}
            >
              {w}
            </button>
          ))}
        </span>
      </header>
      {history.error && history.value && (
        <div className="jp-gpucost-panel-note" data-state="error">
          {history.error}
        </div>
      )}
      {body}
    </section>
  );
}
