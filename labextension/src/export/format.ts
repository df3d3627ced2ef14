import { formatBytes, formatDuration } from '../format';
import { trans } from '../i18n';
import { IExportJob, IExportTarget } from './request';

/**
 * File extensions the export is offered on (folders always).
 */
export const CHECKPOINT_EXTENSIONS = [
  '.pt',
  '.pth',
  '.ckpt',
  '.safetensors',
  '.bin'
];

/**
 * Whether the file browser offers the export on an item.
 */
export function isExportable(item: { type: string; name: string }): boolean {
  if (item.type === 'directory') {
    return true;
  }
  const name = item.name.toLowerCase();
  return CHECKPOINT_EXTENSIONS.some(ext => name.endsWith(ext));
}

/**
 * What is being exported, in a few words: `model.pt` or `model.pt and 2 more`.
 */
export function describePaths(paths: string[]): string {
  const names = paths.map(p => p.split('/').pop() || p);
  if (names.length <= 1) {
    return names[0] ?? '';
  }
  return trans().__('%1 and %2 more', names[0], names.length - 1);
}

/**
 * The target's name as the user sees it.
 */
export function targetLabel(targets: IExportTarget[], name: string): string {
  const target = targets.find(t => t.name === name);
  return target ? target.label || target.name : name;
}

/**
 * The progress line of a running job.
 */
export function progressText(job: IExportJob): string {
  const what = describePaths(job.paths);
  if (job.state === 'queued') {
    return trans().__(
      'Export of %1 is waiting for another export to finish',
      what
    );
  }
  const parts = [
    `${Math.floor(job.progress * 100)}%`,
    trans().__(
      '%1 of %2',
      formatBytes(job.bytes_done),
      formatBytes(job.bytes_total)
    )
  ];
  if (job.rate_bytes_per_s) {
    parts.push(`${formatBytes(job.rate_bytes_per_s)}/s`);
  }
  if (job.eta_s !== null && job.eta_s !== undefined) {
    parts.push(trans().__('%1 left', formatDuration(job.eta_s)));
  }
  return trans().__(
    'Exporting %1 to %2: %3',
    what,
    job.target,
    parts.join(' · ')
  );
}

/**
 * The line shown when a job has ended.
 */
export function endText(job: IExportJob): string {
  const what = describePaths(job.paths);
  switch (job.state) {
    case 'done':
      return trans().__(
        'Exported %1 to %2',
        what,
        job.results.map(r => r.url).join(', ')
      );
    case 'cancelled':
      return trans().__(
        'Export of %1 cancelled: nothing was left at %2',
        what,
        job.target_url
      );
    case 'failed':
      return trans().__(
        'Export of %1 failed: %2',
        what,
        job.error ?? trans().__('unknown error')
      );
    default:
      return progressText(job);
  }
}

/**
 * The target to use without asking: the user's setting if it is a
 * configured target, else the only one when nothing is set; `null` when the
 * user must pick (a set target that the server does not have is never
 * swapped for another without saying so: see `missingDefaultTarget`).
 */
export function targetWithoutAsking(
  targets: IExportTarget[],
  preferred: string
): string | null {
  if (preferred) {
    return targets.some(t => t.name === preferred) ? preferred : null;
  }
  if (targets.length === 1) {
    return targets[0].name;
  }
  return null;
}

/**
 * The target named in the settings when the server has no such target,
 * else `null`.
 */
export function missingDefaultTarget(
  targets: IExportTarget[],
  preferred: string
): string | null {
  return preferred && !targets.some(t => t.name === preferred)
    ? preferred
    : null;
}

/**
 * What the picker says when the target of the settings does not exist.
 */
export function missingTargetText(
  targets: IExportTarget[],
  missing: string
): string {
  const available = targets.map(t => t.name).join(', ');
  return targets.length === 1
    ? trans().__(
        'The export target "%1" set in the settings (GPU Cost: checkpoint export → Export target) is not a target of this server (its target is %2): pick one.',
        missing,
        available
      )
    : trans().__(
        'The export target "%1" set in the settings (GPU Cost: checkpoint export → Export target) is not a target of this server (its targets are %2): pick one.',
        missing,
        available
      );
}
