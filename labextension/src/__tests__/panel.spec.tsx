import { nullTranslator } from '@jupyterlab/translation';
import { ServerConnection } from '@jupyterlab/services';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  axisDecimals,
  chartGeometry,
  CHART_HEIGHT,
  CHART_MARGIN,
  CHART_MIN_WIDTH,
  CHART_WIDTH,
  chartWidth,
  emptyChartText,
  niceCeiling
} from '../panel/chart';
import { formatLocalTime } from '../budget/format';
import { formatCo2, formatDuration } from '../format';
import {
  formatShare,
  gpuMetered,
  kernelRows,
  rightsizingText
} from '../panel/format';
import { CostPanelModel } from '../panel/model';
import {
  IBudgetLine,
  IHistoryAnswer,
  IKernelsAnswer,
  IPanelStatus
} from '../panel/types';
import { CostPanel } from '../panel/view';
import { FakeAnswer, makeStatus } from './fixtures';

const trans = nullTranslator.load('jupyter_gpucost');

function makePanelStatus(overrides: Partial<IPanelStatus> = {}): IPanelStatus {
  return {
    ...makeStatus(),
    session_id: '2026-11-22T09:00:00Z-3f2a',
    today: 4.5,
    month: 61.25,
    all_time: 130.0,
    co2_g: 57.0,
    carbon_intensity_g_per_kwh: 400,
    rightsizing: {
      model: 'L4',
      cost: 0.31,
      instead_of: 2.1,
      price_per_hour: 0.805,
      peak_memory_bytes: 12 * 2 ** 30,
      reason: 'peak memory 12 GiB fits in 24 GB'
    },
    attribution: { pids_visible: true, note: null },
    ...overrides
  };
}

function makeKernels(overrides: Partial<IKernelsAnswer> = {}): IKernelsAnswer {
  return {
    as_of: '2026-11-22T09:20:34Z',
    pids_visible: true,
    note: null,
    total: 2.830123,
    idle: 1.102,
    unattributed: 0.2,
    kernels: [
      {
        id: 'k-small',
        name: 'python3',
        notebook_path: 'eda.ipynb',
        execution_state: 'idle',
        started: '2026-11-22T09:10:00Z',
        uptime_s: 634,
        pids: [5000],
        remote: false,
        gpu_share: { '0': 0.1 },
        memory_bytes: 2 ** 30,
        cost: 0.128123
      },
      {
        id: 'k-train',
        name: 'python3',
        notebook_path: 'work/train.ipynb',
        execution_state: 'busy',
        started: '2026-11-22T09:00:00Z',
        uptime_s: 1234.5,
        pids: [4242, 4301, 4302],
        remote: false,
        gpu_share: { '0': 0.75, '1': 0.9 },
        gpu_share_by: { '0': 'sm_samples', '1': 'kernel_gpu_time' },
        memory_bytes: 60 * 2 ** 30,
        cost: 1.4
      }
    ],
    ...overrides
  };
}

function makeHistory(): IHistoryAnswer {
  const start = Date.parse('2026-11-22T08:20:34Z');
  return {
    window_s: 3600,
    step_s: 5,
    start: new Date(start).toISOString(),
    end: new Date(start + 3600_000).toISOString(),
    gpus: [
      { index: 0, name: 'NVIDIA A100-SXM4-80GB' },
      { index: 1, name: 'NVIDIA A100-SXM4-80GB' }
    ],
    points: [0, 1, 2, 3].map(i => ({
      t: new Date(start + 2400_000 + i * 400_000).toISOString(),
      cost: i * 0.7,
      rate_per_hour: 6.862,
      gpus: [
        {
          index: 0,
          utilization_pct: i === 2 ? null : 25 * i,
          memory_used_bytes: 1,
          power_w: 100
        },
        { index: 1, utilization_pct: 100, memory_used_bytes: 1, power_w: 300 }
      ]
    })),
    totals: { sessions: [], days: [] }
  };
}

/** Server settings whose fetch answers per route. */
const requests: { url: string; method: string; body: string | null }[] = [];

function routeServer(routes: { [route: string]: FakeAnswer }): {
  settings: ServerConnection.ISettings;
  urls: string[];
} {
  const urls: string[] = [];
  const fetch = async (
    input: RequestInfo,
    init?: RequestInit
  ): Promise<Response> => {
    const url = typeof input === 'string' ? input : input.url;
    const method =
      init?.method ?? (typeof input === 'string' ? 'GET' : input.method);
    const sent =
      typeof input === 'string'
        ? ((init?.body as string | undefined) ?? null)
        : await input.clone().text();
    requests.push({ url, method, body: sent });
    urls.push(url);
    const route = Object.keys(routes).find(r =>
      url.includes(`/gpucost/api/${r}`)
    );
    const answer: FakeAnswer = route ? routes[route] : { status: 404 };
    if ('throws' in answer) {
      throw answer.throws;
    }
    const body =
      answer.body === undefined
        ? answer.status === 404
          ? '<html>404</html>'
          : JSON.stringify({ message: 'database is locked' })
        : JSON.stringify(answer.body);
    return new Response(body, { status: answer.status });
  };
  return {
    settings: ServerConnection.makeSettings({
      baseUrl: 'http://localhost:8888/',
      fetch
    }),
    urls
  };
}

async function renderPanel(routes: { [route: string]: FakeAnswer }): Promise<{
  node: HTMLElement;
  model: CostPanelModel;
  urls: string[];
}> {
  const server = routeServer(routes);
  const model = new CostPanelModel({
    serverSettings: server.settings,
    autoStart: false
  });
  const panel = new CostPanel(model);
  Widget.attach(panel, document.body);
  await model.fetch().catch(() => undefined);
  MessageLoop.sendMessage(panel, Widget.Msg.UpdateRequest);
  await panel.renderPromise;
  // let React commit what it rendered (the budget section keeps state)
  await new Promise(resolve => setTimeout(resolve, 0));
  return { node: panel.node, model, urls: server.urls };
}

describe('panel formatting', () => {
  it('formats durations, shares and CO2', () => {
    // the one duration format, also the export's and (with decimals) the badge's
    expect(formatDuration(42.9)).toBe('42 s');
    expect(formatDuration(303)).toBe('5 min 03 s');
    expect(formatDuration(2 * 3600 + 7 * 60)).toBe('2 h 07 min');
    expect(formatDuration(3 * 86400 + 4 * 3600)).toBe('3 d 4 h');
    expect(formatDuration(null)).toBe('—');
    // a cell's time, by size: a few milliseconds are not `0.00 s`
    expect(formatDuration(3.2, true)).toBe('3.20 s');
    expect(formatDuration(0.012, true)).toBe('0.01 s');
    expect(formatDuration(0.003, true)).toBe('< 0.01 s');
    expect(formatDuration(0, true)).toBe('0.00 s');
    expect(formatShare({ '1': 0.9, '0': 0.754 })).toBe('GPU 0 75%, GPU 1 90%');
    expect(formatShare({})).toBe('—');
    expect(formatCo2(57)).toBe('57 g');
    expect(formatCo2(2500)).toBe('2.50 kg');
  });

  it('lists kernels by cost, then the unattributed and idle rows', () => {
    const rows = kernelRows(makeKernels(), '$', trans);
    expect(rows.map(r => r.key)).toEqual([
      'k-train',
      'k-small',
      'unattributed',
      'idle'
    ]);
    expect(rows[0].label).toBe('work/train.ipynb');
    expect(rows[0].cost).toBe('$1.40');
    // each row says how its share was made; a server that does not say shows `—`
    expect(rows[0].shareBy).toBe("by SM samples, by the kernel's own GPU time");
    expect(rows[1].shareBy).toBe('—');
    expect(rows[1].uptime).toBe('10 min 34 s');
    expect(rows[2].cost).toBe('$0.20');
    expect(rows[3].cost).toBe('$1.10');
  });

  it('marks remote kernels as unattributable', () => {
    const answer = makeKernels();
    answer.kernels[0] = { ...answer.kernels[0], remote: true, pids: [] };
    const row = kernelRows(answer, '$', trans).find(r => r.key === 'k-small')!;
    expect(row.state).toBe('idle (remote)');
    expect(row.share).toBe('n/a');
  });

  it('phrases right-sizing advice with the right article', () => {
    const advice = makePanelStatus().rightsizing!;
    expect(rightsizingText(advice, '$', trans)).toBe(
      'An L4 would have cost $0.31 instead of $2.10.'
    );
    expect(rightsizingText({ ...advice, model: 'T4' }, '$', trans)).toBe(
      'A T4 would have cost $0.31 instead of $2.10.'
    );
    expect(rightsizingText(null, '$', trans)).toBeNull();
  });
});

describe('chart geometry', () => {
  it('rounds the rate axis up to a nice number', () => {
    expect(niceCeiling(6.862)).toBe(10);
    expect(niceCeiling(3.2)).toBe(5);
    expect(niceCeiling(0.18)).toBe(0.2);
    expect(niceCeiling(0)).toBe(1);
  });

  it('writes every tick of the rate axis with the same decimals', () => {
    const labels = (rate: number): string[] => {
      const history = makeHistory();
      history.points = history.points.map(p => ({
        ...p,
        rate_per_hour: rate
      }));
      return chartGeometry(history, trans, '$').rateTicks.map(t => t.label);
    };
    expect(labels(6.862)).toEqual(['$0', '$5', '$10']);
    expect(labels(3.2)).toEqual(['$0.00', '$2.50', '$5.00']);
    expect(labels(2.1)).toEqual(['$0.00', '$1.25', '$2.50']);
    expect(labels(22)).toEqual(['$0.00', '$12.50', '$25.00']);
    expect(labels(0.02)).toEqual(['$0.00', '$0.01', '$0.02']);
    expect(labels(0.024)).toEqual(['$0.0000', '$0.0125', '$0.0250']);
    expect(axisDecimals([0, 50, 100])).toBe(0);
  });

  it('places points on the window and breaks lines at missing readings', () => {
    const g = chartGeometry(makeHistory(), trans, '$');
    expect(g.rateMax).toBe(10);
    expect(g.series.map(s => s.key)).toEqual(['rate', 'gpu-0', 'gpu-1']);
    const coords = (d: string): number[][] =>
      (d.match(/[ML][^ML]+/g) ?? []).map(p =>
        p.slice(1).split(',').map(Number)
      );
    // the history starts 40 minutes into the window: the axis starts there, and the
    // second point (400 s of the remaining 1200 s) is a third of the way along
    const plotW = CHART_WIDTH - CHART_MARGIN.left - CHART_MARGIN.right;
    const rate = coords(g.series[0].path);
    expect(rate).toHaveLength(4);
    expect(rate[0][0]).toBeCloseTo(CHART_MARGIN.left, 0);
    expect(rate[1][0]).toBeCloseTo(CHART_MARGIN.left + plotW / 3, 0);
    expect(g.start).toBe(Date.parse(makeHistory().points[0].t));
    // GPU 1 at 100 % is drawn at the top of the plot
    expect(coords(g.series[2].path)[0][1]).toBeCloseTo(CHART_MARGIN.top, 5);
    // GPU 0 has no reading at the third point: the line restarts after it
    expect(g.series[1].path.match(/M/g)).toHaveLength(2);
    expect(g.series[1].last).toBe(75);
  });
});

describe('CostPanel', () => {
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('shows totals, the chart, the kernels and advice', async () => {
    const { node, urls } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      kernels: { status: 200, body: makeKernels() },
      history: { status: 200, body: makeHistory() },
      cells: { status: 404 }
    });
    expect(urls.some(u => u.includes('history?window=1h'))).toBe(true);
    const total = (key: string): string =>
      node.querySelector(`[data-total="${key}"] .jp-gpucost-total-value`)!
        .textContent!;
    expect(total('session')).toBe('$2.83');
    expect(total('today')).toBe('$4.50');
    expect(total('month')).toBe('$61.25');
    expect(total('rate')).toBe('$6.86/h');
    expect(node.querySelector('[data-field="energy"]')!.textContent).toBe(
      '142.3 Wh'
    );
    expect(node.querySelectorAll('path[data-series]')).toHaveLength(3);
    const row = node.querySelector('tr[data-kernel-id="k-train"]')!;
    expect(row.textContent).toContain('work/train.ipynb');
    expect(row.textContent).toContain('$1.40');
    expect(row.textContent).toContain(
      "GPU 0 75%, GPU 1 90% (by SM samples, by the kernel's own GPU time)"
    );
    expect(node.querySelector('tfoot')!.textContent).toContain('$2.83');
    expect(
      node.querySelector('[data-field="rightsizing"]')!.textContent
    ).toContain('An L4 would have cost $0.31 instead of $2.10.');
    expect(node.querySelector('[data-field="co2"]')!.textContent).toBe('57 g');
    expect(node.textContent).toContain('CO₂ at 400 g/kWh');
    // no cells route: no cells section; no exports: no exports section
    expect(node.querySelector('.jp-gpucost-panel-cells')).toBeNull();
    expect(node.querySelector('.jp-gpucost-panel-exports')).toBeNull();
  });

  it('labels the rate axis with the same decimals on every tick', async () => {
    const { node } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      history: { status: 200, body: makeHistory() }
    });
    const ticks = Array.from(
      node.querySelectorAll('.jp-gpucost-chart-grid text')
    ).map(t => t.textContent);
    expect(ticks).toEqual(['$0', '$5', '$10']);
  });

  it('lists the checkpoint exports with their outcome', async () => {
    const job = {
      target: 's3',
      target_url: 's3://checkpoints/runs',
      bytes_total: 100,
      rate_bytes_per_s: null,
      eta_s: null,
      created: null,
      started: null,
      finished: null,
      user: 'me'
    };
    const { node } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      exports: {
        status: 200,
        body: {
          default_target: 's3',
          targets: [],
          jobs: [
            {
              ...job,
              id: 'aaaaaaaaaaaa',
              state: 'running',
              paths: ['big.ckpt'],
              bytes_done: 42,
              progress: 0.42,
              error: null,
              results: []
            },
            {
              ...job,
              id: 'bbbbbbbbbbbb',
              state: 'done',
              paths: ['run/model.pt'],
              bytes_done: 100,
              progress: 1,
              error: null,
              results: [{ url: 's3://checkpoints/runs/model.pt' }]
            },
            {
              ...job,
              id: 'cccccccccccc',
              state: 'failed',
              paths: ['a.pt', 'b.pt'],
              bytes_done: 0,
              progress: 0,
              error: "the bucket 'checkpoints' does not exist",
              results: []
            }
          ]
        }
      }
    });
    const row = (id: string): string[] =>
      Array.from(node.querySelectorAll(`tr[data-export-id="${id}"] td`)).map(
        td => td.textContent!
      );
    expect(row('aaaaaaaaaaaa')).toEqual([
      'big.ckpt',
      '42%',
      's3://checkpoints/runs'
    ]);
    expect(row('bbbbbbbbbbbb')).toEqual([
      'model.pt',
      'done',
      's3://checkpoints/runs/model.pt'
    ]);
    expect(row('cccccccccccc')).toEqual([
      'a.pt and 1 more',
      'failed',
      "the bucket 'checkpoints' does not exist"
    ]);
  });

  it('explains what an older server cannot tell', async () => {
    const { node } = await renderPanel({
      status: { status: 200, body: makeStatus() },
      kernels: { status: 404 },
      history: { status: 404 }
    });
    expect(
      node.querySelector('[data-total="today"] .jp-gpucost-total-value')!
        .textContent
    ).toBe('—');
    expect(
      node.querySelector('[data-total="today"]')!.getAttribute('title')
    ).toContain('no ledger');
    expect(node.textContent).toContain('does not attribute cost to kernels');
    expect(node.textContent).toContain('keeps no history');
  });

  it('says when GPU processes cannot be matched to kernels', async () => {
    const { node } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      kernels: {
        status: 200,
        body: makeKernels({
          pids_visible: false,
          note: 'NVML reports host pids: this server runs in a container.'
        })
      },
      history: { status: 200, body: makeHistory() }
    });
    expect(node.querySelector('[data-state="pids-hidden"]')!.textContent).toBe(
      'NVML reports host pids: this server runs in a container.'
    );
  });

  it('says that kernels of one user can misattribute to each other', async () => {
    const { node } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      kernels: { status: 200, body: makeKernels() },
      history: { status: 200, body: makeHistory() }
    });
    const note = node.querySelector('[data-state="same-user"]')!;
    expect(note.textContent).toContain('These kernels run as one user');
    expect(note.textContent).toContain(
      'not proof of which notebook used the GPU'
    );
    // one kernel: nothing to misattribute to
    document.body.innerHTML = '';
    const [only] = makeKernels().kernels;
    const one = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      kernels: { status: 200, body: makeKernels({ kernels: [only] }) },
      history: { status: 200, body: makeHistory() }
    });
    expect(one.node.querySelector('[data-state="same-user"]')).toBeNull();
  });

  it('says the server extension is missing, or why a part failed', async () => {
    const missing = await renderPanel({});
    expect(
      missing.node.querySelector('[data-state="missing"]')!.textContent
    ).toContain('not enabled');
    document.body.innerHTML = '';
    const failing = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      kernels: { status: 500 },
      history: { throws: new TypeError('Failed to fetch') }
    });
    expect(failing.node.textContent).toContain(
      'Could not read the kernels: HTTP 500: database is locked'
    );
    expect(failing.node.textContent).toContain(
      'Could not read the history: Failed to fetch'
    );
  });

  it('asks for another window when one is picked', async () => {
    const { node, model, urls } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      kernels: { status: 200, body: makeKernels() },
      history: { status: 200, body: makeHistory() }
    });
    const button = [...node.querySelectorAll('button')].find(
      b => b.textContent === '24h'
    )!;
    button.click();
    expect(model.window).toBe('24h');
    await model.fetch();
    expect(urls.some(u => u.includes('history?window=24h'))).toBe(true);
    model.dispose();
  });
});

describe('CostPanel budget', () => {
  afterEach(() => {
    document.body.innerHTML = '';
    requests.length = 0;
  });

  it('says what the last spot interruption cost, in local time', async () => {
    const deadline = '2026-11-27T14:02:00+00:00';
    const status = makePanelStatus({
      budget: {
        state: 'none',
        hard: null,
        soft: null,
        scopes: ['session'],
        last_action: null,
        interruption: {
          last: {
            line: 'interrupted at 14:02 UTC by AWS (spot): $0.41 since the last checkpoint',
            deadline
          }
        }
      }
    });
    const { node } = await renderPanel({
      status: { status: 200, body: status },
      budget: { status: 200, body: {} },
      kernels: { status: 404 },
      history: { status: 404 }
    });
    const text = node.querySelector(
      '[data-field="last-interruption"]'
    )!.textContent!;
    expect(text).toContain('by AWS (spot): $0.41 since the last checkpoint');
    expect(text).not.toContain('UTC');
    expect(text).toContain(`interrupted at ${formatLocalTime(deadline)} by`);
  });

  it("shows the locked and the user's budgets and sets one", async () => {
    const line = {
      locked: false,
      scope: 'session',
      amount: 5,
      spent: 2.830123,
      remaining: 2.169877,
      share: 0.566,
      runs_out_at: '2026-11-22T10:00:00Z'
    };
    const status = makePanelStatus({
      budget: {
        state: 'warning',
        hard: {
          ...line,
          kind: 'hard',
          locked: true,
          amount: 20,
          share: 0.1415
        },
        soft: { ...line, kind: 'soft' },
        scopes: ['session', 'day', 'month'],
        last_action: {
          message: 'stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved'
        }
      }
    });
    const { node } = await renderPanel({
      status: { status: 200, body: status },
      budget: { status: 200, body: {} },
      kernels: { status: 404 },
      history: { status: 404 }
    });
    const hard = node.querySelector('[data-budget="hard"]')!.textContent!;
    expect(hard).toContain('Admin’s budget (locked)');
    expect(hard).toContain('$2.83 of $20.00 per session spent (14%)');
    expect(node.querySelector('[data-budget="soft"]')!.textContent).toContain(
      '$2.83 of $5.00 per session spent (56%)'
    );
    expect(
      node.querySelector('[data-field="last-action"]')!.textContent
    ).toContain('2 notebooks saved');
    const input = node.querySelector(
      '.jp-gpucost-budget-form input'
    ) as HTMLInputElement;
    const setter = Object.getOwnPropertyDescriptor(
      HTMLInputElement.prototype,
      'value'
    )!.set!;
    setter.call(input, '7.5');
    input.dispatchEvent(new Event('input', { bubbles: true }));
    (
      node.querySelector('.jp-gpucost-budget-form') as HTMLFormElement
    ).requestSubmit();
    await new Promise(resolve => setTimeout(resolve, 50));
    const put = requests.find(r => r.method === 'PUT');
    expect(put?.url).toContain('/gpucost/api/budget');
    expect(JSON.parse(put!.body!)).toEqual({
      amount_usd: 7.5,
      scope: 'session'
    });
  });
});

describe('CostPanel budget sources', () => {
  afterEach(() => {
    document.body.innerHTML = '';
    requests.length = 0;
  });

  it("shows the hub's budgets locked with their source, and the hard budget's", async () => {
    const line = {
      locked: true,
      scope: 'day',
      amount: 10,
      spent: 3,
      remaining: 7,
      share: 0.3,
      runs_out_at: null
    };
    const status = makePanelStatus({
      budget: {
        state: 'ok',
        hard: {
          ...line,
          kind: 'hard',
          scope: 'session',
          amount: 2.5,
          source: 'set by the spawner (GPUCOST_BUDGET_USD)'
        },
        soft: null,
        hub: {
          budgets: [
            {
              ...line,
              kind: 'hub',
              source: 'set by your hub admin',
              owner: 'user'
            },
            {
              ...line,
              kind: 'hub',
              scope: 'month',
              amount: 100,
              spent: 40,
              share: 0.4,
              source: 'set by your hub admin',
              owner: 'group:physics'
            }
          ],
          stop_at: '2026-11-22T12:30:00Z',
          reason: 'group budget spent',
          error: null
        },
        scopes: ['session', 'day', 'month'],
        last_action: null
      }
    });
    const { node } = await renderPanel({
      status: { status: 200, body: status },
      budget: { status: 200, body: {} },
      kernels: { status: 404 },
      history: { status: 404 }
    });
    const hard = node.querySelector('[data-budget="hard"]')!;
    expect(hard.textContent).toContain('Admin’s budget (locked)');
    expect(hard.querySelector('[data-field="source"]')!.textContent).toContain(
      'set by the spawner (GPUCOST_BUDGET_USD)'
    );
    const user = node.querySelector('[data-budget="hub"][data-owner="user"]')!;
    expect(user.textContent).toContain('Hub budget (locked)');
    expect(user.textContent).toContain('set by your hub admin');
    expect(user.textContent).toContain('$3.00 of $10.00 per day spent (30%)');
    const group = node.querySelector(
      '[data-budget="hub"][data-owner="group:physics"]'
    )!;
    expect(group.textContent).toContain(
      'Hub budget for group physics (locked)'
    );
    expect(group.textContent).toContain(
      '$40.00 of $100.00 per month spent (40%)'
    );
    expect(
      node.querySelector('[data-field="hub-stop"]')!.textContent
    ).toContain('(group budget spent)');
  });
});

describe('CostPanel hub allowances', () => {
  afterEach(() => {
    document.body.innerHTML = '';
    requests.length = 0;
  });

  it("shows what is left of the hub's allowances, read-only", async () => {
    const status = makePanelStatus({
      budget: {
        state: 'ok',
        hard: null,
        soft: null,
        hub: {
          budgets: [],
          stop_at: null,
          reason: null,
          error: null,
          allowances: [
            {
              source: 'group:students',
              unit: 'gpu_hours',
              period: 'week',
              amount: 10,
              left: 6.333333,
              refill_at: '2026-11-30T00:00:00Z'
            },
            {
              source: 'user',
              unit: 'usd',
              period: 'month',
              amount: 20,
              left: 12.4,
              refill_at: '2026-12-01T00:00:00Z'
            }
          ]
        },
        scopes: ['session', 'day', 'month'],
        last_action: null
      }
    });
    const { node } = await renderPanel({
      status: { status: 200, body: status },
      budget: { status: 200, body: {} },
      kernels: { status: 404 },
      history: { status: 404 }
    });
    const [hours, money] = Array.from(
      node.querySelectorAll('[data-field="hub-allowance"]')
    );
    expect(
      hours.querySelector('[data-field="allowance-left"]')!.textContent
    ).toBe('6 h 20 min of GPU time left this week');
    expect(
      hours.querySelector('[data-field="allowance-refill"]')!.textContent
    ).toBe(
      `fills up again at ${formatLocalTime('2026-11-30T00:00:00Z', Date.now())}`
    );
    expect(
      hours.querySelector('[data-field="allowance-source"]')!.textContent
    ).toBe('group students, set by your hub admin (read-only)');
    expect(
      money.querySelector('[data-field="allowance-left"]')!.textContent
    ).toBe('$12.40 left this month');
    expect(
      money.querySelector('[data-field="allowance-source"]')!.textContent
    ).toBe('set by your hub admin (read-only)');
    // read-only: nothing in it to edit
    expect(
      node.querySelector(
        '[data-field="hub-allowances"] input, [data-field="hub-allowances"] button'
      )
    ).toBeNull();
  });
});

describe('CostPanel cells, advice, chart and layout', () => {
  afterEach(() => {
    document.body.innerHTML = '';
    requests.length = 0;
  });

  function cellRecord(cellId: string, wallS: number) {
    return {
      cell_id: cellId,
      notebook_path: 'train.ipynb',
      kernel_id: 'k1',
      started: '2026-11-22T09:20:00+00:00',
      ended: '2026-11-22T09:20:01+00:00',
      wall_s: wallS,
      gpu_busy_s: null,
      peak_memory_bytes: null,
      energy_j: null,
      cost: 0.0017,
      status: 'ok',
      mode: 'auto'
    };
  }

  it("shows recent cells' wall time as their badges do", async () => {
    const { node } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      cells: {
        status: 200,
        body: {
          cells: [cellRecord('a', 0.92), cellRecord('b', 0.5)],
          currency_symbol: '$'
        }
      }
    });
    const wall = Array.from(
      node.querySelectorAll('.jp-gpucost-cells tbody tr')
    ).map(row => row.querySelectorAll('td')[2].textContent);
    expect(wall).toEqual(['0.92 s', '0.50 s']);
  });

  it("writes when recent cells ended in the panel's local time format", async () => {
    const today = new Date();
    today.setHours(19, 12, 25, 0);
    const record = { ...cellRecord('a', 0.92), ended: today.toISOString() };
    const { node } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      cells: { status: 200, body: { cells: [record], currency_symbol: '$' } }
    });
    const ended = node
      .querySelector('.jp-gpucost-cells tbody tr')!
      .querySelectorAll('td')[1].textContent;
    // the tests run in New York time (jest.config.js)
    expect(ended).toMatch(/^07:12:25 PM E[SD]T$/);
  });

  it('gives no GPU advice without GPUs, and prices the base with its currency', async () => {
    const status = makePanelStatus({
      gpus: [],
      gpu_cost: 0,
      idle_cost: 0,
      used_cost: 0,
      cost: 0.25,
      rate_per_hour: 0.5,
      base_price_per_hour: 0.5,
      base_cost: 0.25,
      currency: 'EUR',
      currency_symbol: '€',
      rightsizing: null,
      rightsizing_note: null,
      telemetry: {
        source: 'none',
        simulated: false,
        available: false,
        reason: 'turned off (telemetry=none)',
        detail: null
      }
    });
    const { node } = await renderPanel({
      status: { status: 200, body: status }
    });
    const waste = node.querySelector('.jp-gpucost-panel-waste')!;
    expect(waste.querySelector('[data-field="idle"]')).toBeNull();
    expect(waste.querySelector('[data-field="rightsizing"]')).toBeNull();
    expect(waste.textContent).not.toContain('No cheaper GPU');
    expect(waste.textContent).toContain('No GPU is metered on this server');
    expect(node.querySelector('[data-field="base-price"]')!.textContent).toBe(
      'Base price of the instance: €0.50/h'
    );
  });

  it('lists no GPU rows in the kernel table without GPUs', async () => {
    const status = makePanelStatus({
      gpus: [],
      gpu_cost: 0,
      idle_cost: 0,
      used_cost: 0,
      rightsizing: null
    });
    const kernels = makeKernels({
      total: 0,
      idle: 0,
      unattributed: 0
    });
    kernels.kernels = kernels.kernels.map(k => ({
      ...k,
      cost: 0,
      gpu_share: {}
    }));
    const { node } = await renderPanel({
      status: { status: 200, body: status },
      kernels: { status: 200, body: kernels }
    });
    const section = node.querySelector('.jp-gpucost-panel-kernels')!;
    expect(section.querySelector('[data-state="no-gpus"]')!.textContent).toBe(
      'No GPU is metered on this server: there is no GPU cost to attribute to kernels.'
    );
    expect(section.querySelector('tr[data-kind="unattributed"]')).toBeNull();
    expect(section.querySelector('tr[data-kind="idle"]')).toBeNull();
    expect(section.querySelector('tfoot')).toBeNull();
    expect(section.textContent).not.toContain('$0.0000');
    const row = section.querySelector('tr[data-kernel-id="k-train"]')!;
    expect(row.textContent).toContain('work/train.ipynb');
    expect(kernelRows(kernels, '$', trans, false).map(r => r.key)).toEqual([
      'k-small',
      'k-train'
    ]);
    // GPU cost counted before the GPUs were lost is still shown
    expect(gpuMetered(0, makeKernels())).toBe(true);
    expect(gpuMetered(0, kernels)).toBe(false);
  });

  it('does not claim a cheaper GPU was looked for when none is priced', async () => {
    const status = makePanelStatus({
      rightsizing: null,
      rightsizing_note: null
    });
    status.gpus = status.gpus.map(gpu => ({
      ...gpu,
      priced: false,
      price_per_hour: null
    }));
    const { node } = await renderPanel({
      status: { status: 200, body: status }
    });
    const advice = node.querySelector('[data-field="rightsizing"]')!;
    expect(advice.textContent).toContain('the catalog has no price');
    expect(advice.textContent).not.toContain('No cheaper GPU');
  });

  function weekWithPoints(n: number): IHistoryAnswer {
    const end = Date.parse('2026-11-22T09:20:00Z');
    return {
      window_s: 604800,
      step_s: 3600,
      start: new Date(end - 604800_000).toISOString(),
      end: new Date(end).toISOString(),
      gpus: [{ index: 0, name: 'NVIDIA A100-SXM4-80GB' }],
      points: Array.from({ length: n }, () => ({
        t: new Date(end).toISOString(),
        cost: 0.1234,
        rate_per_hour: 6.862,
        gpus: [
          {
            index: 0,
            utilization_pct: 50,
            memory_used_bytes: 1,
            power_w: 100
          }
        ]
      })),
      totals: { sessions: [], days: [] }
    };
  }

  it('says how a window with one point so far is sampled, and what it says', async () => {
    expect(emptyChartText(weekWithPoints(1), '$', trans)).toContain(
      'The 7-day view has one point per hour, and only one so far'
    );
    expect(emptyChartText(weekWithPoints(1), '$', trans)).toContain(
      '$0.12 spent, at $6.86/h'
    );
    expect(emptyChartText(weekWithPoints(0), '$', trans)).toBe(
      'The 7-day view has one point per hour, and no reading in this window yet.'
    );
    const quarter = { ...weekWithPoints(0), window_s: 900, step_s: 5 };
    expect(emptyChartText(quarter, '$', trans)).toContain(
      'The 15-minute view has one point per 5 seconds'
    );
    const { node } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      history: { status: 200, body: weekWithPoints(1) }
    });
    const empty = node.querySelector('.jp-gpucost-chart-empty')!;
    expect(empty.textContent).toContain('only one so far');
    expect(empty.textContent).not.toContain('after two samples');
  });

  it('draws the chart at the width it has, so its labels keep their size', async () => {
    expect(chartWidth(undefined)).toBe(CHART_WIDTH);
    expect(chartWidth(300.6)).toBe(300);
    expect(chartWidth(100)).toBe(CHART_MIN_WIDTH);
    const observed: Element[] = [];
    const original = (globalThis as { ResizeObserver?: unknown })
      .ResizeObserver;
    (globalThis as { ResizeObserver?: unknown }).ResizeObserver = class {
      observe(node: Element) {
        observed.push(node);
      }
      disconnect() {
        return undefined;
      }
    };
    const width = jest
      .spyOn(HTMLElement.prototype, 'clientWidth', 'get')
      .mockReturnValue(300);
    try {
      const { node } = await renderPanel({
        status: { status: 200, body: makePanelStatus() },
        kernels: { status: 200, body: makeKernels() },
        history: { status: 200, body: makeHistory() },
        cells: {
          status: 200,
          body: { cells: [cellRecord('a', 0.92)], currency_symbol: '$' }
        }
      });
      expect(observed.length).toBeGreaterThan(0);
      const svg = node.querySelector('.jp-gpucost-chart svg')!;
      expect(svg.getAttribute('viewBox')).toBe(`0 0 300 ${CHART_HEIGHT}`);
      const labels = Array.from(svg.querySelectorAll('text')).map(t =>
        Number(t.getAttribute('x'))
      );
      expect(Math.max(...labels)).toBeLessThanOrEqual(300);
      // wide tables scroll sideways inside the panel instead of being cut off
      for (const table of ['.jp-gpucost-kernels', '.jp-gpucost-cells']) {
        expect(node.querySelector(table)!.parentElement!.className).toContain(
          'jp-gpucost-table-scroll'
        );
      }
    } finally {
      width.mockRestore();
      (globalThis as { ResizeObserver?: unknown }).ResizeObserver = original;
    }
  });
});

describe('CostPanel budget, in the server currency', () => {
  afterEach(() => {
    document.body.innerHTML = '';
    requests.length = 0;
  });

  function line(overrides: Partial<IBudgetLine> = {}): IBudgetLine {
    return {
      kind: 'soft',
      locked: false,
      scope: 'session',
      amount: 5,
      spent: 0.042,
      remaining: 4.958,
      share: 0.0084,
      runs_out_at: '2026-11-23T18:33:57Z',
      ...overrides
    };
  }

  async function render(
    soft: IBudgetLine,
    more: Partial<NonNullable<IPanelStatus['budget']>> = {}
  ): Promise<HTMLElement> {
    const status = makePanelStatus({
      currency: 'EUR',
      currency_symbol: '€',
      budget: {
        state: 'ok',
        hard: null,
        soft,
        scopes: ['session'],
        last_action: null,
        ...more
      }
    });
    const { node } = await renderPanel({
      status: { status: 200, body: status },
      budget: { status: 200, body: {} },
      kernels: { status: 404 },
      history: { status: 200, body: makeHistory() }
    });
    return node;
  }

  function type(node: HTMLElement, text: string): void {
    const input = node.querySelector(
      '.jp-gpucost-budget-form input'
    ) as HTMLInputElement;
    Object.getOwnPropertyDescriptor(
      HTMLInputElement.prototype,
      'value'
    )!.set!.call(input, text);
    input.dispatchEvent(new Event('input', { bubbles: true }));
    (
      node.querySelector('.jp-gpucost-budget-form') as HTMLFormElement
    ).requestSubmit();
  }

  it("labels amounts with the server's symbol and shows the status bar's share", async () => {
    const node = await render(line());
    const soft = node.querySelector('[data-budget="soft"]')!.textContent!;
    expect(soft).toContain('€0.0420 of €5.00 per session spent (0%)');
    expect(
      node.querySelector('.jp-gpucost-budget-form label')!.textContent
    ).toBe('Your budget (€) ');
    expect(node.textContent).not.toContain('$');
    const legend = node.querySelector('.jp-gpucost-chart-legend')!.textContent!;
    expect(legend).toContain('spend rate (€/h): €');
  });

  it('leads with the time left at the current rate, and words a countdown by its reason', async () => {
    const text =
      'Stops at €5.00 — in about 2 h 10 min at €6.86/h; notebooks saved first, then the kernels shut down.';
    let node = await render(line(), {
      stop: { text, amount: 5, in_s: 7800, rate_per_hour: 6.862 }
    });
    expect(node.querySelector('[data-field="time-left"]')!.textContent).toBe(
      'about 2 h 10 min left at €6.86/h'
    );
    expect(node.querySelector('[data-field="countdown"]')).toBeNull();
    document.body.innerHTML = '';
    // the user's own stop counts down: a manual stop, not a budget's
    node = await render(line(), {
      state: 'grace',
      reason: 'user',
      grace: { reason: 'user', ends: '2026-11-22T19:10:05Z' }
    });
    const countdown = node.querySelector('[data-field="countdown"]')!;
    expect(countdown.getAttribute('data-reason')).toBe('user');
    // the budget's heading is not marked as a budget running out
    expect(
      node.querySelector('.jp-gpucost-panel-budget')!.getAttribute('data-state')
    ).toBe('stop');
    // in New York time (jest.config.js)
    expect(countdown.textContent).toMatch(
      /^Manual stop: notebooks saved, then the stop at (Nov 22, )?02:10:05 PM EST\.$/
    );
    // nothing runs out: no headline
    expect(node.querySelector('[data-field="time-left"]')).toBeNull();
  });

  it('says when and at what amount it stops, and why a countdown is short', async () => {
    const text =
      'Stops at €5.00 — in about 14 min at €21.50/h; notebooks saved first, then the kernels shut down.';
    const note =
      'The 120 s grace is shortened to 28 s: at €21.50/h the full grace would go past the budget.';
    const node = await render(line(), {
      state: 'grace',
      stop: { text, amount: 5, in_s: 28 },
      grace: { shortened_text: note }
    });
    expect(node.querySelector('[data-field="budget-stop"]')!.textContent).toBe(
      text
    );
    expect(
      node.querySelector('[data-field="grace-shortened"]')!.textContent
    ).toBe(note);
    document.body.innerHTML = '';
    const none = await render(line());
    expect(none.querySelector('[data-field="budget-stop"]')).toBeNull();
    expect(none.querySelector('[data-field="grace-shortened"]')).toBeNull();
  });

  it('gives the run-out time in local time, and none once spent', async () => {
    let node = await render(line());
    // the tests run in New York time (jest.config.js)
    expect(node.querySelector('[data-budget="soft"]')!.textContent).toMatch(
      /runs out at (Nov 23, )?01:33 PM EST at the current rate$/
    );
    document.body.innerHTML = '';
    node = await render(
      line({ spent: 0.9, amount: 0.47, remaining: 0, share: 1.91 })
    );
    const soft = node.querySelector('[data-budget="soft"]')!.textContent!;
    expect(soft).toContain('€0.90 of €0.47 per session spent (191%)');
    expect(soft).not.toContain('runs out');
  });

  it('takes only plain decimal numbers', async () => {
    const node = await render(line());
    for (const text of ['0x10', '1e3', 'Infinity', '']) {
      type(node, text);
      await new Promise(resolve => setTimeout(resolve, 20));
      expect(requests.filter(r => r.method === 'PUT')).toEqual([]);
      expect(
        node.querySelector('.jp-gpucost-panel-note[data-state="error"]')!
          .textContent
      ).toBe('Enter the amount as a plain decimal number, e.g. 5 or 7.50.');
    }
    type(node, '12.5');
    await new Promise(resolve => setTimeout(resolve, 50));
    const put = requests.find(r => r.method === 'PUT');
    expect(JSON.parse(put!.body!)).toEqual({
      amount_usd: 12.5,
      scope: 'session'
    });
  });
});

describe('the budget section’s alerts', () => {
  it('lists the admin’s targets by kind only and the user’s masked, with a test', async () => {
    const { node, urls } = await renderPanel({
      status: { status: 200, body: makePanelStatus() },
      kernels: { status: 404 },
      history: { status: 200, body: makeHistory() },
      alerts: {
        status: 200,
        body: {
          admin: ['mailtos'],
          yours: [{ id: 'a1b2c3', target: 'slack://…#a1b2c3' }],
          can_add: true,
          thresholds_pct: [50, 80, 100],
          recent: []
        }
      }
    });
    await new Promise(resolve => setTimeout(resolve, 0));
    const section = node.querySelector('.jp-gpucost-alerts')!;
    expect(section.textContent).toContain(
      'Alerts at 50%, 80%, 100% of a budget, and when the server is stopped, go to:'
    );
    expect(
      section.querySelector('[data-field="admin-target"]')!.textContent
    ).toBe('mailtos (set by your administrator)');
    expect(
      section.querySelector('[data-field="your-target"] code')!.textContent
    ).toBe('slack://…#a1b2c3');
    // a URL is typed like a password: never shown on screen
    expect(
      (
        section.querySelector(
          '.jp-gpucost-alerts-add input'
        ) as HTMLInputElement
      ).type
    ).toBe('password');
    (
      section.querySelector(
        '[data-field="your-target"] button'
      ) as HTMLButtonElement
    ).click();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(
      urls.some(u => u.includes('/gpucost/api/alerts/targets/a1b2c3/test'))
    ).toBe(true);
  });
});
