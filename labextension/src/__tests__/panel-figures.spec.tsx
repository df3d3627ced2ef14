import { Event } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';
import * as React from 'react';
import { ReactWidget } from '@jupyterlab/apputils';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { PANEL_EVENT_SCHEMA, PanelFeed } from '../panel/feed';
import { kernelRows } from '../panel/format';
import { Kernels } from '../panel/kernels';
import { cellName } from '../panel/recent';
import { CostPanelModel } from '../panel/model';
import { ICellCost, IKernelsAnswer, IPanelStatus } from '../panel/types';
import { Bill, LedgerWarnings } from '../panel/summary';
import { Waste } from '../panel/waste';
import { makeStatus } from './fixtures';

const trans = nullTranslator.load('jupyter_gpucost');

function kernels(overrides: Partial<IKernelsAnswer> = {}): IKernelsAnswer {
  return {
    as_of: '2026-11-25T10:00:00Z',
    pids_visible: true,
    note: null,
    total: 0.114,
    idle: 0.0304,
    unattributed: 0.08,
    minimum_charge: 0.08,
    micro: {
      total: 114_000,
      idle: 30_400,
      unattributed: 80_000,
      minimum_charge: 80_000
    },
    kernels: [],
    ...overrides
  };
}

function pushed(answer: IKernelsAnswer): CostPanelModel {
  const stream = new Signal<unknown, Event.Emission>({});
  const feed = new PanelFeed({ stream } as unknown as Event.IManager);
  stream.emit({
    schema_id: PANEL_EVENT_SCHEMA,
    panel: { kernels: answer, cells: [], exports: null, point: null },
    interval_s: 1,
    heartbeat_s: 10
  } as unknown as Event.Emission);
  return new CostPanelModel({ feed, autoStart: false, active: false });
}

async function render(element: React.ReactElement): Promise<string> {
  const widget = ReactWidget.create(element);
  Widget.attach(widget, document.body);
  MessageLoop.sendMessage(widget, Widget.Msg.UpdateRequest);
  await widget.renderPromise;
  await new Promise(resolve => setTimeout(resolve, 0));
  const html = widget.node.innerHTML;
  widget.dispose();
  return html;
}

describe('figures that say what they are', () => {
  it('names the minimum charge, not GPU use by no kernel', () => {
    // no kernel running: the $0.08 is the 60 s minimum charge
    const rows = kernelRows(kernels(), '$', trans);
    expect(rows.map(r => [r.key, r.label, r.cost])).toEqual([
      ['minimum', 'Minimum charge', '$0.0800'],
      ['idle', 'Idle GPUs', '$0.0304']
    ]);
    // with GPU use by no kernel as well: both rows, adding up
    const both = kernelRows(
      kernels({
        unattributed: 0.1,
        micro: {
          total: 134_000,
          idle: 30_400,
          unattributed: 100_000,
          minimum_charge: 80_000
        }
      }),
      '$',
      trans
    );
    expect(both.map(r => [r.key, r.cost])).toEqual([
      ['unattributed', '$0.0200'],
      ['minimum', '$0.0800'],
      ['idle', '$0.0304']
    ]);
    // an older server without the split: as before
    const old = kernelRows(
      kernels({ micro: undefined, minimum_charge: undefined }),
      '$',
      trans
    );
    expect(old.map(r => r.key)).toEqual(['unattributed', 'idle']);
  });

  it('names the GPU processes that are not from these kernels (a container)', () => {
    const answer = kernels({
      pids_visible: false,
      unattributed: 0.1,
      micro: {
        total: 134_000,
        idle: 30_400,
        unattributed: 100_000,
        minimum_charge: 80_000
      },
      other_processes: [
        { gpu: 0, host_pid: 4100001, memory_bytes: 21474836480 },
        { gpu: 0, host_pid: 4100002, memory_bytes: null }
      ],
      kernels: [
        {
          id: 'k1',
          name: 'python3',
          notebook_path: 'train.ipynb',
          execution_state: 'idle',
          started: null,
          uptime_s: 10,
          pids: [101],
          remote: false,
          gpu_share: { '0': 1 },
          gpu_share_by: { '0': 'sm_samples' },
          gpu_host_pids: { '0': [3000101] },
          memory_bytes: 1184890880,
          cost: 0.004
        }
      ]
    });
    const rows = kernelRows(answer, '$', trans);
    const kernel = rows.find(r => r.key === 'k1');
    expect(kernel?.title).toContain('GPU 0: 3000101');
    const other = rows.find(r => r.key === 'unattributed');
    expect(other?.label).toBe('Not from these kernels');
    expect(other?.title).toContain('GPU 0 pid 4100001, GPU 0 pid 4100002');
    expect(other?.cost).toBe('$0.0200');
  });

  it('reads the idle cost from the kernel table, so both agree', async () => {
    const status = {
      ...makeStatus(),
      gpu_cost: 0.12,
      idle_cost: 0.0323
    } as unknown as IPanelStatus;
    const html = await render(
      <Waste status={status} kernels={kernels()} symbol="$" trans={trans} />
    );
    expect(html).toContain('Idle GPUs cost $0.0304 (27% of the GPU cost).');
    expect(html).not.toContain('$0.0323');
  });

  it("shows the server's note on simulated telemetry", async () => {
    const note =
      "Simulated telemetry: the recorded session's GPU processes are attributed to the oldest running kernel.";
    const model = pushed(kernels({ note }));
    const html = await render(
      <Kernels model={model} gpus={1} symbol="$" trans={trans} />
    );
    expect(html).toContain('data-state="note"');
    expect(html).toContain(note);
    model.dispose();
  });
});

describe('recent cells', () => {
  const cell = {
    cell_id: '8a5e1f0c-77aa-4c1e-9d1b-1f2e3d4c5b6a',
    notebook_path: 'work/train.ipynb',
    ended: '2026-11-25T10:00:00Z'
  } as ICellCost;

  it('name the cell, not only the notebook', () => {
    const open = new CostPanelModel({
      autoStart: false,
      cellLabel: (path, id) =>
        path === 'work/train.ipynb' && id === cell.cell_id
          ? { name: 'cell 3', title: 'model.fit(x)' }
          : null
    });
    expect(cellName(open, cell, trans)).toBe('work/train.ipynb · cell 3');
    open.dispose();
    // the notebook is not open: the start of the cell's id
    const closed = new CostPanelModel({ autoStart: false });
    expect(cellName(closed, cell, trans)).toBe(
      'work/train.ipynb · cell 8a5e1f0c'
    );
    expect(cellName(closed, { ...cell, notebook_path: null }, trans)).toBe(
      'cell 8a5e1f0c'
    );
    closed.dispose();
  });
});

describe("the ledger's warnings in the panel", () => {
  it("shows the server's sentences for an unreachable or reset ledger, and no other", async () => {
    const status = makeStatus({
      warnings: [
        {
          code: 'ledger-unreachable',
          message:
            'The ledger is unreachable since 14:02 UTC; nothing lost yet; 42 s waiting to be written.'
        },
        {
          code: 'ledger-reset',
          message:
            'The ledger was damaged and was moved to /x/ledger.sqlite.broken-1 (it held 3 sessions costing $1.25); a fresh one was started.'
        },
        { code: 'price-upper-bound', message: 'no price for Mystery GPU 9000' }
      ]
    }) as unknown as IPanelStatus;
    const html = await render(<LedgerWarnings status={status} />);
    expect(html).toContain('data-state="ledger-unreachable"');
    expect(html).toContain(
      'The ledger is unreachable since 14:02 UTC; nothing lost yet; 42 s waiting to be written.'
    );
    expect(html).toContain(
      'moved to /x/ledger.sqlite.broken-1 (it held 3 sessions costing $1.25)'
    );
    expect(html).not.toContain('Mystery GPU');
  });

  it('says so when the machine cannot be stopped (it bills until terminated)', async () => {
    const message =
      'this machine cannot be stopped: it is a one-time Spot Instance (AWS stops only Spot Instances of persistent requests); it bills until it is terminated';
    const status = makeStatus({
      warnings: [{ code: 'machine-cannot-stop', message }]
    }) as unknown as IPanelStatus;
    const html = await render(<LedgerWarnings status={status} />);
    expect(html).toContain('data-state="machine-cannot-stop"');
    expect(html).toContain('it bills until it is terminated');
  });

  it('shows nothing while the ledger is well', async () => {
    const status = makeStatus({ warnings: [] }) as unknown as IPanelStatus;
    expect(await render(<LedgerWarnings status={status} />)).toBe('');
  });
});

describe('the bill beside the estimate', () => {
  it('shows the estimate, the bill and the day it runs to', async () => {
    const status = {
      ...makeStatus(),
      bill: { estimated: 2.01192, billed: 17.38368, to: '2026-11-27' }
    } as unknown as IPanelStatus;
    const html = await render(
      <Bill status={status} symbol="$" trans={trans} />
    );
    expect(html).toContain(
      'estimated $2.01 · billed $17.38 (your bill to 2026-11-27)'
    );
    expect(html).toContain('data-bill-to="2026-11-27"');
  });

  it('shows nothing where no bill was read', async () => {
    const status = { ...makeStatus(), bill: null } as unknown as IPanelStatus;
    const html = await render(
      <Bill status={status} symbol="$" trans={trans} />
    );
    expect(html).toBe('');
  });
});
