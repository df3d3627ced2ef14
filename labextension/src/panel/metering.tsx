import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { IPanelStatus } from './types';

/*
 * No GPU seen is a state, not $0: the panel's banner for it, and the budget
 * section where no budget can act.
 */

/**
 * Whether the panel shows the metering banner instead of the telemetry one.
 */
export function noGpuMetered(status: IPanelStatus): boolean {
  return !!status.metering && status.metering.state !== 'gpus';
}

/**
 * "GPU cost unknown ⚠" with its reason, or the machine priced whole from its
 * instance; the sentences are the server's, in the user's language.
 */
export function MeteringBanner(props: {
  status: IPanelStatus;
  trans: TranslationBundle;
}): React.ReactElement | null {
  const { status, trans } = props;
  const metering = status.metering;
  if (!metering || metering.state === 'gpus') {
    return null;
  }
  if (metering.state === 'unknown') {
    return (
      <div
        className="jp-gpucost-panel-banner"
        data-state="cost-unknown"
        role="status"
      >
        <strong>{trans.__('GPU cost unknown ⚠')}</strong>{' '}
        <span data-field="reason">
          {metering.message ??
            trans.__('No GPU is metered: %1', metering.reason ?? '')}
        </span>
      </div>
    );
  }
  return (
    <div
      className="jp-gpucost-panel-banner"
      data-state="whole-instance"
      role="status"
    >
      <strong>{trans.__('%1, priced whole', metering.instance ?? '')}</strong>{' '}
      <span data-field="reason">{metering.message}</span>
    </div>
  );
}

/**
 * The budget section where no budget can act: the server's sentence in place
 * of the form.
 */
export function BudgetCannotAct(props: {
  sentence: string;
  trans: TranslationBundle;
}): React.ReactElement {
  const { sentence, trans } = props;
  return (
    <section className="jp-gpucost-panel-budget" data-budget-state="disabled">
      <h3>{trans.__('Budget')}</h3>
      <div className="jp-gpucost-panel-note" data-state="budget-disabled">
        {trans.__('Budgets are off: %1.', sentence)}
      </div>
    </section>
  );
}
