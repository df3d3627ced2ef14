import { VDomRenderer } from '@jupyterlab/apputils';
import * as React from 'react';

import { budgetShown } from './budget/shown';
import { describe } from './display';
import { trans } from './i18n';
import { actAsButton, CostText } from './view';
import { currencySymbol } from './format';
import { IGpuCostModel } from './tokens';

/**
 * The class of the top-bar item (Notebook 7's top bar; JupyterLab's when the
 * setting asks for it).
 */
export const TOP_BAR_ITEM_CLASS = 'jp-gpucost-TopBarItem';

/**
 * The top-bar item: `$1.23 · $6.86/h · simulated · budget 42% of $5.00`. A
 * click runs `onClick` (opens the cost panel).
 */
export class GpuCostTopBarItem extends VDomRenderer<IGpuCostModel> {
  constructor(options: GpuCostTopBarItem.IOptions) {
    super(options.model);
    this.addClass(TOP_BAR_ITEM_CLASS);
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    if (options.onClick) {
      actAsButton(this.node, options.onClick);
    }
  }

  protected render(): React.ReactElement {
    const display = describe(this.model, trans());
    const status = this.model.status;
    const budget = this.model.budget;
    const symbol = status ? currencySymbol(status) : '';
    const shown = budgetShown(budget, symbol);
    const budgetState = shown.state;
    const budgetLine = shown.text;
    this.node.dataset.state = display.state;
    this.node.dataset.budget = budgetState;
    this.node.dataset.transport = this.model.transport;
    // the budget's own tooltip (its amount, what is spent, the last action), as
    // JupyterLab's budget item has it: Notebook 7 has no such item
    this.node.title = [
      display.title,
      shown.title,
      trans().__('Click for the cost panel.')
    ]
      .filter(line => line !== '')
      .join('\n');
    const separator = ' · ';
    return (
      <span className="jp-gpucost-topbar-text">
        <CostText display={display} trans={trans()} />
        {budgetLine !== '' && (
          <span className="jp-gpucost-topbar-budget" data-budget={budgetState}>
            {separator}
            {budgetLine}
          </span>
        )}
      </span>
    );
  }
}

/**
 * A namespace for `GpuCostTopBarItem` statics.
 */
export namespace GpuCostTopBarItem {
  export interface IOptions {
    model: IGpuCostModel;
    /** What a click does (open the cost panel). */
    onClick?: () => void;
  }
}
