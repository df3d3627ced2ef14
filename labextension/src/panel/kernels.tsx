import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { formatMoney } from '../format';
import { gpuMetered, IKernelRow, kernelCostDigits, kernelRows } from './format';
import { CostPanelModel } from './model';
import { PanelTable } from './table';

/*
 * What each kernel cost.
 */

export function Kernels(props: {
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
  // the machine's cost while each kernel's cells ran, where a kernel priced any
  const withCells = metered && answer.kernels.some(kernel => !!kernel.cells);
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
      {metered && answer.pids_visible && answer.note && (
        <div className="jp-gpucost-panel-note" data-state="note">
          {answer.note}
        </div>
      )}
      {metered &&
        answer.kernels.filter(kernel => !kernel.remote).length > 1 && (
          <div className="jp-gpucost-panel-note" data-state="same-user">
            {trans.__(
              "These kernels run as one user: code in one notebook can run in another's kernel or claim its GPU process, so the split between them is not proof of which notebook used the GPU. The session's cost is metered from the GPUs and does not depend on it."
            )}
          </div>
        )}
      {part.error && (
        <div className="jp-gpucost-panel-note" data-state="error">
          {part.error}
        </div>
      )}
      {rows.length > 0 && (
        <PanelTable
          className={
            withCells
              ? 'jp-gpucost-kernels jp-gpucost-kernels-with-cells'
              : 'jp-gpucost-kernels'
          }
          rows={rows}
          rowKey={row => row.key}
          rowAttributes={row => ({
            'data-kind': row.kind,
            'data-kernel-id': row.kind === 'kernel' ? row.key : undefined,
            title: row.title
          })}
          columns={[
            { header: trans.__('Notebook'), cell: row => row.label },
            { header: trans.__('State'), cell: row => row.state },
            { header: trans.__('Uptime'), cell: row => row.uptime },
            {
              header: trans.__('GPU share'),
              // the share, and how it was made: `GPU 0 90% (by SM samples)`
              cell: row =>
                row.shareBy && row.shareBy !== '—'
                  ? trans.__('%1 (%2)', row.share, row.shareBy)
                  : row.share
            },
            ...(withCells
              ? [
                  {
                    header: trans.__('Machine while cells ran'),
                    headerTitle: trans.__(
                      "The whole machine (every GPU, idle or not) priced for the wall time of the kernel's priced cells this session: the sum of its Recent cells."
                    ),
                    cell: (row: IKernelRow) => row.cellsCost,
                    numeric: true
                  }
                ]
              : []),
            {
              header: trans.__('GPU use'),
              headerTitle: trans.__(
                "The kernel's part of the GPUs' used time (what it computed on them)."
              ),
              cell: row => row.cost,
              numeric: true
            }
          ]}
          footer={
            metered && (
              <tr data-kind="total">
                {/* one cell per column after the label's two, so that a narrow
                    panel can leave out the Uptime column (the third); the GPU
                    total under the GPU use it adds up */}
                <td colSpan={2}>{trans.__('GPU total')}</td>
                <td />
                <td />
                {withCells && <td />}
                <td className="jp-gpucost-num">
                  {formatMoney(answer.total, symbol, kernelCostDigits(answer))}
                </td>
              </tr>
            )
          }
        />
      )}
      {metered && rows.length > 0 && (
        <div className="jp-gpucost-panel-note" data-state="measures">
          {withCells
            ? trans.__(
                "GPU use is what a kernel computed on the GPUs; machine while cells ran is the whole machine priced for its cells' wall time (as in Recent cells). They measure different things and do not add up."
              )
            : trans.__('GPU use is what a kernel computed on the GPUs.')}{' '}
          {trans.__(
            'Rows of no notebook: not attributed (GPU use by no kernel of this server), minimum charge (the billing rule), idle GPUs (rented, doing nothing); with the kernels they make the GPU total.'
          )}
        </div>
      )}
    </section>
  );
}
