import { TranslationBundle } from '@jupyterlab/translation';
import { HTMLSelect } from '@jupyterlab/ui-components';
import * as React from 'react';
import {
  budgetPercent,
  currencyLabel,
  formatLocalTime,
  localizeActionTime,
  parseAmount,
  runOutText,
  scopeName
} from '../budget/format';

import {
  allowanceLeft,
  allowanceRefill,
  allowanceSource
} from '../budget/allowance';
import { countdownReason, countdownSentence } from '../budget/reason';
import { timeLeftText } from '../budget/time-left';
import { formatBudget, formatMoney } from '../format';
import { CostPanelModel } from './model';
import { IBudgetLine, IPanelStatus } from './types';

/*
 * The budget section: each budget as spent / amount, and the form that sets your own.
 */

export function BudgetLine(props: {
  line: IBudgetLine;
  symbol: string;
  trans: TranslationBundle;
}): React.ReactElement {
  const { line, symbol, trans } = props;
  const runOut = runOutText(line);
  const group = line.owner?.startsWith('group:')
    ? line.owner.slice('group:'.length)
    : null;
  const who =
    line.kind === 'hub'
      ? group
        ? trans.__('Hub budget for group %1 (locked)', group)
        : trans.__('Hub budget (locked)')
      : line.kind === 'hard'
        ? trans.__('Admin’s budget (locked)')
        : trans.__('Your budget');
  return (
    <li data-budget={line.kind} data-owner={line.owner}>
      <strong>{who}</strong>
      {line.locked && line.source && (
        <span className="jp-gpucost-budget-source" data-field="source">
          {' '}
          {trans.__(line.source)}
        </span>
      )}
      {': '}
      {trans.__(
        '%1 of %2 per %3 spent (%4%)',
        line.spent === null ? '—' : formatMoney(line.spent, symbol),
        formatBudget(line.amount, symbol),
        scopeName(line.scope),
        line.share === null ? '—' : budgetPercent(line.share)
      )}
      {runOut !== null &&
        ' · ' + trans.__('runs out at %1 at the current rate', runOut)}
    </li>
  );
}

export function Budget(props: {
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
  const hubLines = budget.hub?.budgets ?? [];
  // the headline: how long the budget lasts at the current rate
  const left = timeLeftText(budget, symbol);
  // a countdown, worded by its reason (a budget, the user's own stop, …)
  const counting = budget.state === 'grace' ? countdownReason(budget) : null;
  const submit = (value: number | null): void => {
    void model.setSoftBudget(value, scope).then(setError);
  };
  return (
    <section
      className="jp-gpucost-panel-budget"
      // a stop that is no budget's does not mark the budget as running out
      data-state={
        counting !== null && counting !== 'budget' && counting !== 'hub-budget'
          ? 'stop'
          : budget.state
      }
    >
      <h3>{trans.__('Budget')}</h3>
      {left !== null && (
        <p className="jp-gpucost-time-left" data-field="time-left">
          {left}
        </p>
      )}
      {counting !== null && budget.grace?.ends && (
        <p data-field="countdown" data-reason={counting}>
          {countdownSentence(
            counting,
            formatLocalTime(budget.grace.ends, Date.now(), { seconds: true })
          )}
        </p>
      )}
      <ul>
        {budget.hard && (
          <BudgetLine line={budget.hard} symbol={symbol} trans={trans} />
        )}
        {budget.soft && (
          <BudgetLine line={budget.soft} symbol={symbol} trans={trans} />
        )}
        {hubLines.map(line => (
          <BudgetLine
            key={`${line.owner ?? ''}:${line.scope}`}
            line={line}
            symbol={symbol}
            trans={trans}
          />
        ))}
        {!budget.hard && !budget.soft && !hubLines.length && (
          <li>{trans.__('No budget set.')}</li>
        )}
      </ul>
      {!!budget.hub?.allowances?.length && (
        <ul className="jp-gpucost-panel-allowances" data-field="hub-allowances">
          {budget.hub.allowances.map(a => (
            <li
              key={`${a.source}:${a.unit}:${a.period}`}
              data-field="hub-allowance"
              data-unit={a.unit}
            >
              <span data-field="allowance-left">
                {allowanceLeft(a, symbol)}
              </span>
              {' · '}
              <span data-field="allowance-refill">{allowanceRefill(a)}</span>
              {' · '}
              <span
                className="jp-gpucost-panel-note"
                data-field="allowance-source"
              >
                {allowanceSource(a)}
              </span>
            </li>
          ))}
        </ul>
      )}
      {budget.stop?.text && <p data-field="budget-stop">{budget.stop.text}</p>}
      {budget.grace?.shortened_text && (
        <p className="jp-gpucost-panel-note" data-field="grace-shortened">
          {budget.grace.shortened_text}
        </p>
      )}
      {budget.hub?.stop_at && (
        <p data-field="hub-stop">
          {budget.hub.reason
            ? trans.__(
                'The hub stops this server at %1 (%2).',
                formatLocalTime(budget.hub.stop_at),
                budget.hub.reason
              )
            : trans.__(
                'The hub stops this server at %1.',
                formatLocalTime(budget.hub.stop_at)
              )}
        </p>
      )}
      {budget.hub?.error && (
        <p className="jp-gpucost-panel-note" data-field="hub-error">
          {trans.__('Hub: %1', budget.hub.error)}
        </p>
      )}
      {budget.last_action?.message && (
        <p data-field="last-action">
          {trans.__(
            'Last action: %1',
            localizeActionTime(
              budget.last_action.message,
              budget.last_action.at
            )
          )}
        </p>
      )}
      {budget.interruption?.last?.line && (
        <p data-field="last-interruption">
          {localizeActionTime(
            budget.interruption.last.line,
            budget.interruption.last.deadline
          )}
        </p>
      )}
      <form
        className="jp-gpucost-budget-form"
        onSubmit={event => {
          event.preventDefault();
          const parsed = parseAmount(amount);
          if (parsed.error !== null) {
            setError(parsed.error);
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
        <HTMLSelect
          className="jp-gpucost-budget-scope"
          aria-label={trans.__('Budget period')}
          value={scope}
          onChange={event => setScope(event.target.value)}
        >
          {budget.scopes.map(s => (
            <option key={s} value={s}>
              {scopeName(s)}
            </option>
          ))}
        </HTMLSelect>{' '}
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
