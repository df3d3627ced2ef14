import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Clipboard,
  Dialog,
  Notification,
  showDialog
} from '@jupyterlab/apputils';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { Widget } from '@lumino/widgets';

import { trans } from '../i18n';
import { IGpuCostModel } from '../tokens';
import {
  describePaths,
  endText,
  isExportable,
  missingDefaultTarget,
  missingTargetText,
  progressText,
  targetLabel,
  targetWithoutAsking
} from './format';
import {
  cancelExport,
  getExport,
  IExportJob,
  IExportTarget,
  listExports,
  startExport
} from './request';

export * from './format';
export * from './request';

/**
 * The export command's id.
 */
export const EXPORT_COMMAND = 'gpucost:export';

/**
 * How often a running export is asked for its progress (ms).
 */
export const EXPORT_POLL_MS = 500;

/**
 * The body of the target picker: a select of the configured targets.
 */
export class TargetPicker extends Widget {
  constructor(targets: IExportTarget[], selected: string, note = '') {
    super();
    this.addClass('jp-gpucost-export-picker');
    if (note) {
      const paragraph = document.createElement('p');
      paragraph.className = 'jp-gpucost-export-picker-note';
      paragraph.textContent = note;
      this.node.appendChild(paragraph);
    }
    const label = document.createElement('label');
    label.textContent = trans().__('Export to') + ' ';
    this._select = document.createElement('select');
    this._select.className = 'jp-mod-styled';
    this._select.setAttribute('aria-label', trans().__('Export target'));
    for (const target of targets) {
      const option = document.createElement('option');
      option.value = target.name;
      option.textContent = `${target.label || target.name} (${target.url})`;
      option.selected = target.name === selected;
      this._select.appendChild(option);
    }
    label.appendChild(this._select);
    this.node.appendChild(label);
  }

  /**
   * The chosen target's name (read by the dialog).
   */
  getValue(): string {
    return this._select.value;
  }

  private _select: HTMLSelectElement;
}

/**
 * Follow a job with a notification until it ends: progress with a Cancel
 * button, then the destination with a Copy button, or the error.
 */
export async function followExport(
  settings: ServerConnection.ISettings,
  job: IExportJob,
  pollMs = EXPORT_POLL_MS
): Promise<IExportJob> {
  let cancelled = false;
  const cancelAction = {
    label: trans().__('Cancel'),
    caption: trans().__('Stop the export and remove what it wrote'),
    callback: (event: Event) => {
      event.preventDefault(); // keep the notification: it shows the outcome
      cancelled = true;
      cancelExport(settings, job.id).catch(reason => {
        Notification.error(
          trans().__(
            'Could not cancel the export of %1: %2',
            describePaths(job.paths),
            String(reason instanceof Error ? reason.message : reason)
          )
        );
      });
    }
  };
  const id = Notification.emit(progressText(job), 'in-progress', {
    autoClose: false,
    progress: job.progress,
    actions: [cancelAction]
  });
  let current = job;
  while (!['done', 'failed', 'cancelled'].includes(current.state)) {
    await new Promise(resolve => setTimeout(resolve, pollMs));
    try {
      current = await getExport(settings, job.id);
    } catch (reason) {
      Notification.update({
        id,
        message: trans().__(
          'Lost track of the export of %1: %2',
          describePaths(job.paths),
          String(reason instanceof Error ? reason.message : reason)
        ),
        type: 'error',
        autoClose: false,
        actions: []
      });
      throw reason;
    }
    if (!['done', 'failed', 'cancelled'].includes(current.state)) {
      Notification.update({
        id,
        message: cancelled
          ? trans().__('Cancelling the export of %1…', describePaths(job.paths))
          : progressText(current),
        type: 'in-progress',
        progress: current.progress,
        autoClose: false,
        actions: cancelled ? [] : [cancelAction]
      });
    }
  }
  const message = endText(current);
  if (current.state === 'done') {
    const address = current.results.map(r => r.url).join('\n');
    Notification.update({
      id,
      message,
      type: 'success',
      autoClose: false,
      actions: [
        {
          label: trans().__('Copy address'),
          caption: address,
          callback: (event: Event) => {
            event.preventDefault();
            Clipboard.copyToSystem(address);
          }
        }
      ]
    });
  } else {
    Notification.update({
      id,
      message,
      type: current.state === 'failed' ? 'error' : 'info',
      autoClose: current.state === 'failed' ? false : 10000,
      actions: []
    });
  }
  return current;
}

/**
 * "Export to …" in the file browser's context menu: checkpoints
 * (.pt .pth .ckpt .safetensors .bin) and folders.
 */
export const exportPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpucost:export',
  description:
    'Exports checkpoints and folders from the file browser to object storage, with progress.',
  autoStart: true,
  requires: [IFileBrowserFactory],
  // after the model's plugin, which loads the extension's translations
  optional: [ISettingRegistry, IGpuCostModel],
  activate: (
    app: JupyterFrontEnd,
    factory: IFileBrowserFactory,
    settingRegistry: ISettingRegistry | null,
    _model?: IGpuCostModel | null
  ): void => {
    const services = app.serviceManager;
    let preferred = '';
    let targets: IExportTarget[] = [];

    const refreshTargets = async (): Promise<IExportTarget[]> => {
      const payload = await listExports(services.serverSettings);
      targets = payload.targets;
      return targets;
    };
    // the label names the target when it is known without asking
    void refreshTargets().catch(() => undefined);

    const selected = (): { path: string; type: string; name: string }[] => {
      const browser = factory.tracker.currentWidget;
      if (!browser) {
        return [];
      }
      return Array.from(browser.selectedItems()).map(item => ({
        path: services.contents.localPath(item.path),
        type: item.type,
        name: item.name
      }));
    };

    app.commands.addCommand(EXPORT_COMMAND, {
      label: () => {
        const chosen = targetWithoutAsking(targets, preferred);
        return chosen
          ? trans().__('Export to %1', targetLabel(targets, chosen))
          : trans().__('Export to…');
      },
      caption: () =>
        trans().__(
          'Copy to object storage, with a manifest (sha256, what the session cost)'
        ),
      isVisible: () => {
        const items = selected();
        return items.length > 0 && items.every(isExportable);
      },
      execute: async args => {
        const paths =
          Array.isArray(args.paths) && args.paths.length
            ? (args.paths as string[])
            : selected().map(item => item.path);
        if (!paths.length) {
          return;
        }
        try {
          await refreshTargets();
        } catch (reason) {
          Notification.error(
            trans().__(
              'Cannot export: %1',
              reason instanceof Error ? reason.message : String(reason)
            )
          );
          return;
        }
        let target =
          typeof args.target === 'string'
            ? args.target
            : targetWithoutAsking(targets, preferred);
        if (target === null) {
          if (!targets.length) {
            Notification.error(
              trans().__(
                'Cannot export: the server has no export target configured.'
              )
            );
            return;
          }
          const serverDefault =
            targets.find(t => t.default)?.name ?? targets[0].name;
          const missing =
            typeof args.target === 'string'
              ? null
              : missingDefaultTarget(targets, preferred);
          const result = await showDialog({
            title: trans().__('Export %1', describePaths(paths)),
            body: new TargetPicker(
              targets,
              serverDefault,
              missing ? missingTargetText(targets, missing) : ''
            ),
            buttons: [
              Dialog.cancelButton(),
              Dialog.okButton({ label: trans().__('Export') })
            ]
          });
          if (!result.button.accept || !result.value) {
            return;
          }
          target = result.value;
        }
        let job: IExportJob;
        try {
          job = await startExport(services.serverSettings, paths, target);
        } catch (reason) {
          Notification.error(
            trans().__(
              'Cannot export %1: %2',
              describePaths(paths),
              reason instanceof Error ? reason.message : String(reason)
            ),
            { autoClose: false }
          );
          return;
        }
        return followExport(services.serverSettings, job);
      }
    });

    if (settingRegistry) {
      settingRegistry
        .load(exportPlugin.id)
        .then(settings => {
          const apply = (): void => {
            const value = settings.get('defaultTarget').composite;
            preferred = typeof value === 'string' ? value : '';
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => {
          console.error('jupyter-gpucost: export settings not loaded', reason);
        });
    }
  }
};
