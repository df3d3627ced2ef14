import {
  describePaths,
  endText,
  isExportable,
  progressText,
  targetLabel,
  missingDefaultTarget,
  missingTargetText,
  targetWithoutAsking
} from '../export/format';
import { formatBytes, formatDuration } from '../format';
import { Notification } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';

import { JupyterFrontEnd } from '@jupyterlab/application';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';

import {
  EXPORT_COMMAND,
  exportPlugin,
  followExport,
  TargetPicker
} from '../export';
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

describe('followExport', () => {
  function server(answers: Partial<IExportJob>[]): {
    settings: ServerConnection.ISettings;
    calls: { method: string; url: string }[];
  } {
    const calls: { method: string; url: string }[] = [];
    let next = 0;
    const fetch = async (
      input: RequestInfo,
      init?: RequestInit
    ): Promise<Response> => {
      const url = typeof input === 'string' ? input : input.url;
      const method =
        init?.method ?? (typeof input === 'string' ? 'GET' : input.method);
      calls.push({ method, url });
      const body = job(answers[Math.min(next, answers.length - 1)]);
      if (method === 'GET') {
        next += 1;
      }
      return new Response(JSON.stringify(body), { status: 200 });
    };
    return {
      settings: ServerConnection.makeSettings({
        baseUrl: 'http://localhost/',
        fetch: fetch as typeof window.fetch
      }),
      calls
    };
  }

  afterEach(() => {
    Notification.dismiss();
  });

  it('shows progress, then the address with a copy button', async () => {
    const done = {
      state: 'done' as const,
      progress: 1,
      bytes_done: 2 * 1024 ** 3,
      eta_s: null,
      results: [
        {
          path: 'runs/model.pt',
          url: 's3://checkpoints/runs/model.pt',
          manifest_url: 's3://checkpoints/runs/model.pt.manifest.json',
          size_bytes: 2 * 1024 ** 3,
          sha256: 'ab',
          verified: 'size'
        }
      ]
    };
    const { settings, calls } = server([{ progress: 0.5 }, done]);
    const seen: string[] = [];
    const watch = (
      _: unknown,
      change: { notification: { type: string; message: string } }
    ): void => {
      seen.push(`${change.notification.type}: ${change.notification.message}`);
    };
    Notification.manager.changed.connect(watch);
    const ended = await followExport(settings, job({ progress: 0.1 }), 1);
    Notification.manager.changed.disconnect(watch);
    expect(ended.state).toBe('done');
    expect(calls.map(c => c.method)).toEqual(['GET', 'GET']);
    expect(calls[0].url).toMatch(
      /^http:\/\/localhost\/gpucost\/api\/exports\/0123456789ab(\?|$)/
    );
    expect(seen[0]).toMatch(/^in-progress: Exporting model\.pt to s3: 10%/);
    expect(seen).toContain(
      'success: Exported model.pt to s3://checkpoints/runs/model.pt'
    );
    const last = Notification.manager.notifications[0];
    expect(last.type).toBe('success');
    expect(last.options.actions?.map(a => a.label)).toEqual(['Copy address']);
  });

  it('cancels from the notification and says nothing was left', async () => {
    const { settings, calls } = server([
      { progress: 0.3 },
      { progress: 0.4 },
      { state: 'cancelled', eta_s: null }
    ]);
    const pending = followExport(settings, job({ progress: 0.2 }), 5);
    const running = Notification.manager.notifications[0];
    expect(running.type).toBe('in-progress');
    const cancel = running.options.actions!.find(a => a.label === 'Cancel')!;
    cancel.callback(new MouseEvent('click'));
    const ended = await pending;
    expect(calls.some(c => c.method === 'DELETE')).toBe(true);
    expect(ended.state).toBe('cancelled');
    const last = Notification.manager.notifications[0];
    expect(last.type).toBe('info');
    expect(last.message).toBe(
      'Export of model.pt cancelled: nothing was left at s3://checkpoints/runs'
    );
  });
});

describe('a default target that does not exist', () => {
  afterEach(() => {
    document.body.innerHTML = '';
    Notification.dismiss();
  });

  it('is not swapped for the only target without a word', () => {
    const local = [TARGETS[1]];
    expect(targetWithoutAsking(local, 'nope')).toBeNull();
    expect(targetWithoutAsking(local, 'local')).toBe('local');
    expect(missingDefaultTarget(local, 'nope')).toBe('nope');
    expect(missingDefaultTarget(local, 'local')).toBeNull();
    expect(missingDefaultTarget(local, '')).toBeNull();
    expect(missingTargetText(local, 'nope')).toBe(
      'The export target "nope" set in the settings (GPU Cost: checkpoint export → Export target) ' +
        'is not a target of this server (its target is local): pick one.'
    );
    const picker = new TargetPicker(local, 'local', 'the note');
    expect(
      picker.node.querySelector('.jp-gpucost-export-picker-note')!.textContent
    ).toBe('the note');
  });

  it('opens the picker, saying so, instead of exporting', async () => {
    const posts: string[] = [];
    const settings = ServerConnection.makeSettings({
      baseUrl: 'http://localhost/',
      fetch: (async (input: RequestInfo, init?: RequestInit) => {
        const method =
          init?.method ?? (typeof input === 'string' ? 'GET' : input.method);
        if (method === 'POST') {
          posts.push(typeof input === 'string' ? input : input.url);
        }
        return new Response(
          JSON.stringify({
            default_target: 'local',
            targets: [TARGETS[1]],
            jobs: []
          }),
          { status: 200 }
        );
      }) as typeof window.fetch
    });
    const commands = new CommandRegistry();
    const app = {
      commands,
      serviceManager: {
        serverSettings: settings,
        contents: { localPath: (path: string) => path }
      }
    } as unknown as JupyterFrontEnd;
    const factory = {
      tracker: { currentWidget: null }
    } as unknown as IFileBrowserFactory;
    const registry = {
      load: async () => ({
        changed: new Signal<unknown, unknown>({}),
        get: () => ({ composite: 'nope' })
      })
    } as unknown as ISettingRegistry;
    void exportPlugin.activate(app, factory, registry);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(commands.label(EXPORT_COMMAND)).toBe('Export to…');
    const running = commands.execute(EXPORT_COMMAND, {
      paths: ['run/model.pt']
    });
    let note: Element | null = null;
    for (let i = 0; i < 50 && !note; i++) {
      await new Promise(resolve => setTimeout(resolve, 10));
      note = document.querySelector('.jp-gpucost-export-picker-note');
    }
    expect(note?.textContent).toContain(
      'The export target "nope" set in the settings'
    );
    // nothing is exported until the user picks
    expect(posts).toHaveLength(0);
    (
      document.querySelector('.jp-Dialog .jp-mod-reject') as HTMLElement
    ).click();
    await running;
    expect(posts).toHaveLength(0);
  });
});
