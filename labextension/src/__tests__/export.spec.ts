import {
  describePaths,
  endText,
  formatBytes,
  formatDuration,
  isExportable,
  progressText,
  targetLabel,
  targetWithoutAsking
} from '../export/format';
import { TargetPicker } from '../export';
import { IExportJob, IExportTarget } from '../export/request';

const TARGETS: IExportTarget[] = [
  {
    name: 's3',
    label: 'Team bucket',
    kind: 's3',
    url: 's3://checkpoints/runs',
    default: false
  },
  {
    name: 'local',
    label: 'Local folder',
    kind: 'local',
    url: 'file:///home/me/.local/share/jupyter/gpucost/exports',
    default: true
  }
];

function job(overrides: Partial<IExportJob> = {}): IExportJob {
  return {
    id: '0123456789ab',
    state: 'running',
    target: 's3',
    target_url: 's3://checkpoints/runs',
    paths: ['runs/model.pt'],
    bytes_done: 512 * 1024 * 1024,
    bytes_total: 2 * 1024 * 1024 * 1024,
    progress: 0.25,
    rate_bytes_per_s: 128 * 1024 * 1024,
    eta_s: 12.2,
    created: '2026-11-23T10:00:00+00:00',
    started: '2026-11-23T10:00:00+00:00',
    finished: null,
    error: null,
    results: [],
    user: 'me',
    ...overrides
  };
}

describe('export format', () => {
  it('offers the export on checkpoints and folders only', () => {
    expect(isExportable({ type: 'directory', name: 'runs' })).toBe(true);
    for (const name of [
      'model.pt',
      'a.PTH',
      'last.ckpt',
      'w.safetensors',
      'pytorch_model.bin'
    ]) {
      expect(isExportable({ type: 'file', name })).toBe(true);
    }
    expect(isExportable({ type: 'notebook', name: 'train.ipynb' })).toBe(false);
    expect(isExportable({ type: 'file', name: 'notes.txt' })).toBe(false);
  });

  it('writes sizes and durations the way people read them', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.50 KiB');
    expect(formatBytes(2 * 1024 ** 3)).toBe('2.00 GiB');
    expect(formatBytes(150 * 1024 ** 2)).toBe('150 MiB');
    expect(formatDuration(45.4)).toBe('45 s');
    expect(formatDuration(200)).toBe('3 min 20 s');
    expect(formatDuration(3900)).toBe('1 h 05 min');
  });

  it('describes progress with bytes, rate and time left', () => {
    expect(progressText(job())).toBe(
      'Exporting model.pt to s3: 25% · 512 MiB of 2.00 GiB · 128 MiB/s · 12 s left'
    );
    expect(progressText(job({ state: 'queued' }))).toBe(
      'Export of model.pt is waiting for another export to finish'
    );
    expect(describePaths(['a/b.pt', 'c.pt', 'd'])).toBe('b.pt and 2 more');
  });

  it('ends with the address, the reason it failed, or what cancelling left', () => {
    const done = job({
      state: 'done',
      progress: 1,
      results: [
        {
          path: 'runs/model.pt',
          url: 's3://checkpoints/runs/model.pt',
          manifest_url: 's3://checkpoints/runs/model.pt.manifest.json',
          size_bytes: 10,
          sha256: 'ab',
          verified: 'size'
        }
      ]
    });
    expect(endText(done)).toBe(
      'Exported model.pt to s3://checkpoints/runs/model.pt'
    );
    expect(
      endText(job({ state: 'failed', error: 'the bucket does not exist' }))
    ).toBe('Export of model.pt failed: the bucket does not exist');
    expect(endText(job({ state: 'cancelled' }))).toBe(
      'Export of model.pt cancelled: nothing was left at s3://checkpoints/runs'
    );
  });

  it('asks for a target only when there is a choice and no setting', () => {
    expect(targetWithoutAsking(TARGETS, '')).toBeNull();
    expect(targetWithoutAsking(TARGETS, 's3')).toBe('s3');
    expect(targetWithoutAsking(TARGETS, 'gone')).toBeNull();
    expect(targetWithoutAsking([TARGETS[1]], '')).toBe('local');
    expect(targetLabel(TARGETS, 's3')).toBe('Team bucket');
  });

  it('picks from the configured targets, the default selected', () => {
    const picker = new TargetPicker(TARGETS, 'local');
    const options = Array.from(picker.node.querySelectorAll('option'));
    expect(options.map(o => o.textContent)).toEqual([
      'Team bucket (s3://checkpoints/runs)',
      'Local folder (file:///home/me/.local/share/jupyter/gpucost/exports)'
    ]);
    expect(picker.getValue()).toBe('local');
    picker.node.querySelector('select')!.value = 's3';
    expect(picker.getValue()).toBe('s3');
  });
});
