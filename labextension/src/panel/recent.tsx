import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { formatLocalTime } from '../budget/format';
import { describePaths } from '../export/format';
import {
  formatBytes,
  formatDuration,
  formatMoney,
  moneyColumnDigits,
  symbolOf
} from '../format';
import { CostPanelModel } from './model';
import { PanelTable } from './table';
import { ICellCost } from './types';

/*
 * Recent cells and checkpoint exports.
 */

export function Cells(props: {
  model: CostPanelModel;
  symbol: string;
  trans: TranslationBundle;
}): React.ReactElement | null {
  const { model, symbol, trans } = props;
  const part = model.cells;
  const live = part.missing || !part.value ? [] : part.value.cells;
  const rows = withRecorded(live, model.recordedCells());
  if (rows.length === 0) {
    return null;
  }
  // one number of decimals for the whole cost column
  const digits = moneyColumnDigits(rows.map(cell => cell.cost_usd));
  return (
    <section className="jp-gpucost-panel-cells">
      <h3>{trans.__('Recent cells')}</h3>
      <PanelTable
        className="jp-gpucost-cells"
        rows={rows}
        rowKey={cell => `${cell.cell_id}-${cell.ended}`}
        rowAttributes={cell => ({
          'data-status': cell.status,
          'data-recorded': cell.recorded ? 'true' : 'false'
        })}
        columns={[
          {
            header: trans.__('Cell'),
            cell: cell =>
              cell.recorded
                ? trans.__('%1 · recorded', cellName(model, cell, trans))
                : cellName(model, cell, trans),
            title: cell =>
              model.cellLabel(cell.notebook_path, cell.cell_id)?.title ??
              trans.__('Cell %1', cell.cell_id)
          },
          {
            header: trans.__('Ended'),
            cell: cell =>
              formatLocalTime(cell.ended, Date.now(), { seconds: true })
          },
          {
            header: trans.__('Wall time'),
            cell: cell => formatDuration(cell.wall_s, true)
          },
          {
            header: trans.__('Peak memory'),
            cell: cell => formatBytes(cell.peak_memory_bytes)
          },
          {
            header: trans.__('Machine while it ran'),
            headerTitle: trans.__(
              "The whole machine (every GPU, idle or not) priced for the cell's wall time; not the cell's GPU use."
            ),
            // a recorded cell in its own currency (a run in another session)
            cell: cell =>
              formatMoney(
                cell.cost_usd,
                cell.currency ? symbolOf(cell.currency) : symbol,
                digits
              ),
            numeric: true
          }
        ]}
      />
      <div className="jp-gpucost-panel-note" data-state="cell-measure">
        {trans.__(
          "Each cell's cost is the whole machine priced for its wall time, idle GPUs included: more than its GPU use in Kernels."
        )}
      </div>
    </section>
  );
}

/**
 * The live cells, then the costs the open notebooks recorded for cells the
 * server has no record of (a run before this page, or from elsewhere), the
 * newest first within each; a cell the server knows is listed live only.
 */
export function withRecorded(
  live: ICellCost[],
  recorded: ICellCost[],
  most = 20
): ICellCost[] {
  const known = new Set(live.map(cell => cell.cell_id));
  const extra = recorded
    .filter(cell => !known.has(cell.cell_id))
    .sort((a, b) => Date.parse(b.ended) - Date.parse(a.ended));
  return [...live, ...extra].slice(0, Math.max(most, live.length));
}

/**
 * A recent cell as people know it: its notebook and its place there
 * (`train.ipynb · cell 3`); where the notebook is not open, the start of the
 * cell's id.
 */
export function cellName(
  model: CostPanelModel,
  cell: ICellCost,
  trans: TranslationBundle
): string {
  const label = model.cellLabel(cell.notebook_path, cell.cell_id);
  const name = label?.name ?? trans.__('cell %1', cell.cell_id.slice(0, 8));
  return cell.notebook_path ? `${cell.notebook_path} · ${name}` : name;
}

export function Exports(props: {
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
      <PanelTable
        className="jp-gpucost-exports"
        rows={part.value.jobs.slice(0, 10)}
        rowKey={job => job.id}
        rowAttributes={job => ({
          'data-export-id': job.id,
          'data-state': job.state
        })}
        columns={[
          { header: trans.__('What'), cell: job => describePaths(job.paths) },
          {
            header: trans.__('State'),
            cell: job =>
              job.state === 'running'
                ? `${Math.floor(job.progress * 100)}%`
                : job.state,
            title: job => job.error ?? undefined
          },
          {
            header: trans.__('Where'),
            className: 'jp-gpucost-export-where',
            cell: job =>
              job.state === 'done'
                ? job.results.map(r => r.url).join(', ')
                : job.state === 'failed'
                  ? (job.error ?? '')
                  : job.target_url
          }
        ]}
      />
    </section>
  );
}
