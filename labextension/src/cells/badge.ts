import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { trans } from '../i18n';
import { badgeText, badgeTitle, ICellRecord } from './format';
import { SAVED_MIMETYPE } from './saved';

/**
 * The class of the badge shown next to a priced cell.
 */
export const BADGE_CLASS = 'jp-gpucost-cell-badge';

/**
 * Show (or replace) the badge of a cell; `recorded` when the figure was read
 * from the notebook file (a run before this page, or elsewhere), not measured
 * live.
 */
export function showBadge(
  cell: Cell,
  record: ICellRecord,
  symbol: string,
  recorded = false
): void {
  const badge = badgeOf(cell);
  badge.textContent = recorded
    ? trans().__('%1 · recorded', badgeText(record, symbol))
    : badgeText(record, symbol);
  badge.title = recorded
    ? trans().__(
        'Recorded in the notebook (not live):\n%1',
        badgeTitle(record, symbol)
      )
    : badgeTitle(record, symbol);
  badge.dataset.status = record.status;
  badge.dataset.mode = record.mode;
  badge.dataset.recorded = recorded ? 'true' : 'false';
}

/**
 * Say that a cell's saved cost was not shown: it is not a record this
 * version can trust (a notebook can come from anyone).
 */
export function showIgnored(cell: Cell): void {
  const badge = badgeOf(cell);
  badge.textContent = trans().__('cost record ignored');
  badge.title = trans().__(
    "This cell's saved cost (metadata gpucost) is not a valid record: it is not shown or summed."
  );
  badge.dataset.status = 'ignored';
  badge.dataset.mode = '';
  badge.dataset.recorded = 'false';
}

function badgeOf(cell: Cell): HTMLElement {
  const host = cell.node.querySelector('.jp-Cell-inputWrapper') ?? cell.node;
  let badge = host.querySelector(`.${BADGE_CLASS}`) as HTMLElement | null;
  if (!badge) {
    badge = document.createElement('div');
    badge.className = BADGE_CLASS;
    host.appendChild(badge);
  }
  return badge;
}

export function removeBadge(cell: Cell): void {
  cell.node.querySelector(`.${BADGE_CLASS}`)?.remove();
}

/**
 * Renders the kernel's record of a cell as nothing: the page moves it into
 * the cell's metadata once the cell has run.
 */
class HiddenRecord extends Widget {
  constructor() {
    super();
    this.addClass('jp-gpucost-record');
    this.hide();
  }

  renderModel(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * Make a notebook's outputs show the kernel's record as nothing.
 */
export function hideRecords(panel: NotebookPanel): void {
  const rendermime = panel.content.rendermime;
  if (!rendermime.getFactory(SAVED_MIMETYPE)) {
    rendermime.addFactory(
      {
        safe: true,
        mimeTypes: [SAVED_MIMETYPE],
        createRenderer: () => new HiddenRecord()
      },
      0
    );
  }
}
