import {
  autoCode,
  autoSwitch,
  badgeMoney,
  badgeSeconds,
  badgeText,
  badgeTitle,
  ICellRecord
} from '../cells/format';

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
