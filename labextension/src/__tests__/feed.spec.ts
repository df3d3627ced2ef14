import { Event } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';

import {
  historyDue,
  mergeCells,
  PANEL_EVENT_SCHEMA,
  PanelFeed,
  withNewestPoint
} from '../panel/feed';
import { CostPanelModel } from '../panel/model';
import { ICellCost, IHistoryAnswer, IHistoryPoint } from '../panel/types';

function point(t: string, rate = 6.86): IHistoryPoint {
  return { t, cost: 0.1, rate_per_hour: rate, gpus: [] };
}

function history(step_s: number, points: IHistoryPoint[]): IHistoryAnswer {
  return {
    window_s: 900,
    step_s,
    start: '2026-11-25T10:00:00.000Z',
    end: '2026-11-25T10:15:00.000Z',
    gpus: [],
    points,
    totals: { sessions: [], days: [] }
  };
}

function cell(id: string, ended: string): ICellCost {
  return {
    cell_id: id,
    notebook_path: 'a.ipynb',
    kernel_id: null,
    started: ended,
    ended,
    wall_s: 1,
    gpu_busy_s: null,
    peak_memory_bytes: null,
    energy_j: null,
    cost_usd: 0.01,
    status: 'ok',
    mode: 'auto'
  };
}

describe('the pushed panel parts', () => {
  it('moves the chart on: a point within a step replaces the last', () => {
    const h = history(5, [
      point('2026-11-25T10:14:50.000Z'),
      point('2026-11-25T10:14:55.000Z')
    ]);
    const within = withNewestPoint(h, point('2026-11-25T10:14:57.000Z', 7));
    expect(within?.points.map(p => p.t)).toEqual([
      '2026-11-25T10:14:50.000Z',
      '2026-11-25T10:14:57.000Z'
    ]);
    const after = withNewestPoint(h, point('2026-11-25T10:15:00.000Z'));
    expect(after?.points).toHaveLength(3);
    expect(after?.end).toBe('2026-11-25T10:15:00.000Z');
    // a point already shown changes nothing
    expect(withNewestPoint(h, point('2026-11-25T10:14:55.000Z'))).toBe(h);
  });

  it('drops the points that left the window', () => {
    const h = history(5, [
      point('2026-11-25T10:00:00.000Z'),
      point('2026-11-25T10:14:55.000Z')
    ]);
    const next = withNewestPoint(h, point('2026-11-25T10:15:05.000Z'));
    expect(next?.points.map(p => p.t)).toEqual([
      '2026-11-25T10:14:55.000Z',
      '2026-11-25T10:15:05.000Z'
    ]);
  });

  it('asks again for a coarser window once a whole step passed', () => {
    const h = history(300, [point('2026-11-25T10:10:00.000Z')]);
    expect(withNewestPoint(h, point('2026-11-25T10:12:00.000Z'))).toBeNull();
    expect(historyDue(h, point('2026-11-25T10:12:00.000Z'))).toBe(false);
    expect(historyDue(h, point('2026-11-25T10:15:00.000Z'))).toBe(true);
  });

  it('lists pushed cells first, earlier ones after, without repeats', () => {
    const older = cell('old', '2026-11-24T10:00:00Z');
    const a = cell('a', '2026-11-25T10:00:00Z');
    const b = cell('b', '2026-11-25T10:01:00Z');
    const merged = mergeCells([b, a], { cells: [a, older] }, 20);
    expect(merged.cells.map(c => c.cell_id)).toEqual(['b', 'a', 'old']);
    expect(mergeCells([b, a], { cells: [older] }, 2).cells).toHaveLength(2);
  });
});

describe('CostPanelModel with pushes', () => {
  it('shows pushed kernels and asks only for the history and the cells', async () => {
    const stream = new Signal<unknown, Event.Emission>({});
    const feed = new PanelFeed({ stream } as unknown as Event.IManager);
    const kernels = {
      as_of: '2026-11-25T10:00:00Z',
      pids_visible: true,
      note: null,
      total: 0.5,
      idle: 0.1,
      unattributed: 0,
      kernels: []
    };
    stream.emit({
      schema_id: PANEL_EVENT_SCHEMA,
      panel: { kernels, cells: [], exports: null, point: null },
      interval_s: 1,
      heartbeat_s: 10
    } as unknown as Event.Emission);
    expect(feed.live).toBe(true);
    const urls: string[] = [];
    const fetchApi = (input: RequestInfo | URL): Promise<Response> => {
      const url = input instanceof Request ? input.url : String(input);
      urls.push(url);
      const body = url.includes('history') ? history(5, []) : { cells: [] };
      return Promise.resolve(
        new Response(JSON.stringify(body), { status: 200 })
      );
    };
    const { ServerConnection } = await import('@jupyterlab/services');
    const model = new CostPanelModel({
      serverSettings: ServerConnection.makeSettings({
        baseUrl: 'http://localhost/',
        fetch: fetchApi as typeof fetch
      }),
      feed
    });
    expect(model.kernels.value?.total).toBe(0.5);
    await new Promise(resolve => setTimeout(resolve, 50));
    expect(urls.map(u => new URL(u).pathname).sort()).toEqual([
      '/gpucost/api/cells',
      '/gpucost/api/history'
    ]);
    model.dispose();
    feed.dispose();
  });
});
