import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';

import { IGpuCostStatus } from './tokens';

/**
 * Amounts under this are shown with four decimals, so a fresh session
 * visibly rises.
 */
export const SMALL_AMOUNT = 0.1;

/**
 * The currency symbol to print before amounts.
 */
export function currencySymbol(
  status: Pick<IGpuCostStatus, 'currency' | 'currency_symbol'>
): string {
  if (status.currency_symbol) {
    return status.currency_symbol;
  }
  return status.currency ? `${status.currency} ` : '$';
}

/*
 * The one place where amounts, rates, durations, countdowns, bytes, energy and
 * CO2 are written for people; every view (status items, top bar, panel,
 * badges, budget, export) uses these.
 */

/**
 * Format an amount of money: two decimals, or four under $0.10.
 *
 * `formatMoney(1.234, '$')` is `$1.23`, `formatMoney(0.01234, '$')` is
 * `$0.0123`.
 */
export function formatMoney(amount: number, symbol: string): string {
  if (!Number.isFinite(amount)) {
    return `${symbol}—`;
  }
  const magnitude = Math.abs(amount);
  const digits = Number(magnitude.toFixed(4)) < SMALL_AMOUNT ? 4 : 2;
  const sign = amount < 0 && Number(magnitude.toFixed(digits)) > 0 ? '-' : '';
  return `${sign}${symbol}${Private.fixed(magnitude, digits)}`;
}

/**
 * Format an hourly rate with two decimals, e.g. `$6.86/h`.
 */
export function formatRate(
  ratePerHour: number,
  symbol: string,
  trans: TranslationBundle = nullTranslator.load('jupyter_gpucost')
): string {
  const amount = Number.isFinite(ratePerHour)
    ? `${ratePerHour < 0 ? '-' : ''}${symbol}${Private.fixed(Math.abs(ratePerHour), 2)}`
    : `${symbol}—`;
  return trans.__('%1/h', amount);
}

/**
 * A duration: `42 s`, `5 min 03 s`, `2 h 07 min`, `3 d 4 h`; `—` when not known.
 *
 * With `fraction`, durations under a minute keep decimals (`3.20 s`, `42.4 s`):
 * what a cell took.
 */
export function formatDuration(
  seconds: number | null | undefined,
  fraction = false
): string {
  if (
    seconds === null ||
    seconds === undefined ||
    !Number.isFinite(seconds) ||
    seconds < 0
  ) {
    return '—';
  }
  const pad = (n: number): string => String(n).padStart(2, '0');
  if (fraction && seconds < 10) {
    return `${seconds.toFixed(2)} s`;
  }
  if (fraction && seconds < 59.95) {
    return `${seconds.toFixed(1)} s`;
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s} s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min ${pad(s % 60)} s`;
  }
  if (s < 86400) {
    return `${Math.floor(s / 3600)} h ${pad(Math.floor((s % 3600) / 60))} min`;
  }
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/**
 * A countdown: `1:05` from 65 seconds (rounded up, never negative).
 */
export function formatCountdown(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/**
 * Bytes in binary units: `512 B`, `1.50 KiB`, `12.3 GiB`, `150 MiB`; `—` when
 * not known.
 */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) {
    return '—';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = Math.max(0, bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) {
    return `${Math.round(value)} B`;
  }
  return `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[unit]}`;
}

/**
 * Energy from joules: Wh under a kilowatt-hour, else kWh.
 */
export function formatEnergy(joules: number | null | undefined): string {
  if (joules === null || joules === undefined || !Number.isFinite(joules)) {
    return '—';
  }
  const wh = joules / 3600;
  return wh < 1000 ? `${wh.toFixed(1)} Wh` : `${(wh / 1000).toFixed(2)} kWh`;
}

/**
 * A mass of CO2: grams under a kilogram, else kilograms.
 */
export function formatCo2(grams: number | null | undefined): string {
  if (grams === null || grams === undefined || !Number.isFinite(grams)) {
    return '—';
  }
  return grams < 1000
    ? `${grams.toFixed(grams < 10 ? 1 : 0)} g`
    : `${(grams / 1000).toFixed(2)} kg`;
}

/**
 * Module-private helpers.
 */
namespace Private {
  /**
   * A non-negative number with fixed decimals and thousands separators.
   */
  export function fixed(value: number, digits: number): string {
    const [whole, decimals] = value.toFixed(digits).split('.');
    const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
    return decimals === undefined ? grouped : `${grouped}.${decimals}`;
  }
}
