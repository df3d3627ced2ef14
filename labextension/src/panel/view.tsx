import { VDomRenderer } from '@jupyterlab/apputils';
import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import {
  budgetPercent,
  currencyLabel,
  formatLocalTime,
  parseAmount,
  runOutText
} from '../budget/format';
import { describePaths } from '../export/format';
import {
  currencySymbol,
  formatBytes,
  formatCo2,
  formatDuration,
  formatEnergy,
  formatMoney,
  formatRate
} from '../format';
import { CostChart } from './chart';
import { gpuMetered, kernelRows, rightsizingText } from './format';
import { CostPanelModel } from './model';
import {
  HISTORY_WINDOWS,
  HistoryWindow,
  IBudgetLine,
  IPanelStatus
} from './types';

/**
 * The DOM id of the panel.
 */
export const PANEL_ID = 'jp-gpucost-panel';

/**
 * The cost panel: where the money went.
 */
export class CostPanel extends VDomRenderer<CostPanelModel> {
  constructor(model: CostPanelModel, translator?: ITranslator) {
    super(model);
    this._trans = (translator ?? nullTranslator).load('jupyter_gpucost');
    this.id = PANEL_ID;
    this.addClass('jp-gpucost-Panel');
    this.title.label = this._trans.__('GPU Cost');
    this.title.caption = this._trans.__(
      'What this session has cost, where the money went'
    );
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
        trans={this._trans}
        onWindow={w => {
          this.model.window = w;
        }}
      />
    );
  }

  private _trans: TranslationBundle;
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
              new Date(s.as_of).toLocaleTimeString()
            )}
          </div>
        )}
        <Source status={s} trans={trans} />
        <Totals status={s} symbol={symbol} trans={trans} />
        <Budget model={model} status={s} symbol={symbol} trans={trans} />
        <History {...props} symbol={symbol} />
        <Kernels
          model={model}
          gpus={s.gpus.length}
          symbol={symbol}
          trans={trans}
        />
        <Waste status={s} symbol={symbol} trans={trans} />
        <Energy status={s} trans={trans} />
        <Cells model={model} symbol={symbol} trans={trans} />
        <Exports model={model} trans={trans} />
        <Prices status={s} symbol={symbol} trans={trans} />
      </div>
    );
  }

  function Source(props: {
    status: IPanelStatus;
    trans: TranslationBundle;
  }): React.ReactElement | null {
    const { status, trans } = props;
    if (status.telemetry.simulated) {
      const detail = status.telemetry.detail ?? {};
      return (
        <div className="jp-gpucost-panel-banner" data-state="simulated">
          {trans.__(
            'Simulated: these GPUs and readings are replayed from a trace (%1), not measured on this machine.',
            String(detail['trace'] ?? trans.__('recorded session'))
          )}
        </div>
      );
    }
    if (!status.telemetry.available) {
      return (
        <div className="jp-gpucost-panel-banner" data-state="no-telemetry">
          {trans.__(
            'No GPU telemetry: %1. Only the base price is counted.',
            status.telemetry.reason ?? trans.__('unknown reason')
          )}
        </div>
      );
    }
    return null;
  }

  function Totals(props: {
    status: IPanelStatus;
    symbol: string;
    trans: TranslationBundle;
  }): React.ReactElement {
    const { status, symbol, trans } = props;
    const noLedger = trans.__(
      'Not known: the server has no ledger (older version, or the ledger could not be opened; see the server log).'
    );
    const total = (
      key: string,
      label: string,
      value: number | null | undefined,
      title: string
    ): React.ReactElement => (
      <div className="jp-gpucost-total" data-total={key} title={title}>
        <div className="jp-gpucost-total-label">{label}</div>
        <div className="jp-gpucost-total-value">
          {value === null || value === undefined
            ? '—'
            : key === 'rate'
              ? formatRate(value, symbol, trans)
              : formatMoney(value, symbol)}
        </div>
      </div>
    );
    return (
      <section className="jp-gpucost-panel-totals">
        {total(
          'session',
          trans.__('This session'),
          status.cost_usd,
          trans.__(
            'Since the server started at %1, at %2',
            new Date(status.session_started).toLocaleString(),
            formatRate(status.rate_usd_per_hour, symbol, trans)
          )
        )}
        {total(
          'today',
          trans.__('Today'),
          status.today_usd,
          status.today_usd === undefined || status.today_usd === null
            ? noLedger
            : trans.__('All sessions since midnight')
        )}
        {total(
          'month',
          trans.__('This month'),
          status.month_usd,
          status.month_usd === undefined || status.month_usd === null
            ? noLedger
            : trans.__(
                'All sessions this month; all time: %1',
                formatMoney(status.all_time_usd ?? NaN, symbol)
              )
        )}
        {total(
          'rate',
          trans.__('Rate now'),
          status.rate_usd_per_hour,
          trans.__('Per hour, for the GPUs this server holds')
        )}
      </section>
    );
  }

  function BudgetLine(props: {
    line: IBudgetLine;
    symbol: string;
    trans: TranslationBundle;
  }): React.ReactElement {
    const { line, symbol, trans } = props;
    const runOut = runOutText(line);
    const who =
      line.kind === 'hard'
        ? trans.__('Admin’s budget (locked)')
        : trans.__('Your budget');
    return (
      <li data-budget={line.kind}>
        <strong>{who}</strong>
        {': '}
        {trans.__(
          '%1 of %2 per %3 spent (%4%)',
          line.spent_usd === null ? '—' : formatMoney(line.spent_usd, symbol),
          formatMoney(line.amount_usd, symbol),
          line.scope,
          line.share === null ? '—' : budgetPercent(line.share)
        )}
        {runOut !== null &&
          ' · ' + trans.__('runs out at %1 at the current rate', runOut)}
      </li>
    );
  }

  function Budget(props: {
    model: CostPanelModel;
    status: IPanelStatus;
    symbol: string;
    trans: TranslationBundle;
  }): React.ReactElement | null {
    const { model, status, symbol, trans } = props;
    const budget = status.budget;
    const [amount, setAmount] = React.useState('');
    const [scope, setScope] = React.useState('session');
    const [error, setError] = React.useState<string | null>(null);
    if (!budget) {
      return null;
    }
    const submit = (value: number | null): void => {
      void model.setSoftBudget(value, scope).then(setError);
    };
    return (
      <section className="jp-gpucost-panel-budget" data-state={budget.state}>
        <h3>{trans.__('Budget')}</h3>
        <ul>
          {budget.hard && (
            <BudgetLine line={budget.hard} symbol={symbol} trans={trans} />
          )}
          {budget.soft && (
            <BudgetLine line={budget.soft} symbol={symbol} trans={trans} />
          )}
          {!budget.hard && !budget.soft && (
            <li>{trans.__('No budget set.')}</li>
          )}
        </ul>
        {budget.last_action?.message && (
          <p data-field="last-action">
            {trans.__('Last action: %1', budget.last_action.message)}
          </p>
        )}
        <form
          className="jp-gpucost-budget-form"
          onSubmit={event => {
            event.preventDefault();
            const parsed = parseAmount(amount);
            if (parsed.error !== null) {
              setError(trans.__(parsed.error));
              return;
            }
            submit(parsed.value);
          }}
        >
          <label>
            {currencyLabel(symbol)
              ? trans.__('Your budget (%1)', currencyLabel(symbol))
              : trans.__('Your budget')}{' '}
            <input
              className="jp-mod-styled"
              inputMode="decimal"
              value={amount}
              onChange={event => setAmount(event.target.value)}
            />
          </label>{' '}
          <select
            className="jp-mod-styled"
            value={scope}
            onChange={event => setScope(event.target.value)}
          >
            {budget.scopes.map(s => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>{' '}
          <button className="jp-mod-styled jp-mod-accept" type="submit">
            {trans.__('Set')}
          </button>
          {budget.soft && (
            <button
              className="jp-mod-styled"
              type="button"
              onClick={() => submit(null)}
            >
              {trans.__('Remove')}
            </button>
          )}
        </form>
        {error && (
          <p className="jp-gpucost-panel-note" data-state="error">
            {error}
          </p>
        )}
      </section>
    );
  }

  function History(props: {
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
      body = (
        <CostChart history={history.value} symbol={symbol} trans={trans} />
      );
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

  function Kernels(props: {
    model: CostPanelModel;
    gpus: number;
    symbol: string;
    trans: TranslationBundle;
  }): React.ReactElement {
    const { model, gpus, symbol, trans } = props;
    const part = model.kernels;
    if (part.missing) {
      return (
        <section className="jp-gpucost-panel-kernels">
          <h3>{trans.__('Kernels')}</h3>
          <div className="jp-gpucost-panel-note">
            {trans.__(
              'This server does not attribute cost to kernels (no /gpucost/api/kernels).'
            )}
          </div>
        </section>
      );
    }
    if (!part.value) {
      return (
        <section className="jp-gpucost-panel-kernels">
          <h3>{trans.__('Kernels')}</h3>
          <div className="jp-gpucost-panel-note">
            {part.error
              ? trans.__('Could not read the kernels: %1', part.error)
              : trans.__('Loading…')}
          </div>
        </section>
      );
    }
    const answer = part.value;
    const metered = gpuMetered(gpus, answer);
    const rows = kernelRows(answer, symbol, trans, metered);
    return (
      <section className="jp-gpucost-panel-kernels">
        <h3>{trans.__('Kernels')}</h3>
        {!metered && (
          <div className="jp-gpucost-panel-note" data-state="no-gpus">
            {trans.__(
              'No GPU is metered on this server: there is no GPU cost to attribute to kernels.'
            )}
          </div>
        )}
        {metered && !answer.pids_visible && (
          <div className="jp-gpucost-panel-note" data-state="pids-hidden">
            {answer.note ??
              trans.__(
                'The GPU driver reports processes this server cannot see (a container): GPU use is not attributed to kernels.'
              )}
          </div>
        )}
        {part.error && (
          <div className="jp-gpucost-panel-note" data-state="error">
            {part.error}
          </div>
        )}
        {rows.length > 0 && (
          <div className="jp-gpucost-table-scroll">
            <table className="jp-gpucost-kernels">
              <thead>
                <tr>
                  <th>{trans.__('Notebook')}</th>
                  <th>{trans.__('State')}</th>
                  <th>{trans.__('Uptime')}</th>
                  <th>{trans.__('GPU share')}</th>
                  <th className="jp-gpucost-num">{trans.__('Cost')}</th>
                </tr>
              </thead>
              <tbody>
                {rows.map(row => (
                  <tr
                    key={row.key}
                    data-kind={row.kind}
                    data-kernel-id={row.kind === 'kernel' ? row.key : undefined}
                    title={row.title}
                  >
                    <td>{row.label}</td>
                    <td>{row.state}</td>
                    <td>{row.uptime}</td>
                    <td>{row.share}</td>
                    <td className="jp-gpucost-num">{row.cost}</td>
                  </tr>
                ))}
              </tbody>
              {metered && (
                <tfoot>
                  <tr data-kind="total">
                    <td colSpan={4}>{trans.__('GPU total')}</td>
                    <td className="jp-gpucost-num">
                      {formatMoney(answer.total_usd, symbol)}
                    </td>
                  </tr>
                </tfoot>
              )}
            </table>
          </div>
        )}
      </section>
    );
  }

  function Waste(props: {
    status: IPanelStatus;
    symbol: string;
    trans: TranslationBundle;
  }): React.ReactElement {
    const { status, symbol, trans } = props;
    if (status.gpus.length === 0) {
      // nothing idles and nothing can be swapped for a cheaper GPU
      return (
        <section className="jp-gpucost-panel-waste">
          <h3>{trans.__('Waste and advice')}</h3>
          <p data-field="no-gpus">
            {trans.__(
              'No GPU is metered on this server: there is no GPU advice to give.'
            )}
          </p>
        </section>
      );
    }
    const share =
      status.gpu_cost_usd > 0
        ? Math.round((100 * status.idle_cost_usd) / status.gpu_cost_usd)
        : 0;
    const advice = rightsizingText(status.rightsizing, symbol, trans);
    const priced = status.gpus.some(gpu => gpu.priced);
    return (
      <section className="jp-gpucost-panel-waste">
        <h3>{trans.__('Waste and advice')}</h3>
        <p data-field="idle">
          {trans.__(
            'Idle GPUs cost %1 (%2% of the GPU cost).',
            formatMoney(status.idle_cost_usd, symbol),
            share
          )}
        </p>
        <p data-field="rightsizing">
          {advice ??
            status.rightsizing_note ??
            (status.rightsizing === undefined
              ? trans.__('No right-sizing advice from this server.')
              : !priced
                ? trans.__(
                    'No right-sizing advice: the catalog has no price for these GPUs.'
                  )
                : trans.__(
                    'No cheaper GPU in the catalog would have held this session’s peak memory.'
                  ))}
          {status.rightsizing?.peak_memory_bytes !== undefined &&
            status.rightsizing?.peak_memory_bytes !== null &&
            ' ' +
              trans.__(
                '(peak memory %1)',
                formatBytes(status.rightsizing.peak_memory_bytes)
              )}
        </p>
      </section>
    );
  }

  function Energy(props: {
    status: IPanelStatus;
    trans: TranslationBundle;
  }): React.ReactElement {
    const { status, trans } = props;
    return (
      <section className="jp-gpucost-panel-energy">
        <h3>{trans.__('Energy')}</h3>
        <p>
          <span data-field="energy">{formatEnergy(status.energy_j)}</span>
          {' · '}
          <span data-field="co2">{formatCo2(status.co2_g)}</span>{' '}
          {status.carbon_intensity_g_per_kwh !== undefined &&
            status.carbon_intensity_g_per_kwh !== null &&
            trans.__(
              'CO₂ at %1 g/kWh',
              Math.round(status.carbon_intensity_g_per_kwh)
            )}
        </p>
      </section>
    );
  }

  function Cells(props: {
    model: CostPanelModel;
    symbol: string;
    trans: TranslationBundle;
  }): React.ReactElement | null {
    const { model, symbol, trans } = props;
    const part = model.cells;
    if (part.missing || !part.value || part.value.cells.length === 0) {
      return null;
    }
    return (
      <section className="jp-gpucost-panel-cells">
        <h3>{trans.__('Recent cells')}</h3>
        <div className="jp-gpucost-table-scroll">
          <table className="jp-gpucost-cells">
            <thead>
              <tr>
                <th>{trans.__('Notebook')}</th>
                <th>{trans.__('Ended')}</th>
                <th>{trans.__('Wall time')}</th>
                <th>{trans.__('Peak memory')}</th>
                <th className="jp-gpucost-num">{trans.__('Cost')}</th>
              </tr>
            </thead>
            <tbody>
              {part.value.cells.map(cell => (
                <tr
                  key={`${cell.cell_id}-${cell.ended}`}
                  data-status={cell.status}
                >
                  <td>{cell.notebook_path ?? cell.cell_id}</td>
                  <td>
                    {formatLocalTime(cell.ended, Date.now(), {
                      seconds: true
                    })}
                  </td>
                  <td>{formatDuration(cell.wall_s, true)}</td>
                  <td>{formatBytes(cell.peak_memory_bytes)}</td>
                  <td className="jp-gpucost-num">
                    {formatMoney(cell.cost_usd, symbol)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
    );
  }

  function Exports(props: {
    model: CostPanelModel;
    trans: TranslationBundle;
  }): React.ReactElement | null {
    const { model, trans } = props;
    const part = model.exports;
    if (part.missing || !part.value || part.value.jobs.length === 0) {
      return null;
    }
    return (
      <section className="jp-gpucost-panel-exports">
        <h3>{trans.__('Checkpoint exports')}</h3>
        <div className="jp-gpucost-table-scroll">
          <table className="jp-gpucost-exports">
            <thead>
              <tr>
                <th>{trans.__('What')}</th>
                <th>{trans.__('State')}</th>
                <th>{trans.__('Where')}</th>
              </tr>
            </thead>
            <tbody>
              {part.value.jobs.slice(0, 10).map(job => (
                <tr key={job.id} data-export-id={job.id} data-state={job.state}>
                  <td>{describePaths(job.paths)}</td>
                  <td title={job.error ?? undefined}>
                    {job.state === 'running'
                      ? `${Math.floor(job.progress * 100)}%`
                      : job.state}
                  </td>
                  <td className="jp-gpucost-export-where">
                    {job.state === 'done'
                      ? job.results.map(r => r.url).join(', ')
                      : job.state === 'failed'
                        ? (job.error ?? '')
                        : job.target_url}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
    );
  }

  function Prices(props: {
    status: IPanelStatus;
    symbol: string;
    trans: TranslationBundle;
  }): React.ReactElement {
    const { status, symbol, trans } = props;
    const sources = new Map<string, string>();
    for (const gpu of status.gpus) {
      const label = gpu.model ?? gpu.name;
      if (!sources.has(label)) {
        sources.set(
          label,
          gpu.priced
            ? (gpu.price_source ?? trans.__('no source given'))
            : trans.__('no price in the catalog: not counted')
        );
      }
    }
    const catalogDate = status.prices.catalog_date;
    return (
      <section className="jp-gpucost-panel-prices">
        <h3>{trans.__('Prices')}</h3>
        <ul>
          {[...sources.entries()].map(([label, source]) => (
            <li key={label}>
              <strong>{label}</strong>: {source}
            </li>
          ))}
          {status.base_price_usd_per_hour > 0 && (
            <li data-field="base-price">
              {trans.__(
                'Base price of the instance: %1',
                formatRate(status.base_price_usd_per_hour, symbol, trans)
              )}
            </li>
          )}
        </ul>
        <p className="jp-gpucost-panel-note">
          {trans.__(
            '%1 %2 prices; catalog of %3. Billing: per %4 s, at least %5 s.',
            status.prices.provider ?? '—',
            status.prices.market ?? '',
            catalogDate ?? status.prices.as_of ?? '—',
            status.billing?.granularity_s ?? 1,
            status.billing?.minimum_charge_s ?? 0
          )}
        </p>
        <p className="jp-gpucost-panel-note">
          {trans.__(
            'Session running for %1.',
            formatDuration(status.elapsed_s)
          )}
        </p>
      </section>
    );
  }
}
