import { formatLocalTime } from '../budget/format';
import {
  formatBytes,
  formatDuration,
  formatMoney,
  formatRate
} from '../format';
import { trans } from '../i18n';
import { ICellCost } from '../panel/types';

/**
 * The cells route, relative to the server's base URL.
 */
export const CELLS_ROUTE = 'gpucost/api/cells';

/**
 * A cell's cost as the server keeps it (`GET /gpucost/api/cells`): what the
 * panel lists, and how it was priced.
 */
export interface ICellRecord extends ICellCost {
  cpu_s?: number | null;
  rate_usd_per_hour?: number | null;
}

/**
 * Money as the badge shows it: the one money format (four decimals under 10
 * cents, else two, thousands separated).
 */
export function badgeMoney(usd: number, symbol: string): string {
  return formatMoney(usd, symbol);
}

/**
 * Seconds as the badge shows them: the one duration format, with decimals
 * under a minute.
 */
export function badgeSeconds(seconds: number): string {
  return formatDuration(seconds, true);
}

/**
 * The badge's text: `$0.0012 · 3.20 s · GPU 2.95 s · peak 1.20 GiB`.
 */
export function badgeText(record: ICellRecord, symbol: string): string {
  const parts = [
    badgeMoney(record.cost_usd, symbol),
    badgeSeconds(record.wall_s)
  ];
  const busy = Object.values(record.gpu_busy_s ?? {});
  if (busy.length) {
    parts.push(trans().__('GPU %1', badgeSeconds(Math.max(...busy))));
  }
  if (record.peak_memory_bytes) {
    parts.push(trans().__('peak %1', formatBytes(record.peak_memory_bytes)));
  }
  if (record.status !== 'ok') {
    parts.push(
      record.status === 'error'
        ? trans().__('error')
        : record.status === 'interrupted'
          ? trans().__('interrupted')
          : record.status
    );
  }
  return parts.join(' · ');
}

/**
 * The badge's tooltip: how the figure was made.
 */
export function badgeTitle(record: ICellRecord, symbol: string): string {
  const cost = badgeMoney(record.cost_usd, symbol);
  const wall = badgeSeconds(record.wall_s);
  const ended = formatLocalTime(record.ended, Date.now(), { seconds: true });
  const lines = [
    record.rate_usd_per_hour !== null && record.rate_usd_per_hour !== undefined
      ? trans().__(
          "This cell cost %1: %2 of wall time at %3 (the kernel's GPUs and the instance)",
          cost,
          wall,
          formatRate(record.rate_usd_per_hour, symbol, trans())
        )
      : trans().__('This cell cost %1: %2 of wall time', cost, wall),
    trans().__(
      'Ended %1 (%2)',
      ended,
      record.mode === 'magic' ? '%%gpucost' : '%gpucost auto'
    )
  ];
  for (const [index, seconds] of Object.entries(record.gpu_busy_s ?? {})) {
    lines.push(
      trans().__(
        "GPU %1: %2 between the cell's CUDA events",
        index,
        badgeSeconds(seconds)
      )
    );
  }
  if (record.energy_j) {
    lines.push(trans().__('Energy: %1 J', record.energy_j.toFixed(1)));
  }
  return lines.join('\n');
}

/**
 * What a cell's source says about auto mode: `on`, `off` or nothing.
 */
export function autoSwitch(source: string): 'on' | 'off' | null {
  const matches = Array.from(
    source.matchAll(/^\s*%gpucost\s+auto\s+(on|off)\b/gm)
  );
  if (!matches.length) {
    return null;
  }
  return matches[matches.length - 1][1] as 'on' | 'off';
}

/**
 * The code the notebook runs (silently) to switch auto mode.
 */
export function autoCode(on: boolean): string {
  return [
    'get_ipython().run_line_magic("load_ext", "jupyter_gpucost")',
    `get_ipython().run_line_magic("gpucost", "auto ${on ? 'on' : 'off'}")`
  ].join('\n');
}

/**
 * The name of the user expression that reads whether the kernel prices
 * every cell.
 */
export const AUTO_STATE_KEY = 'gpucost_auto';

/**
 * The expression the notebook asks the kernel (silently, as a user
 * expression: no cell runs, nothing is priced) to learn whether
 * `%gpucost auto` is on: `True` or `False`.
 */
export const AUTO_STATE_EXPRESSION =
  'bool(getattr(getattr(get_ipython(), "gpucost_auto", None), "enabled", False))';

/**
 * Whether the kernel prices every cell, from the content of the reply to a
 * request that asked `AUTO_STATE_EXPRESSION`; `null` when the reply does
 * not tell (an error, another kind of kernel).
 */
export function autoStateOf(content: {
  status: string;
  user_expressions?: { [key: string]: unknown };
}): boolean | null {
  if (content.status !== 'ok') {
    return null;
  }
  const answer = content.user_expressions?.[AUTO_STATE_KEY] as
    { status?: string; data?: { [mime: string]: unknown } } | undefined;
  if (!answer || answer.status !== 'ok') {
    return null;
  }
  const text = answer.data?.['text/plain'];
  return text === 'True' ? true : text === 'False' ? false : null;
}
