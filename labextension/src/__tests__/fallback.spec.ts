import { GpuCostModel } from '../model';
import { AlertsModel } from '../panel/alerts-model';
import { CostPanelModel } from '../panel/model';
import { fakeServer } from './fixtures';

describe('the one fallback interval', () => {
  it('is clamped, and backs off, the same in the shared model and the panel', () => {
    const shared = new GpuCostModel({ autoStart: false, intervalSeconds: 0.1 });
    const panel = new CostPanelModel({
      autoStart: false,
      intervalSeconds: 0.1
    });
    try {
      expect(shared.intervalSeconds).toBe(1);
      expect(panel.intervalSeconds).toBe(1);
      shared.intervalSeconds = 1e9;
      panel.intervalSeconds = 1e9;
      expect(shared.intervalSeconds).toBe(3600);
      expect(panel.intervalSeconds).toBe(3600);
      shared.intervalSeconds = Number.NaN;
      panel.intervalSeconds = Number.NaN;
      expect(shared.intervalSeconds).toBe(2);
      expect(panel.intervalSeconds).toBe(2);
      // after failures, up to ten intervals (at least a minute)
      expect(shared.poll.frequency).toEqual({
        backoff: true,
        interval: 2000,
        max: 60000
      });
    } finally {
      shared.dispose();
      panel.dispose();
    }
  });
});

describe('the panel’s interval', () => {
  it('follows the shared model’s setting unless the panel’s own is set', () => {
    const shared = new GpuCostModel({ autoStart: false, intervalSeconds: 7 });
    const panel = new CostPanelModel({ autoStart: false, cost: shared });
    try {
      expect(panel.intervalSeconds).toBe(7);
      // the user changes the one fallback interval in the Settings Editor
      shared.intervalSeconds = 30;
      expect(panel.intervalSeconds).toBe(30);
      // the deprecated panel setting, set, wins; unset again, the panel follows
      panel.intervalOverride = 5;
      expect(panel.intervalSeconds).toBe(5);
      shared.intervalSeconds = 60;
      expect(panel.intervalSeconds).toBe(5);
      panel.intervalOverride = null;
      expect(panel.intervalSeconds).toBe(60);
    } finally {
      panel.dispose();
      shared.dispose();
    }
  });
});

describe('the panel’s alerts model', () => {
  it('asks where alerts go once, and keeps the answer through a failed change', async () => {
    const answer = {
      admin: [],
      yours: [{ id: 'a1', target: 'slack://…#a1' }],
      can_add: true,
      thresholds_pct: [80, 100],
      recent: []
    };
    const server = fakeServer([
      { status: 200, body: answer },
      { status: 400, body: { message: 'not a URL an alert can go to' } }
    ]);
    const model = new AlertsModel(server.settings);
    try {
      await Promise.all([model.load(), model.load()]);
      await model.load();
      expect(server.urls).toHaveLength(1);
      expect(server.urls[0]).toContain('/gpucost/api/alerts');
      expect(model.answer?.yours[0].target).toBe('slack://…#a1');
      expect(await model.add('nonsense')).toBe(false);
      expect(model.error).toBe('not a URL an alert can go to');
      expect(model.answer?.yours).toHaveLength(1);
    } finally {
      model.dispose();
    }
  });
});
