import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { formatLocalTime } from '../budget/format';
import { upperBoundText } from '../display';
import { formatMoney, formatRate } from '../format';
import { IPanelStatus } from './types';

/*
 * The banner saying where the readings come from, and the totals (session, today, month, rate).
 */

export function Source(props: {
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

/**
 * What the server says about its ledger: unreachable (since when, what waits to be
 * written) or reset (the damaged file moved aside and what it held); and a machine that
 * cannot be stopped (it bills until terminated). The sentences are the server's, already
 * in the user's language.
 */
export function LedgerWarnings(props: {
  status: IPanelStatus;
}): React.ReactElement | null {
  const shown = props.status.warnings.filter(
    w =>
      w.code === 'ledger-unreachable' ||
      w.code === 'ledger-reset' ||
      w.code === 'machine-cannot-stop'
  );
  if (shown.length === 0) {
    return null;
  }
  return (
    <>
      {shown.map(w => (
        <div
          key={w.code}
          className="jp-gpucost-panel-banner"
          data-state={w.code}
          role="status"
        >
          {w.message}
        </div>
      ))}
    </>
  );
}

export function Totals(props: {
  status: IPanelStatus;
  symbol: string;
  trans: TranslationBundle;
}): React.ReactElement {
  const { status, symbol, trans } = props;
  // the rate is the most it can cost where a GPU has no price that fits
  const bound = upperBoundText(status, trans);
  const rate = (value: number): string =>
    bound === null
      ? formatRate(value, symbol, trans)
      : trans.__('≤ %1', formatRate(value, symbol, trans));
  // no GPU seen and nothing to price the machine by: unknown, never $0
  const unknown = status.metering?.state === 'unknown';
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
        {unknown && (key === 'session' || key === 'rate')
          ? trans.__('unknown ⚠')
          : value === null || value === undefined
            ? '—'
            : key === 'rate'
              ? rate(value)
              : formatMoney(value, symbol)}
      </div>
    </div>
  );
  return (
    <section className="jp-gpucost-panel-totals">
      {total(
        'session',
        trans.__('This session'),
        status.cost,
        trans.__(
          'Since the server started at %1, at %2',
          formatLocalTime(status.session_started, Date.now()),
          rate(status.rate_per_hour)
        )
      )}
      {total(
        'today',
        trans.__('Today'),
        status.today,
        status.today === undefined || status.today === null
          ? noLedger
          : trans.__('All sessions since midnight')
      )}
      {total(
        'month',
        trans.__('This month'),
        status.month,
        status.month === undefined || status.month === null
          ? noLedger
          : trans.__(
              'All sessions this month; all time: %1',
              formatMoney(status.all_time ?? NaN, symbol)
            )
      )}
      {total(
        'rate',
        trans.__('Rate now'),
        status.rate_per_hour,
        bound ?? trans.__('Per hour, for the GPUs this server holds')
      )}
    </section>
  );
}

/**
 * The bill beside the estimate, once `jupyter gpucost reconcile` has read this machine's
 * bill: "estimated $X · billed $Y (your bill to 2026-11-27)".
 */
export function Bill(props: {
  status: IPanelStatus;
  symbol: string;
  trans: TranslationBundle;
}): React.ReactElement | null {
  const { status, symbol, trans } = props;
  const bill = status.bill;
  if (!bill) {
    return null;
  }
  return (
    <p className="jp-gpucost-panel-bill" data-bill-to={bill.to}>
      {trans.__(
        'estimated %1 · billed %2 (your bill to %3)',
        formatMoney(bill.estimated, symbol),
        formatMoney(bill.billed, symbol),
        bill.to
      )}
    </p>
  );
}
