import { JupyterFrontEnd } from '@jupyterlab/application';
import { Event } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import {
  CommandIDs,
  modelPlugin,
  statusPlugin as plugin,
  topBarPlugin
} from '../index';
import { setTranslator } from '../i18n';
import { GpuCostModel } from '../model';
import { CostPanelModel } from '../panel/model';
import { CostPanel } from '../panel/view';
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
    expect(env.model.status?.cost).toBe(makeStatus().cost);
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

describe("the extension's messages", () => {
  /** A translator marking every message it translates: «message». */
  function markingTranslator(): ITranslator {
    const fill = (text: string, args: unknown[]): string =>
      args.reduce<string>(
        (out, arg, i) => out.split(`%${i + 1}`).join(String(arg)),
        text
      );
    const bundle = {
      __: (msg: string, ...args: unknown[]) => `«${fill(msg, args)}»`,
      _n: (one: string, many: string, n: number, ...args: unknown[]) =>
        `«${fill(n === 1 ? one : many, [n, ...args])}»`,
      _p: (_ctx: string, msg: string, ...args: unknown[]) =>
        `«${fill(msg, args)}»`
    } as unknown as TranslationBundle;
    return {
      languageCode: 'en',
      load: jest.fn(() => bundle)
    } as unknown as ITranslator;
  }

  afterEach(() => setTranslator(nullTranslator));

  it('are loaded once, by the model plugin, and read by every view', async () => {
    const translator = markingTranslator();
    const env = setup();
    const model = modelPlugin.activate(
      env.app,
      null,
      translator
    ) as IGpuCostModel;
    models.push(model);
    expect(translator.load).toHaveBeenCalledTimes(1);
    expect(translator.load).toHaveBeenCalledWith('jupyter_gpucost');
    // views made after it take no translator of their own
    const item = new GpuCostTopBarItem({ model });
    Widget.attach(item, document.body);
    (model as GpuCostModel).stateChanged.emit();
    await new Promise(resolve => requestAnimationFrame(resolve));
    expect(item.node.title).toContain('«Click for the cost panel.»');
    const panel = new CostPanel(new CostPanelModel({ autoStart: false }));
    expect(panel.title.label).toBe('«GPU Cost»');
    expect(translator.load).toHaveBeenCalledTimes(1);
    panel.dispose();
    item.dispose();
  });
});
