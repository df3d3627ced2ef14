import { Notification } from '@jupyterlab/apputils';
import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { ToolbarButton } from '@jupyterlab/ui-components';
import { Signal } from '@lumino/signaling';

import { BADGE_CLASS, CellCostController } from '../cells';
import {
  AUTO_STATE_EXPRESSION,
  AUTO_STATE_KEY,
  autoCode,
  autoStateOf,
  autoSwitch,
  badgeMoney,
  badgeSeconds,
  badgeText,
  badgeTitle,
  ICellRecord
} from '../cells/format';
import {
  BASE_KEY,
  IOutputJSON,
  microToDecimal,
  parseSavedCell,
  SAVED_KEY,
  SAVED_MIMETYPE,
  splitExactly,
  summarise
} from '../cells/saved';
import { withRecorded } from '../panel/recent';

function record(overrides: Partial<ICellRecord> = {}): ICellRecord {
  return {
    cell_id: 'c1',
    notebook_path: 'train.ipynb',
    kernel_id: 'k1',
    started: '2026-11-23T10:00:00+00:00',
    ended: '2026-11-23T10:00:03.2+00:00',
    wall_s: 3.2,
    cpu_s: 0.4,
    gpu_busy_s: { '0': 2.95, '1': 0.5 },
    peak_memory_bytes: 1.2 * 1024 ** 3,
    energy_j: 812.25,
    cost_usd: 0.0061,
    rate_usd_per_hour: 6.862,
    status: 'ok',
    mode: 'auto',
    ...overrides
  };
}

describe('cell badge', () => {
  it('shows money with enough digits to see small cells', () => {
    expect(badgeMoney(0.0061, '$')).toBe('$0.0061');
    expect(badgeMoney(1.234, '€')).toBe('€1.23');
    expect(badgeSeconds(3.2)).toBe('3.20 s');
    expect(badgeSeconds(42.44)).toBe('42.4 s');
    expect(badgeSeconds(600)).toBe('10 min 00 s');
    expect(badgeSeconds(3 * 3600 + 65)).toBe('3 h 01 min');
  });

  it('names the magic that priced the cell', () => {
    expect(badgeTitle(record({ mode: 'magic' }), '$')).toContain('(%%gpucost)');
    expect(badgeTitle(record({ mode: 'auto' }), '$')).toContain(
      '(%gpucost auto)'
    );
  });

  it('never badges a trivial cell $0.0000', () => {
    const trivial = record({ cost_usd: 0.000021, gpu_busy_s: null });
    expect(badgeText(trivial, '$')).toMatch(/^< \$0\.0001 · /);
    expect(badgeTitle(trivial, '$')).toContain('This cell cost < $0.0001');
    expect(badgeText(record({ cost_usd: 0, gpu_busy_s: null }), '$')).toMatch(
      /^\$0\.00 · /
    );
  });

  it('says cost, wall time, the busiest GPU and the peak memory', () => {
    expect(badgeText(record(), '$')).toBe(
      '$0.0061 · 3.20 s · GPU 2.95 s · peak 1.20 GiB'
    );
    expect(
      badgeText(
        record({
          gpu_busy_s: null,
          peak_memory_bytes: null,
          status: 'interrupted'
        }),
        '$'
      )
    ).toBe('$0.0061 · 3.20 s · interrupted');
  });

  it('explains the figure in its tooltip', () => {
    const title = badgeTitle(record(), '$');
    expect(title).toContain(
      'This cell cost $0.0061: 3.20 s of wall time at $6.86/h'
    );
    expect(title).toContain('GPU 0: 2.95 s between the cell');
    expect(title).toContain('Energy: 812.3 J');
    expect(title).toContain('(%gpucost auto)');
    // the panel's local time format (the tests run in New York time)
    expect(title).toMatch(/Ended (Nov 23, )?05:00:03 AM EST \(%gpucost auto\)/);
  });

  it('follows %gpucost auto typed in a cell', () => {
    expect(autoSwitch('%gpucost auto on')).toBe('on');
    expect(autoSwitch('x = 1\n  %gpucost auto off\n')).toBe('off');
    expect(autoSwitch('%gpucost auto on\n%gpucost auto off')).toBe('off');
    expect(autoSwitch('%gpucost check')).toBeNull();
    expect(autoSwitch('# %gpucost auto on')).toBeNull();
    expect(autoCode(true)).toContain('"auto on"');
    expect(autoCode(false)).toContain('"auto off"');
  });
});

describe("the kernel's auto state", () => {
  it('is read from the reply to a user expression', () => {
    const reply = (text: string) => ({
      status: 'ok',
      user_expressions: {
        [AUTO_STATE_KEY]: { status: 'ok', data: { 'text/plain': text } }
      }
    });
    expect(autoStateOf(reply('True'))).toBe(true);
    expect(autoStateOf(reply('False'))).toBe(false);
    expect(autoStateOf(reply('None'))).toBeNull();
    expect(autoStateOf({ status: 'error' })).toBeNull();
    expect(
      autoStateOf({
        status: 'ok',
        user_expressions: { [AUTO_STATE_KEY]: { status: 'error' } }
      })
    ).toBeNull();
    expect(AUTO_STATE_EXPRESSION).toContain('gpucost_auto');
  });
});

/** A kernel that answers execute requests, and says whether auto is on. */
class FakeKernel {
  constructor(public auto: boolean) {}
  requests: {
    code: string;
    silent?: boolean;
    user_expressions?: { [key: string]: string };
  }[] = [];
  info = Promise.resolve({ language_info: { name: 'python' } });
  requestExecute(content: {
    code: string;
    silent?: boolean;
    user_expressions?: { [key: string]: string };
  }) {
    this.requests.push(content);
    if (content.code.includes('"auto on"')) {
      this.auto = true;
    } else if (content.code.includes('"auto off"')) {
      this.auto = false;
    }
    const expressions: { [key: string]: unknown } = {};
    for (const key of Object.keys(content.user_expressions ?? {})) {
      expressions[key] = {
        status: 'ok',
        data: { 'text/plain': this.auto ? 'True' : 'False' }
      };
    }
    return {
      done: Promise.resolve({
        content: { status: 'ok', user_expressions: expressions }
      })
    };
  }
}

/** The parts of a notebook panel the controller uses. */
function fakePanel(kernel: FakeKernel | null) {
  const context = {
    session: kernel ? { kernel } : null,
    ready: Promise.resolve(),
    kernelChanged: new Signal<unknown, unknown>({}),
    statusChanged: new Signal<unknown, string>({})
  };
  const panel = {
    sessionContext: context,
    context: { ready: Promise.resolve() },
    content: { widgets: [] },
    disposed: new Signal<unknown, void>({})
  };
  return {
    panel: panel as unknown as NotebookPanel,
    context,
    /** The kernel goes away (shut down) or another one comes. */
    changeKernel(next: FakeKernel | null) {
      context.session = next ? { kernel: next } : null;
      context.kernelChanged.emit({});
    }
  };
}

/** Server settings whose cells route answers `records`. */
function cellsServer(records: ICellRecord[]): {
  settings: ServerConnection.ISettings;
  urls: string[];
} {
  const urls: string[] = [];
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/',
    fetch: async (input: RequestInfo) => {
      const url = typeof input === 'string' ? input : input.url;
      urls.push(url);
      return new Response(
        JSON.stringify({ cells: records, currency_symbol: '$' }),
        { status: 200 }
      );
    }
  });
  return { settings, urls };
}

function fakeCell(
  id: string,
  source: string,
  outputs: IOutputJSON[] = [],
  metadata: { [key: string]: unknown } = {}
): Cell {
  const node = document.createElement('div');
  let current = [...outputs];
  return {
    node,
    ready: Promise.resolve(),
    model: {
      id,
      type: 'code',
      sharedModel: { getSource: () => source },
      outputs: {
        toJSON: () => current,
        clear: () => {
          current = [];
        },
        add: (output: IOutputJSON) => {
          current.push(output);
        }
      },
      getMetadata: (key: string) => metadata[key],
      setMetadata: (key: string, value: unknown) => {
        metadata[key] = value;
      },
      deleteMetadata: (key: string) => {
        delete metadata[key];
      }
    }
  } as unknown as Cell;
}

/** A record as the kernel publishes it: 2 s at $6.862/h. */
function saved(overrides: { [key: string]: unknown } = {}) {
  return {
    version: 1,
    cost_micro_usd: 3812,
    cost_usd: '0.003812',
    currency: 'USD',
    wall_s: 2.0,
    gpu_busy_s: null,
    gpus: [
      { name: 'NVIDIA A100-SXM4-80GB', usd_per_hour: '3.431' },
      { name: 'NVIDIA A100-SXM4-80GB', usd_per_hour: '3.431' }
    ],
    base_usd_per_hour: '0',
    rate_usd_per_hour: '6.862',
    priced_by: 'the shipped catalog',
    simulated: true,
    simulated_by: 'demo',
    mode: 'auto',
    status: 'ok',
    started: '2026-11-27T08:00:00+00:00',
    at: '2026-11-27T08:00:02+00:00',
    ...overrides
  };
}

function carrier(record: unknown): IOutputJSON {
  return {
    output_type: 'display_data',
    data: { [SAVED_MIMETYPE]: record, 'text/plain': 'gpucost: $0.0038' },
    metadata: {}
  };
}

describe('saved cell costs', () => {
  it('reads a sound record and refuses a forged or corrupt one', () => {
    expect(parseSavedCell(saved())?.cost_micro_usd).toBe(3812);
    for (const bad of [
      null,
      '$5',
      [],
      saved({ version: 2 }),
      saved({ cost_micro_usd: 10 ** 12 }),
      saved({ cost_micro_usd: 3812.5 }),
      saved({ rate_usd_per_hour: '0' }),
      saved({ wall_s: -1 }),
      saved({ wall_s: Infinity }),
      saved({ mode: 'live' }),
      saved({ at: 'yesterday' }),
      // times without a zone, in the future, before 2000, or ending before the start
      saved({ started: '2001-01-01T00:00:00', at: '2001-01-01T00:00:02' }),
      saved({ at: '2026-11-27T08:00:02' }),
      saved({ started: '2999-01-01T00:00:00Z', at: '2999-01-01T00:00:02Z' }),
      saved({ started: '1999-12-31T23:59:58Z', at: '1999-12-31T23:59:59Z' }),
      saved({ at: '2026-11-27T07:59:59+00:00' }),
      saved({ gpus: [{ name: 'x', usd_per_hour: '1e3' }] }),
      saved({ priced_by: 'x'.repeat(600) })
    ]) {
      expect(parseSavedCell(bad)).toBeNull();
    }
  });

  it('writes the record a cell’s execute reply carries into its metadata', () => {
    const metadata: { [key: string]: unknown } = {};
    const cell = fakeCell('c1', 'x = 1', [], metadata);
    const controller = new CellCostController(cellsServer([]).settings);
    expect(controller.saveFromReply(null, cell, saved())?.cost_micro_usd).toBe(
      3812
    );
    expect(
      (metadata[SAVED_KEY] as { cost_micro_usd: number }).cost_micro_usd
    ).toBe(3812);
    // kept as the kernel writes it: a real GPU's record says nothing of simulation
    controller.saveFromReply(
      null,
      cell,
      saved({ simulated: false, simulated_by: '' })
    );
    expect(Object.keys(metadata[SAVED_KEY] as object)).toEqual([
      'version',
      'cost_micro_usd',
      'cost_usd',
      'currency',
      'wall_s',
      'gpus',
      'base_usd_per_hour',
      'rate_usd_per_hour',
      'priced_by',
      'mode',
      'status',
      'started',
      'at'
    ]);
    // run again without a record (auto mode off): the old one was another run's
    expect(controller.saveFromReply(null, cell, undefined)).toBeNull();
    expect(metadata).toEqual({});
    // a forged record is neither saved nor shown
    expect(
      controller.saveFromReply(null, cell, saved({ cost_micro_usd: 1 }))
    ).toBeNull();
    expect(metadata).toEqual({});
  });

  it('writes nothing into the notebook when the setting says not to', () => {
    const metadata: { [key: string]: unknown } = {};
    const cell = fakeCell('c1', 'x = 1', [], metadata);
    const controller = new CellCostController(cellsServer([]).settings);
    controller.saveInNotebook = false;
    expect(controller.saveFromReply(null, cell, saved())).not.toBeNull();
    expect(metadata).toEqual({});
  });

  it('cleans the hidden outputs of a notebook an earlier version saved', () => {
    const metadata: { [key: string]: unknown } = {};
    const text = { output_type: 'stream', name: 'stdout', text: 'done' };
    const old = fakeCell('c1', 'x = 1', [text, carrier(saved())], metadata);
    const forged = fakeCell('c2', 'y = 1', [
      carrier(saved({ cost_micro_usd: 1 }))
    ]);
    const plain = fakeCell('c3', 'z = 1', [text]);
    const controller = new CellCostController(cellsServer([]).settings);
    const panel = {
      content: { widgets: [old, forged, plain], model: null }
    } as unknown as NotebookPanel;
    expect(controller.cleanSaved(panel)).toBe(true);
    const outputs = (cell: Cell) =>
      (
        cell.model as unknown as { outputs: { toJSON(): IOutputJSON[] } }
      ).outputs.toJSON();
    expect(outputs(old)).toEqual([text]);
    expect(outputs(forged)).toEqual([]);
    expect(outputs(plain)).toEqual([text]);
    // the sound record it carried is kept where a notebook keeps it now
    expect(
      (metadata[SAVED_KEY] as { cost_micro_usd: number }).cost_micro_usd
    ).toBe(3812);
    expect(controller.cleanSaved(panel)).toBe(false);
  });

  it('shows a notebook file’s costs as recorded, and a forged one as ignored', async () => {
    const good = fakeCell('c1', 'x = 1', [], { [SAVED_KEY]: saved() });
    const forged = fakeCell('c2', 'y = 1', [], {
      [SAVED_KEY]: saved({ cost_micro_usd: 1 })
    });
    const controller = new CellCostController(cellsServer([]).settings);
    controller.showRecorded({
      content: { widgets: [good, forged] }
    } as unknown as NotebookPanel);
    await settle();
    const badge = good.node.querySelector(`.${BADGE_CLASS}`) as HTMLElement;
    expect(badge.dataset.recorded).toBe('true');
    expect(badge.textContent).toBe('$0.0038 · 2.00 s · recorded');
    const ignored = forged.node.querySelector(`.${BADGE_CLASS}`) as HTMLElement;
    expect(ignored.dataset.status).toBe('ignored');
    expect(ignored.textContent).not.toContain('$');
  });
});

const settle = () => new Promise(resolve => setTimeout(resolve, 0));

describe('CellCostController', () => {
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('reads back that the kernel prices cells after the page reloads', async () => {
    // the kernel was switched on before the reload; the new page knows nothing
    const kernel = new FakeKernel(true);
    const server = cellsServer([record({ cell_id: 'c1', mode: 'auto' })]);
    const controller = new CellCostController(
      server.settings,
      async () => undefined
    );
    const { panel } = fakePanel(kernel);
    const button = { pressed: false } as ToolbarButton;
    controller.track(panel, button);
    await settle();
    await settle();
    expect(controller.isOn(panel)).toBe(true);
    expect(button.pressed).toBe(true);
    // asked silently, as a user expression: no cell ran, nothing switched
    const asked = kernel.requests[kernel.requests.length - 1];
    expect(asked.silent).toBe(true);
    expect(asked.user_expressions).toEqual({
      [AUTO_STATE_KEY]: AUTO_STATE_EXPRESSION
    });
    expect(asked.code).not.toContain('auto on');
    // a cell run now gets its badge
    const cell = fakeCell('c1', 'x = 1');
    await controller.executed(panel, cell);
    const badge = cell.node.querySelector(`.${BADGE_CLASS}`) as HTMLElement;
    expect(badge).not.toBeNull();
    expect(badge.dataset.mode).toBe('auto');
    expect(server.urls.some(u => u.includes('cell_id=c1'))).toBe(true);
  });

  it('saves the record the kernel sends with the reply to the cell’s request', async () => {
    const kernel = new FakeKernel(true);
    const anyMessage = new Signal<unknown, unknown>(kernel);
    (kernel as unknown as { anyMessage: unknown }).anyMessage = anyMessage;
    const controller = new CellCostController(
      cellsServer([]).settings,
      async () => undefined
    );
    const { panel } = fakePanel(kernel);
    const metadata: { [key: string]: unknown } = {};
    const cell = fakeCell('c1', 'x = 1', [], metadata);
    (panel.content.widgets as Cell[]).push(cell);
    controller.track(panel, null);
    await settle();
    const request = {
      header: { msg_id: 'm1', msg_type: 'execute_request' },
      parent_header: {},
      metadata: { cellId: 'c1' },
      content: {}
    };
    anyMessage.emit({ msg: request, direction: 'send' });
    // a reply to another request (the page's own silent ones) is not the cell's
    anyMessage.emit({
      msg: {
        header: { msg_id: 'r0', msg_type: 'execute_reply' },
        parent_header: { msg_id: 'other' },
        metadata: { [SAVED_KEY]: saved({ wall_s: 4, cost_micro_usd: 7624 }) },
        content: { status: 'ok' }
      },
      direction: 'recv'
    });
    expect(metadata).toEqual({});
    anyMessage.emit({
      msg: {
        header: { msg_id: 'r1', msg_type: 'execute_reply' },
        parent_header: { msg_id: 'm1' },
        metadata: { started: '2026-11-27T08:00:00Z', [SAVED_KEY]: saved() },
        content: { status: 'ok' }
      },
      direction: 'recv'
    });
    expect(
      (metadata[SAVED_KEY] as { cost_micro_usd: number }).cost_micro_usd
    ).toBe(3812);
    const badge = cell.node.querySelector(`.${BADGE_CLASS}`) as HTMLElement;
    expect(badge.textContent).toContain('$0.0038');
  });

  it('shows the button off when the kernel does not price cells', async () => {
    const kernel = new FakeKernel(false);
    const server = cellsServer([]);
    const controller = new CellCostController(
      server.settings,
      async () => undefined
    );
    const { panel } = fakePanel(kernel);
    const button = { pressed: true } as ToolbarButton;
    controller.track(panel, button);
    await settle();
    await settle();
    expect(button.pressed).toBe(false);
    const cell = fakeCell('c2', 'x = 1');
    await controller.executed(panel, cell);
    expect(cell.node.querySelector(`.${BADGE_CLASS}`)).toBeNull();
    expect(server.urls).toHaveLength(0);
  });

  it('says nothing when the kernel goes away on its own', async () => {
    const warning = jest.spyOn(Notification, 'warning');
    const kernel = new FakeKernel(false);
    const controller = new CellCostController(
      cellsServer([]).settings,
      async () => undefined
    );
    controller.alwaysOn = true; // "Price every cell" in the settings
    const fake = fakePanel(kernel);
    controller.track(fake.panel, { pressed: false } as ToolbarButton);
    await settle();
    await settle();
    expect(kernel.auto).toBe(true);
    // the budget action shuts the kernel down
    fake.changeKernel(null);
    await settle();
    await settle();
    expect(warning).not.toHaveBeenCalled();
    // a new kernel is priced again, still without a word
    const next = new FakeKernel(false);
    fake.changeKernel(next);
    await settle();
    await settle();
    expect(next.auto).toBe(true);
    expect(warning).not.toHaveBeenCalled();
  });

  it('tells the user who asked that there is no kernel', async () => {
    const warning = jest.spyOn(Notification, 'warning');
    const controller = new CellCostController(
      cellsServer([]).settings,
      async () => undefined
    );
    const { panel } = fakePanel(null);
    expect(await controller.toggle(panel)).toBe(false);
    expect(warning).toHaveBeenCalledWith(
      'Start a kernel first: cells are priced by the kernel that runs them.',
      { autoClose: 5000 }
    );
  });
});

describe('recent cells with the recorded ones', () => {
  it('lists the live cells first, then the recorded ones the server does not know', () => {
    const live = [record({ cell_id: 'c1', ended: '2026-11-27T09:00:00Z' })];
    const recorded = [
      { ...record({ cell_id: 'c1' }), recorded: true },
      {
        ...record({ cell_id: 'old', ended: '2026-11-20T09:00:00Z' }),
        recorded: true
      },
      {
        ...record({ cell_id: 'newer', ended: '2026-11-21T09:00:00Z' }),
        recorded: true
      }
    ];
    expect(withRecorded(live, recorded).map(c => c.cell_id)).toEqual([
      'c1',
      'newer',
      'old'
    ]);
    expect(withRecorded(live, recorded)[0].recorded).toBeUndefined();
    // with no live cell, the newest recorded ones
    expect(withRecorded([], recorded, 2).map(c => c.cell_id)).toEqual([
      'c1',
      'newer'
    ]);
  });
});

describe("the notebook's summary", () => {
  it('sums the cells exactly and splits the total by GPU exactly', () => {
    const cells = [
      parseSavedCell(saved())!,
      parseSavedCell(
        saved({
          cost_micro_usd: 7,
          wall_s: 0.0036,
          gpus: [
            { name: 'NVIDIA A10G', usd_per_hour: '1.006' },
            { name: 'NVIDIA H100 80GB HBM3', usd_per_hour: '6.88' }
          ],
          base_usd_per_hour: '0.1',
          rate_usd_per_hour: '7.986'
        })
      )!
    ];
    const summary = summarise(cells)!;
    expect(summary.total_micro_usd).toBe(3819);
    expect(summary.total_usd).toBe('0.003819');
    expect(
      Object.values(summary.by_gpu_micro_usd).reduce((a, b) => a + b, 0)
    ).toBe(3819);
    expect(summary.simulated).toBe(true);
    expect(summarise([])).toBeNull();
  });

  it('splits any amount into parts that add up to it', () => {
    for (const total of [0, 1, 2, 7, 999_999, 123_456_789]) {
      const parts = splitExactly(total, { a: 3.431, b: 3.431, c: 0.1 });
      expect(Object.values(parts).reduce((x, y) => x + y, 0)).toBe(total);
      expect(Object.values(parts).every(p => p >= 0)).toBe(true);
    }
    expect(splitExactly(5, {})).toEqual({ [BASE_KEY]: 5 });
    expect(microToDecimal(1_000_000)).toBe('1');
    expect(microToDecimal(1_500_000)).toBe('1.5');
    expect(microToDecimal(12)).toBe('0.000012');
  });
});

/** A record of a session that prices in yuan: 2 s of an H100 at CN¥49.5/h. */
function savedInYuan(overrides: { [key: string]: unknown } = {}) {
  return saved({
    cost_micro_usd: 27500,
    cost_usd: '0.0275',
    currency: 'CNY',
    gpus: [{ name: 'NVIDIA H100 80GB HBM3', usd_per_hour: '49.5' }],
    rate_usd_per_hour: '49.5',
    ...overrides
  });
}

describe('saved cell costs in other currencies', () => {
  it('reads a record in any ISO 4217 currency and refuses garbage', () => {
    expect(parseSavedCell(savedInYuan())?.currency).toBe('CNY');
    expect(parseSavedCell(saved({ currency: 'EUR' }))?.currency).toBe('EUR');
    for (const currency of [
      'usd',
      'US',
      'USDT',
      'U$D',
      '',
      ' CNY',
      5,
      null,
      undefined
    ]) {
      expect(parseSavedCell(saved({ currency }))).toBeNull();
    }
  });

  it('keeps a yuan record as the kernel wrote it', () => {
    const metadata: { [key: string]: unknown } = {};
    const cell = fakeCell('c1', 'x = 1', [], metadata);
    const controller = new CellCostController(cellsServer([]).settings);
    controller.saveFromReply(null, cell, savedInYuan());
    expect(metadata[SAVED_KEY]).toEqual(savedInYuan({ gpu_busy_s: undefined }));
    const badge = cell.node.querySelector(`.${BADGE_CLASS}`) as HTMLElement;
    expect(badge.textContent).toBe('CN¥0.0275 · 2.00 s');
  });

  it('shows each recorded cell in its own currency, never as dollars', async () => {
    const yuan = fakeCell('c1', 'x = 1', [], { [SAVED_KEY]: savedInYuan() });
    const euros = fakeCell('c2', 'y = 1', [], {
      [SAVED_KEY]: saved({ currency: 'EUR' })
    });
    const controller = new CellCostController(cellsServer([]).settings);
    controller.showRecorded({
      content: { widgets: [yuan, euros] }
    } as unknown as NotebookPanel);
    await settle();
    const badge = (cell: Cell) =>
      (cell.node.querySelector(`.${BADGE_CLASS}`) as HTMLElement).textContent;
    expect(badge(yuan)).toBe('CN¥0.0275 · 2.00 s · recorded');
    expect(badge(euros)).toBe('€0.0038 · 2.00 s · recorded');
  });

  it('never adds amounts in two currencies into one total', () => {
    // a dollar run's record, then a cell run again in a yuan session
    const dollars = parseSavedCell(saved())!;
    const yuan = parseSavedCell(
      savedInYuan({
        started: '2026-11-28T08:00:00+00:00',
        at: '2026-11-28T08:00:02+00:00'
      })
    )!;
    const summary = summarise([dollars, yuan])!;
    expect(summary.currency).toBe('CNY');
    expect(summary.total_micro_usd).toBe(27500);
    expect(summary.total_usd).toBe('0.0275');
    expect(summary.cells).toBe(1);
    expect(summary.other_currencies).toEqual({ USD: 3812 });
    // a notebook of dollar records alone is summed as before, with no such key
    const alone = summarise([dollars])!;
    expect(alone.currency).toBe('USD');
    expect('other_currencies' in alone).toBe(false);
  });
});
