import { JupyterFrontEnd } from '@jupyterlab/application';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { statusPlugin as plugin, CommandIDs } from '../index';
import { GpuCostStatus } from '../view';
import { fakeServer, makeStatus } from './fixtures';

/** A setting registry holding one value for the plugin. */
class FakeSettings {
  constructor(public interval: number) {}
  readonly changed = new Signal<FakeSettings, FakeSettings>(this);
  get(key: string): { composite: unknown } {
    expect(key).toBe('pollIntervalSeconds');
    return { composite: this.interval };
  }
  set(interval: number): void {
    this.interval = interval;
    this.changed.emit(this);
  }
}

function setup(withStatusBar = true) {
  const server = fakeServer([{ status: 200, body: makeStatus() }]);
  const commands = new CommandRegistry();
  const app = {
    commands,
    serviceManager: { serverSettings: server.settings }
  } as unknown as JupyterFrontEnd;
  const registered: { id: string; options: IStatusBar.IItem }[] = [];
  const statusBar = {
    registerStatusItem: (id: string, options: IStatusBar.IItem) => {
      registered.push({ id, options });
      return { dispose: () => undefined, isDisposed: false };
    }
  } as unknown as IStatusBar;
  const settings = new FakeSettings(5);
  const settingRegistry = {
    load: async (id: string) => {
      expect(id).toBe('jupyter-gpucost:plugin');
      return settings;
    }
  } as unknown as ISettingRegistry;
  void plugin.activate(
    app,
    withStatusBar ? statusBar : null,
    settingRegistry,
    null
  );
  const view = registered[0]?.options.item as GpuCostStatus | undefined;
  return { server, commands, registered, settings, view };
}

describe('jupyter-gpucost:plugin', () => {
  let view: GpuCostStatus | undefined;

  afterEach(() => {
    view?.dispose();
    view = undefined;
  });

  it('starts by itself and needs nothing', () => {
    expect(plugin.id).toBe('jupyter-gpucost:plugin');
    expect(plugin.autoStart).toBe(true);
    expect(plugin.requires ?? []).toEqual([]);
  });

  it('puts the item on the left of the status bar', async () => {
    const env = setup();
    view = env.view;
    expect(env.registered).toHaveLength(1);
    expect(env.registered[0].options.align).toBe('left');
    expect(view).toBeInstanceOf(GpuCostStatus);
    expect(view!.id).toBe('jp-gpucost-status');
  });

  it('applies the poll interval setting, and its changes', async () => {
    const env = setup();
    view = env.view;
    await Promise.resolve();
    await Promise.resolve();
    expect(view!.model.intervalSeconds).toBe(5);
    env.settings.set(30);
    expect(view!.model.intervalSeconds).toBe(30);
  });

  it('does nothing (and asks nothing) without a status bar', async () => {
    const env = setup(false);
    await new Promise(resolve => setTimeout(resolve, 50));
    expect(env.registered).toHaveLength(0);
    expect(env.server.urls).toHaveLength(0);
  });

  it('opens the panel on click only once that command exists', () => {
    const env = setup();
    view = env.view;
    Widget.attach(view!, document.body);
    view!.node.click();
    const execute = jest.fn();
    env.commands.addCommand(CommandIDs.openPanel, { execute });
    view!.node.click();
    expect(execute).toHaveBeenCalledTimes(1);
  });
});
