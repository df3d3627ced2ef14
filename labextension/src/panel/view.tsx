import { VDomRenderer } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { formatLocalTime } from '../budget/format';
import { currencySymbol } from '../format';
import { trans } from '../i18n';
import { Alerts } from './alerts';
import { Budget } from './budget-form';
import { History } from './history';
import { Kernels } from './kernels';
import { Machine } from './machine';
import { CostPanelModel } from './model';
import { Prices } from './prices';
import { Cells, Exports } from './recent';
import { BudgetCannotAct, MeteringBanner, noGpuMetered } from './metering';
import { Bill, LedgerWarnings, Source, Totals } from './summary';
import { HistoryWindow } from './types';
import { Energy, Waste } from './waste';

/**
 * The DOM id of the panel.
 */
export const PANEL_ID = 'jp-gpucost-panel';

/**
 * The cost panel: where the money went.
 */
export class CostPanel extends VDomRenderer<CostPanelModel> {
  constructor(model: CostPanelModel) {
    super(model);
    this.id = PANEL_ID;
    this.addClass('jp-gpucost-Panel');
    this.title.label = trans().__('GPU Cost');
    this.title.caption = trans().__(
      'What this session has cost, where the money went'
    );
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    // where the budget's alerts go: asked once, when the panel is first shown
    void this.model.alerts.load();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.active = true;
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this.model.active = false;
  }

  protected render(): React.ReactElement {
    return (
      <Private.Panel
        model={this.model}
        trans={trans()}
        onWindow={w => {
          this.model.window = w;
        }}
      />
    );
  }
}

namespace Private {
  export function Panel(props: {
    model: CostPanelModel;
    trans: TranslationBundle;
    onWindow: (w: HistoryWindow) => void;
  }): React.ReactElement {
    const { model, trans } = props;
    const status = model.status;
    if (status.missing) {
      return (
        <div className="jp-gpucost-panel-message" data-state="missing">
          {trans.__(
            'The jupyter-gpucost server extension is not enabled on this server (GET /gpucost/api/status answered 404). Install jupyter-gpucost in the server’s environment and restart the server.'
          )}
        </div>
      );
    }
    if (status.value === null) {
      return (
        <div
          className="jp-gpucost-panel-message"
          data-state={status.error ? 'error' : 'loading'}
        >
          {status.error
            ? trans.__('Could not read the session’s cost: %1', status.error)
            : trans.__('Loading…')}
        </div>
      );
    }
    const s = status.value;
    const symbol = currencySymbol(s);
    return (
      <div className="jp-gpucost-panel-body">
        {status.error && (
          <div className="jp-gpucost-panel-banner" data-state="error">
            {trans.__(
              'The server did not answer (%1): the figures below are from %2.',
              status.error,
              formatLocalTime(s.as_of, Date.now(), { seconds: true })
            )}
          </div>
        )}
        {noGpuMetered(s) ? (
          <MeteringBanner status={s} trans={trans} />
        ) : (
          <Source status={s} trans={trans} />
        )}
        <LedgerWarnings status={s} />
        <Totals status={s} symbol={symbol} trans={trans} />
        <Bill status={s} symbol={symbol} trans={trans} />
        {s.metering?.budget ? (
          <BudgetCannotAct sentence={s.metering.budget} trans={trans} />
        ) : (
          <Budget model={model} status={s} symbol={symbol} trans={trans} />
        )}
        <Alerts model={model.alerts} trans={trans} />
        <Machine status={s} symbol={symbol} trans={trans} />
        {/* nothing metered: no spend to draw, never a line at $0 */}
        {s.metering?.state !== 'unknown' && (
          <History {...props} symbol={symbol} />
        )}
        <Kernels
          model={model}
          gpus={s.gpus.length}
          symbol={symbol}
          trans={trans}
        />
        <Waste
          status={s}
          kernels={model.kernels.value}
          symbol={symbol}
          trans={trans}
        />
        <Energy status={s} trans={trans} />
        <Cells model={model} symbol={symbol} trans={trans} />
        <Exports model={model} trans={trans} />
        <Prices status={s} symbol={symbol} trans={trans} />
      </div>
    );
  }
}
