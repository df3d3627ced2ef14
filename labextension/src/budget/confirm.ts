import { Dialog, showDialog } from '@jupyterlab/apputils';

import { trans } from '../i18n';

/**
 * What a manual stop stops: the cloud machine, or the Jupyter server.
 */
export type StopAction = 'stop-instance' | 'stop-server';

/**
 * Ask before a manual stop ("Stop server", "Stop machine", and their "when
 * done"): what happens, with **Cancel** focused. `true` when the user
 * confirms; Cancel, Escape or closing the dialog start nothing.
 */
export async function confirmStop(
  action: StopAction,
  when: 'now' | 'idle' = 'now'
): Promise<boolean> {
  const machine = action === 'stop-instance';
  const title = machine
    ? trans().__('Stop this machine?')
    : trans().__('Stop this server?');
  const what = machine
    ? trans().__('the machine stops and its GPUs stop billing')
    : trans().__('the server stops and its kernels end');
  const body =
    when === 'idle'
      ? trans().__(
          'When the running cells end (finished or failed), a countdown you can cancel starts; at its end the notebooks are saved and the checkpoints exported, then %1.',
          what
        )
      : trans().__(
          'A countdown you can cancel starts now; at its end the notebooks are saved and the checkpoints exported, then %1.',
          what
        );
  const label = machine
    ? when === 'idle'
      ? trans().__('Stop machine when done')
      : trans().__('Stop machine')
    : when === 'idle'
      ? trans().__('Stop server when done')
      : trans().__('Stop server');
  const result = await showDialog({
    title,
    body,
    buttons: [
      Dialog.cancelButton({ label: trans().__('Cancel') }),
      Dialog.warnButton({ label })
    ],
    // Enter does not stop anything by accident
    defaultButton: 0
  });
  return result.button.accept;
}
