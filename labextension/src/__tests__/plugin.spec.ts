import { JupyterFrontEnd } from '@jupyterlab/application';
import { Event } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import {
  CommandIDs,
  modelPlugin,
  statusPlugin as plugin,
  topBarPlugin
} from '../index';
import { GpuCostModel } from '../model';
import { IGpuCostModel } from '../tokens';
import { GpuCostTopBarItem } from '../topbar';
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

let models: IGpuCostModel[] = [];

function setup(withStatusBar = true) {
  const server = fakeServer([{ status: 200, body: makeStatus() }]);
  const commands = new CommandRegistry();
  const stream = new Signal<unknown, Event.Emission>({});
  const app = {
    commands,
    serviceManager: { serverSettings: server.settings, events: { stream } }
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
  const model = modelPlugin.activate(app, settingRegistry) as IGpuCostModel;
  models.push(model);
  void plugin.activate(app, model, withStatusBar ? statusBar : null, null);
  const view = registered[0]?.options.item as GpuCostStatus | undefined;
  return { server, commands, registered, settings, view, model, app };
}

afterEach(() => {
  for (const model of models) {
    model.dispose();
  }
  models = [];
});

describe('jupyter-gpucost:plugin (the shared model)', () => {
  it('provides the one model and needs nothing', () => {
    expect(modelPlugin.id).toBe('jupyter-gpucost:plugin');
    expect(modelPlugin.autoStart).toBe(true);
    expect(modelPlugin.provides).toBe(IGpuCostModel);
    expect(modelPlugin.requires ?? []).toEqual([]);
  });

  it('applies the fallback poll interval setting, and its changes', async () => {
    const env = setup();
    await Promise.resolve();
    await Promise.resolve();
    expect(env.model.intervalSeconds).toBe(5);
    env.settings.set(30);
    expect(env.model.intervalSeconds).toBe(30);
  });

  it('asks the server once at load, then waits for the pushes', async () => {
    const env = setup(false);
    await new Promise(resolve => setTimeout(resolve, 100));
    expect(env.server.urls).toHaveLength(1);
    expect(env.model.status?.cost_usd).toBe(makeStatus().cost_usd);
  });
});

describe('jupyter-gpucost:status-item', () => {
  it('requires the shared model; the status bar is optional', () => {
    expect(plugin.requires).toEqual([IGpuCostModel]);
    expect(plugin.optional).toContain(IStatusBar);
  });

  it('puts the item on the left of the status bar', async () => {
    const env = setup();
    expect(env.registered).toHaveLength(1);
    expect(env.registered[0].options.align).toBe('left');
    expect(env.view).toBeInstanceOf(GpuCostStatus);
    expect(env.view!.id).toBe('jp-gpucost-status');
    expect(env.view!.model).toBe(env.model);
  });

  it('shows nothing without a status bar (Notebook 7 has the top bar)', async () => {
    const env = setup(false);
    expect(env.registered).toHaveLength(0);
  });

  it('opens the panel on click only once that command exists', () => {
    const env = setup();
    const view = env.view!;
    Widget.attach(view, document.body);
    view.node.click();
    const execute = jest.fn();
    env.commands.addCommand(CommandIDs.openPanel, { execute });
    view.node.click();
    expect(execute).toHaveBeenCalledTimes(1);
    view.dispose();
  });
});

describe('jupyter-gpucost:top-bar', () => {
  function topBar(labShell: boolean) {
    const env = setup(false);
    const factories: { [name: string]: () => Widget } = {};
    const registry = {
      addFactory: (toolbar: string, name: string, factory: () => Widget) => {
        expect(toolbar).toBe('TopBar');
        factories[name] = factory;
        return undefined;
      }
    };
    const settings = {
      get: () => ({ composite: false }),
      changed: new Signal<unknown, unknown>({})
    };
    const settingRegistry = {
      load: async () => settings
    } as unknown as ISettingRegistry;
    void topBarPlugin.activate(
      env.app,
      env.model,
      registry,
      labShell ? {} : null,
      settingRegistry,
      null
    );
    return { ...env, factories };
  }

  it('adds a TopBar item that shows the cost in Notebook 7 (no ILabShell)', async () => {
    const env = topBar(false);
    const item = env.factories['gpucost']() as GpuCostTopBarItem;
    expect(item).toBeInstanceOf(GpuCostTopBarItem);
    Widget.attach(item, document.body);
    await new Promise(resolve => setTimeout(resolve, 50));
    (env.model as GpuCostModel).stateChanged.emit();
    await new Promise(resolve => requestAnimationFrame(resolve));
    expect(item.isHidden).toBe(false);
    expect(item.node.textContent).toContain('$2.83');
    const execute = jest.fn();
    env.commands.addCommand(CommandIDs.openPanel, { execute });
    item.node.click();
    expect(execute).toHaveBeenCalledTimes(1);
    item.dispose();
  });

  it('is hidden in JupyterLab unless its setting asks for it', async () => {
    const env = topBar(true);
    const item = env.factories['gpucost']();
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(item.isHidden).toBe(true);
    item.dispose();
  });
});
