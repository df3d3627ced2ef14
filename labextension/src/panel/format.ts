import { TranslationBundle } from '@jupyterlab/translation';

import { formatDuration, formatMoney, moneyColumnDigits } from '../format';
import { IKernelCost, IKernelsAnswer, IRightsizing } from './types';

/**
 * A kernel's share of the GPUs: `GPU 0 75%, GPU 1 10%`, or `—`.
 */
export function formatShare(share: IKernelCost['gpu_share']): string {
  const parts = Object.entries(share)
    .filter(([, value]) => Number.isFinite(value) && value > 0)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([index, value]) => `GPU ${index} ${Math.round(value * 100)}%`);
  return parts.length ? parts.join(', ') : '—';
}

/**
 * How a kernel's share was made, in words: `by SM samples`, or `—` when unknown.
 * Several GPUs split different ways give each way once, in GPU order.
 */
export function formatShareBy(
  by: IKernelCost['gpu_share_by'],
  trans: TranslationBundle
): string {
  const words: { [method: string]: string } = {
    sm_samples: trans.__('by SM samples'),
    kernel_gpu_time: trans.__("by the kernel's own GPU time"),
    memory: trans.__('by memory'),
    even: trans.__('even')
  };
  const said = Object.entries(by ?? {})
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([, method]) => words[method] ?? method);
  const unique = said.filter((text, i) => said.indexOf(text) === i);
  return unique.length ? unique.join(', ') : '—';
}

/**
 * One row of the kernel table.
 */
export interface IKernelRow {
  key: string;
  /** The notebook's path, or the kernel's name when no notebook is known. */
  label: string;
  state: string;
  uptime: string;
  share: string;
  /** How the share was made (`by SM samples`, …), or `—`. */
  shareBy: string;
  cost: string;
  /**
   * The machine's cost while the kernel's cells ran (`—` with no priced cell),
   * empty on the rows of no notebook.
   */
  cellsCost: string;
  /** `kernel`, or one of the two rows that complete the total. */
  kind: 'kernel' | 'unattributed' | 'minimum' | 'idle';
  title: string;
}

/**
 * `GPU 0: 3000101` for each GPU a kernel identified its host pids on; empty
 * when it identified none (or the server does not say).
 */
function hostPids(
  pids: { [index: string]: number[] } | undefined,
  trans: TranslationBundle
): string {
  return Object.entries(pids ?? {})
    .filter(([, list]) => list.length > 0)
    .map(([index, list]) => trans.__('GPU %1: %2', index, list.join(', ')))
    .join('; ');
}

/**
 * The decimals of the kernel table's Cost column, its total included: one
 * number of decimals for every amount in it (`moneyColumnDigits`).
 */
export function kernelCostDigits(answer: IKernelsAnswer): 2 | 4 {
  const minimum = (answer.micro?.minimum_charge ?? 0) / 1e6;
  return moneyColumnDigits([
    ...answer.kernels.map(kernel => kernel.cost),
    answer.unattributed,
    answer.unattributed - minimum,
    minimum,
    answer.idle,
    answer.total
  ]);
}

/**
 * The kernel table: one row per kernel (most expensive first), then the
 * unattributed and idle rows, which together with the kernels make the total.
 * Without a metered GPU (`metered` false) there is no GPU cost to share: the
 * kernels are listed with no share and no cost, and the GPU rows are left out.
 */
export function kernelRows(
  answer: IKernelsAnswer,
  symbol: string,
  trans: TranslationBundle,
  metered = true
): IKernelRow[] {
  const digits = kernelCostDigits(answer);
  // the machine-while-cells-ran column has its own amounts, so its own decimals
  const cellsDigits = moneyColumnDigits(
    answer.kernels.map(kernel => kernel.cells_cost ?? 0)
  );
  const rows: IKernelRow[] = [...answer.kernels]
    .sort((a, b) => b.cost - a.cost || a.id.localeCompare(b.id))
    .map(kernel => ({
      key: kernel.id,
      label: kernel.notebook_path ?? kernel.name,
      state: kernel.remote
        ? trans.__('%1 (remote)', kernel.execution_state)
        : kernel.execution_state,
      uptime: formatDuration(kernel.uptime_s),
      share: !metered
        ? '—'
        : kernel.remote
          ? trans.__('n/a')
          : formatShare(kernel.gpu_share),
      shareBy:
        metered && !kernel.remote
          ? formatShareBy(kernel.gpu_share_by, trans)
          : '—',
      cost: metered ? formatMoney(kernel.cost, symbol, digits) : '—',
      cellsCost:
        kernel.cells && kernel.cells_cost !== undefined
          ? formatMoney(kernel.cells_cost, symbol, cellsDigits)
          : '—',
      kind: 'kernel' as const,
      title: kernel.remote
        ? trans.__(
            'Kernel %1 runs elsewhere: its GPU use cannot be attributed.',
            kernel.id
          )
        : hostPids(kernel.gpu_host_pids, trans)
          ? trans.__(
              'Kernel %1 (%2), processes %3; its GPU processes as the driver lists them (host pids): %4',
              kernel.id,
              kernel.name,
              kernel.pids.join(', ') || '—',
              hostPids(kernel.gpu_host_pids, trans)
            )
          : trans.__(
              'Kernel %1 (%2), processes %3',
              kernel.id,
              kernel.name,
              kernel.pids.join(', ') || '—'
            )
    }));
  if (!metered) {
    return rows;
  }
  // the billing rule's part (the minimum charge) is named as such, not as GPU
  // use by no kernel; exact in micro-units where the server gives them
  const micro = answer.micro;
  const minimumMicro = micro?.minimum_charge ?? 0;
  const unattributed =
    micro && minimumMicro > 0
      ? (micro.unattributed - minimumMicro) / 1_000_000
      : answer.unattributed;
  // nothing but the minimum charge: no row of GPU use by no kernel at all
  const onlyMinimum = minimumMicro > 0 && micro?.unattributed === minimumMicro;
  rows.push({
    key: 'unattributed',
    label: trans.__('Not attributed to a kernel'),
    state: '',
    uptime: '',
    share: '',
    shareBy: '',
    cellsCost: '',
    cost: formatMoney(unattributed, symbol, digits),
    kind: 'unattributed',
    title: trans.__(
      'GPU time used by processes that belong to no kernel of this server (or that could not be matched).'
    )
  });
  const others = answer.other_processes ?? [];
  if (others.length > 0) {
    // kernels identify their GPU processes (a container): name the others
    rows[rows.length - 1].label = trans.__('Not from these kernels');
    rows[rows.length - 1].title = trans.__(
      "GPU processes no kernel of this server identified as its own (other containers' processes, processes a kernel started): %1",
      others.map(o => trans.__('GPU %1 pid %2', o.gpu, o.host_pid)).join(', ')
    );
  }
  if (onlyMinimum) {
    rows.pop();
  }
  if (minimumMicro > 0) {
    rows.push({
      key: 'minimum',
      label: trans.__('Minimum charge'),
      state: '',
      uptime: '',
      share: '',
      shareBy: '',
      cellsCost: '',
      cost: formatMoney(minimumMicro / 1_000_000, symbol, digits),
      kind: 'minimum',
      title: trans.__(
        'What the billing rule adds to the time the GPUs were held (its minimum charge and rounding): billed whether or not anything ran.'
      )
    });
  }
  rows.push({
    key: 'idle',
    label: trans.__('Idle GPUs'),
    state: '',
    uptime: '',
    share: '',
    shareBy: '',
    cellsCost: '',
    cost: formatMoney(answer.idle, symbol, digits),
    kind: 'idle',
    title: trans.__('Paid while the GPUs did nothing.')
  });
  return rows;
}

/**
 * Whether the kernel table has GPU cost to show: a GPU is metered, or GPU
 * cost was counted (GPUs lost since still show what they cost).
 */
export function gpuMetered(gpus: number, answer: IKernelsAnswer): boolean {
  return gpus > 0 || answer.total > 0;
}

/**
 * The right-sizing advice as a sentence, or `null` when there is none.
 */
export function rightsizingText(
  advice: IRightsizing | null | undefined,
  symbol: string,
  trans: TranslationBundle
): string | null {
  if (!advice) {
    return null;
  }
  const article = /^[AEFHILMNORSX8]/i.test(advice.model) ? 'an' : 'a';
  return trans.__(
    '%1 %2 would have cost %3 instead of %4.',
    article === 'an' ? trans.__('An') : trans.__('A'),
    advice.model,
    formatMoney(advice.cost, symbol),
    formatMoney(advice.instead_of, symbol)
  );
}
