import { TranslationBundle } from '@jupyterlab/translation';

import { trans as extensionTrans } from './i18n';

import { IGpuCostStatus } from './tokens';

/**
 * Amounts under this are shown with four decimals, so a fresh session
 * visibly rises.
 */
export const SMALL_AMOUNT = 0.1;

/**
 * The smallest amount spent that is written out: a smaller one, not zero, is
 * `< $0.0001`, never `$0.0000`.
 */
export const SMALLEST_SHOWN = 0.0001;

/**
 * The currency symbol to print before amounts: the admin's symbol when one is
 * set, else the currency's symbol in the UI's language (`Intl.NumberFormat`):
 * `CN¥` in English, `¥` in Chinese, `€`, `$`.
 */
export function currencySymbol(
  status: Pick<IGpuCostStatus, 'currency' | 'currency_symbol'>
): string {
  const code = status.currency;
  if (code) {
    const english = Private.intlSymbol(code, 'en');
    // the server sends the English symbol unless the admin chose another one
    if (english !== null && status.currency_symbol === english) {
      return Private.intlSymbol(code, Private.ui.locale) ?? english;
    }
  }
  if (status.currency_symbol) {
    return status.currency_symbol;
  }
  return code ? `${code} ` : '$';
}

/**
 * The symbol of a currency of its own (an ISO 4217 code, e.g. a saved
 * record's `currency`) in the UI's language, as `currencySymbol` writes it for
 * a session in that currency whose admin chose no symbol: `CN¥` in English,
 * `¥` in Chinese, `€`, `$`.
 */
export function symbolOf(code: string): string {
  return currencySymbol({
    currency: code,
    currency_symbol: Private.intlSymbol(code, 'en') ?? ''
  });
}

/**
 * Whether `code` is a currency as the server's rule takes one
 * (`jupyter_gpucost.core.currency.is_currency_code`): an ISO 4217 code, three
 * capital letters.
 */
export function isCurrencyCode(code: unknown): code is string {
  return typeof code === 'string' && /^[A-Z]{3}$/.test(code);
}

/**
 * Set the UI's language for currency symbols (the translator's language code,
 * e.g. `zh-CN`); the plugin calls this once at start. Only the languages the
 * extension speaks change the symbols (as `jupyter_gpucost.core.currency` on
 * the server): in any other the amounts read as in English (`$1.23`, not
 * `1,23 $US` half-written as `$US1.23`).
 */
export function setMoneyLocale(languageCode: string): void {
  const code = languageCode.replace('_', '-');
  Private.ui.locale = /^zh\b/i.test(code) ? code : 'en';
}

/*
 * The one place where amounts, rates, durations, countdowns, bytes, energy and
 * CO2 are written for people; every view (status items, top bar, panel,
 * badges, budget, export) uses these.
 */

/**
 * Format an amount of money, by size: two decimals, four under $0.10,
 * `< $0.0001` under that (never `$0.0000` for an amount that is not zero),
 * `$0.00` for nothing at all. The same rule as the server's
 * `jupyter_gpucost.core.money.status_bar`.
 *
 * `formatMoney(1.234, '$')` is `$1.23`, `formatMoney(0.01234, '$')` is
 * `$0.0123`, `formatMoney(0.00002, 'CN¥')` is `< CN¥0.0001`. `columnDigits`
 * fixes the decimals instead, for an amount in a column (`moneyColumnDigits`).
 */
export function formatMoney(
  amount: number,
  symbol: string,
  columnDigits?: 2 | 4
): string {
  if (!Number.isFinite(amount)) {
    return `${symbol}—`;
  }
  // whole micro-units, rounded half up as the server rounds them
  const micro = Math.round(Math.abs(amount) * 1e6);
  if (micro === 0) {
    return `${symbol}0.${'0'.repeat(columnDigits ?? 2)}`;
  }
  if (micro < SMALLEST_SHOWN * 1e6) {
    return amount < 0 ? `> -${symbol}0.0001` : `< ${symbol}0.0001`;
  }
  const digits = columnDigits ?? (Private.fourDecimals(micro) ? 4 : 2);
  const sign = amount < 0 ? '-' : '';
  const rounded = Private.roundMicro(micro, digits) / 1e6;
  return `${sign}${symbol}${Private.fixed(rounded, digits)}`;
}

/**
 * The decimals of a column of amounts spent: four when any amount in it that
 * is not zero is shown with four by size (under $0.10), else two. The same
 * rule as the server's `jupyter_gpucost.core.money.column_digits`.
 */
export function moneyColumnDigits(amounts: readonly number[]): 2 | 4 {
  return amounts.some(amount => {
    if (!Number.isFinite(amount)) {
      return false;
    }
    const micro = Math.round(Math.abs(amount) * 1e6);
    return micro > 0 && Private.fourDecimals(micro);
  })
    ? 4
    : 2;
}

/**
 * Amounts spent shown one under the other (a table's column), all with the
 * same decimals: `$0.0608` above `$0.1100`, never above `$0.11`. The same rule
 * as the server's `jupyter_gpucost.core.money.column`.
 */
export function formatMoneyColumn(
  amounts: readonly number[],
  symbol: string
): string[] {
  const digits = moneyColumnDigits(amounts);
  return amounts.map(amount => formatMoney(amount, symbol, digits));
}

/**
 * Format a budget (an amount someone set): two decimals at least and every
 * micro-unit it has, `$5.00`, `$1,000.50`, `$0.000001`; never `$0.00` for a
 * budget that is not zero. The same rule as the server's
 * `jupyter_gpucost.core.money.budget`.
 */
export function formatBudget(amount: number, symbol: string): string {
  if (!Number.isFinite(amount)) {
    return `${symbol}—`;
  }
  const micro = Math.round(Math.abs(amount) * 1e6);
  const whole = Math.floor(micro / 1e6);
  const decimals = String(micro % 1e6)
    .padStart(6, '0')
    .replace(/0+$/, '')
    .padEnd(2, '0');
  const sign = amount < 0 && micro > 0 ? '-' : '';
  return `${sign}${symbol}${Private.fixed(whole, 0)}.${decimals}`;
}

/**
 * Format an hourly rate with two decimals, e.g. `$6.86/h`.
 */
export function formatRate(
  ratePerHour: number,
  symbol: string,
  trans: TranslationBundle = extensionTrans()
): string {
  return trans.__('%1/h', formatRateAmount(ratePerHour, symbol));
}

/**
 * The amount of an hourly rate, two decimals (`$6.86`), for a sentence that
 * says "per hour" itself ("$3.43 per GPU-hour"); the server's
 * `money.rate_amount`.
 */
export function formatRateAmount(ratePerHour: number, symbol: string): string {
  return Number.isFinite(ratePerHour)
    ? `${ratePerHour < 0 ? '-' : ''}${symbol}${Private.fixed(Math.abs(ratePerHour), 2)}`
    : `${symbol}—`;
}

/**
 * A duration: `42 s`, `5 min 03 s`, `2 h 07 min`, `3 d 4 h`; `—` when not known.
 *
 * With `fraction`, durations under a minute keep decimals (`3.20 s`, `42.4 s`,
 * `< 0.01 s`): what a cell took.
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
  if (fraction && seconds > 0 && seconds < 0.005) {
    // by size, as money is: a trivial cell's few milliseconds are not `0.00 s`
    return '< 0.01 s';
  }
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
   * The UI's language, for currency symbols.
   */
  export const ui = { locale: 'en' };

  /**
   * The symbol `Intl.NumberFormat` writes for a currency in a language, or
   * `null` when the code is not a currency it knows.
   */
  export function intlSymbol(code: string, language: string): string | null {
    try {
      const parts = new Intl.NumberFormat(language, {
        style: 'currency',
        currency: code
      }).formatToParts(0);
      const symbol = parts.find(part => part.type === 'currency')?.value;
      return symbol ?? null;
    } catch {
      return null;
    }
  }

  /**
   * Whole micro-units rounded half up to `digits` decimals (still in
   * micro-units): exact, unlike `toFixed` on a binary fraction.
   */
  export function roundMicro(micro: number, digits: number): number {
    const step = 10 ** (6 - digits);
    return Math.floor((micro + step / 2) / step) * step;
  }

  /**
   * Whether an amount spent (whole micro-units, above zero) is shown with four
   * decimals by size: under $0.10 once rounded to four.
   */
  export function fourDecimals(micro: number): boolean {
    return roundMicro(micro, 4) < SMALL_AMOUNT * 1e6;
  }

  /**
   * A non-negative number with fixed decimals and thousands separators.
   */
  export function fixed(value: number, digits: number): string {
    const [whole, decimals] = value.toFixed(digits).split('.');
    const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
    return decimals === undefined ? grouped : `${grouped}.${decimals}`;
  }
}
