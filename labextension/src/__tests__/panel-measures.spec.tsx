import { Event } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';
import * as React from 'react';

import { renderNode } from './render';
import { PANEL_EVENT_SCHEMA, PanelFeed } from '../panel/feed';
import { kernelRows } from '../panel/format';
import { Kernels } from '../panel/kernels';
import { Cells } from '../panel/recent';
import { CostPanelModel } from '../panel/model';
import { ICellCost, IKernelCost, IKernelsAnswer } from '../panel/types';

/*
 * One meaning per number: a kernel's GPU use and the machine's cost while its
 * cells ran are named apart, side by side, and the rows of no notebook are
 * explained.
 */

const trans = nullTranslator.load('jupyter_gpucost');

const train: IKernelCost = {
  id: 'k1',
  name: 'python3',
  notebook_path: 'train.ipynb',
  execution_state: 'idle',
  started: null,
  uptime_s: 120,
  pids: [101],
  remote: false,
  gpu_share: { '0': 1 },
  gpu_share_by: { '0': 'sm_samples' },
  memory_bytes: 1_000_000,
  cost: 0.0002,
  cells: 3,
  cells_cost: 0.0086
};

function answer(kernels: IKernelCost[]): IKernelsAnswer {
  return {
    as_of: '2026-11-29T10:00:00Z',
    pids_visible: true,
    note: null,
    total: 0.1142,
    idle: 0.034,
    unattributed: 0.08,
    minimum_charge: 0.08,
    micro: {
      total: 114_200,
      idle: 34_000,
      unattributed: 80_000,
      minimum_charge: 80_000
    },
    kernels
  };
}

function pushed(
  kernels: IKernelsAnswer,
  cells: ICellCost[] = []
): CostPanelModel {
  const stream = new Signal<unknown, Event.Emission>({});
  const feed = new PanelFeed({ stream } as unknown as Event.IManager);
  stream.emit({
    schema_id: PANEL_EVENT_SCHEMA,
    panel: { kernels, cells, exports: null, point: null },
    interval_s: 1,
    heartbeat_s: 10
  } as unknown as Event.Emission);
  return new CostPanelModel({ feed, autoStart: false, active: false });
}

function headers(node: HTMLElement, table: string): string[] {
  return Array.from(node.querySelectorAll(`table.${table} th`)).map(
    th => th.textContent ?? ''
  );
}

describe('a kernel has two measures, named apart', () => {
  it('shows GPU use and the machine while its cells ran side by side', async () => {
    const model = pushed(answer([train]));
    const node = await renderNode(
      <Kernels model={model} gpus={1} symbol="$" trans={trans} />
    );
    expect(headers(node, 'jp-gpucost-kernels')).toEqual([
      'Notebook',
      'State',
      'Uptime',
      'GPU share',
      'Machine while cells ran',
      'GPU use'
    ]);
    const row = node.querySelector('tr[data-kernel-id="k1"]');
    const cells = Array.from(row?.querySelectorAll('td') ?? []).map(
      td => td.textContent
    );
    expect(cells[0]).toBe('train.ipynb');
    expect(cells.slice(-2)).toEqual(['$0.0086', '$0.0002']);
    // each header says what it measures
    const titles = Array.from(
      node.querySelectorAll('table.jp-gpucost-kernels th[title]')
    ).map(th => th.getAttribute('title'));
    expect(titles[0]).toContain("the kernel's priced cells");
    expect(titles[1]).toContain("GPUs' used time");
    // the line that reconciles them, and the rows of no notebook in one line
    const note = node.querySelector('[data-state="measures"]')?.textContent;
    expect(note).toContain('They measure different things and do not add up.');
    expect(note).toContain(
      'Rows of no notebook: not attributed (GPU use by no kernel of this server), minimum charge (the billing rule), idle GPUs (rented, doing nothing); with the kernels they make the GPU total.'
    );
    // the footer keeps one cell per column
    const footer = node.querySelectorAll('tfoot td');
    expect(footer.length).toBe(5);
    model.dispose();
  });

  it('leaves the column out where no kernel priced a cell', async () => {
    const quiet = { ...train, cells: 0, cells_cost: 0 };
    const model = pushed(answer([quiet]));
    const node = await renderNode(
      <Kernels model={model} gpus={1} symbol="$" trans={trans} />
    );
    expect(headers(node, 'jp-gpucost-kernels')).not.toContain(
      'Machine while cells ran'
    );
    const note = node.querySelector('[data-state="measures"]')?.textContent;
    expect(note).toContain('GPU use is what a kernel computed on the GPUs.');
    expect(note).not.toContain('do not add up');
    model.dispose();
  });

  it('gives the rows of no notebook no cells figure', () => {
    const rows = kernelRows(answer([train]), '$', trans);
    expect(rows.map(r => [r.key, r.cost, r.cellsCost])).toEqual([
      ['k1', '$0.0002', '$0.0086'],
      ['minimum', '$0.0800', ''],
      ['idle', '$0.0340', '']
    ]);
    // a server that predates the figure: a dash, never $0
    const old = { ...train, cells: undefined, cells_cost: undefined };
    expect(kernelRows(answer([old]), '$', trans)[0].cellsCost).toBe('—');
  });
});

describe("recent cells say what a cell's cost is", () => {
  it('names the column for the machine, not GPU use', async () => {
    const cell = {
      cell_id: '8a5e1f0c-77aa-4c1e-9d1b-1f2e3d4c5b6a',
      notebook_path: 'train.ipynb',
      kernel_id: 'k1',
      started: '2026-11-29T09:59:55Z',
      ended: '2026-11-29T10:00:00Z',
      wall_s: 4.5,
      peak_memory_bytes: null,
      cost: 0.0048,
      status: 'ok'
    } as unknown as ICellCost;
    const model = pushed(answer([train]), [cell]);
    const node = await renderNode(
      <Cells model={model} symbol="$" trans={trans} />
    );
    expect(headers(node, 'jp-gpucost-cells')).toContain('Machine while it ran');
    expect(headers(node, 'jp-gpucost-cells')).not.toContain('Cost');
    expect(
      node.querySelector('[data-state="cell-measure"]')?.textContent
    ).toContain(
      'the whole machine priced for its wall time, idle GPUs included'
    );
    model.dispose();
  });
});
