import { VDomRenderer } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { describe, IStatusDisplay } from './display';
import { trans } from './i18n';
import { IGpuCostModel } from './tokens';

/**
 * The DOM id of the status bar item.
 */
export const STATUS_ITEM_ID = 'jp-gpucost-status';

/**
 * The status bar item: `$1.23 · $6.86/h`, with the state in `data-state`
 * and the breakdown in the tooltip.
 */
export class GpuCostStatus extends VDomRenderer<IGpuCostModel> {
  constructor(model: IGpuCostModel) {
    super(model);
    this.id = STATUS_ITEM_ID;
    this.addClass('jp-gpucost-StatusItem');
    this.node.dataset.state = model.state;
  }

  /**
   * What the item shows now.
   */
  get display(): IStatusDisplay {
    return describe(this.model, trans());
  }

  /**
   * Render the item; the state and tooltip go on the item's own node.
   */
  protected render(): React.ReactElement {
    const display = this.display;
    this.node.dataset.state = display.state;
    this.node.title = display.title;
    return (
      <span className="jp-StatusBar-TextItem jp-gpucost-text">
        <CostText display={display} trans={trans()} />
      </span>
    );
  }
}

/**
 * Make an item's node a button: reached with Tab, run by a click, Enter or
 * Space (the status bar item and the top-bar item).
 */
export function actAsButton(node: HTMLElement, onClick: () => void): void {
  node.setAttribute('role', 'button');
  node.tabIndex = 0;
  node.addEventListener('click', () => onClick());
  node.addEventListener('keydown', event => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      onClick();
    }
  });
}

/**
 * The cost's text, as both the status bar item and the top-bar item show it:
 * `⚠ $1.23 · $6.86/h · simulated` (with `no GPU telemetry` and `stale` when
 * they hold).
 */
export function CostText(props: {
  display: IStatusDisplay;
  trans: TranslationBundle;
}): React.ReactElement {
  const { display, trans } = props;
  const separator = ' · ';
  return (
    <>
      {display.warning && (
        <span className="jp-gpucost-warning" aria-label={trans.__('warning')}>
          {'⚠ '}
        </span>
      )}
      {display.message !== null ? (
        <span className="jp-gpucost-message">{display.message}</span>
      ) : (
        <>
          <span className="jp-gpucost-cost">{display.cost}</span>
          <span className="jp-gpucost-rate-part">
            {separator}
            <span className="jp-gpucost-rate">{display.rate}</span>
          </span>
        </>
      )}
      {display.wholeInstance !== null && (
        <span className="jp-gpucost-whole">
          {separator}
          {display.wholeInstance}
        </span>
      )}
      {display.noTelemetry && (
        <span className="jp-gpucost-no-telemetry">
          {separator}
          {trans.__('no GPU telemetry')}
        </span>
      )}
      {display.simulated && (
        <span className="jp-gpucost-simulated">
          {separator}
          {trans.__('simulated')}
        </span>
      )}
      {display.stale && (
        <span className="jp-gpucost-stale">
          {separator}
          {trans.__('stale')}
        </span>
      )}
    </>
  );
}
