import { formatRate } from '../format';
import { trans } from '../i18n';
import { IBudgetStop } from './tokens';

/**
 * A duration ahead as a person reads it: `40 s`, `14 min`, `2 h 10 min`. The
 * server's rule (`jupyter_gpucost.server.budget.messages.about`, which writes
 * "Stops at $5.00 — in about 14 min …"); both are tested against
 * `__tests__/about-rule.json`. Python rounds half to even, and so does this.
 */
export function formatAhead(seconds: number): string {
  const whole = Math.max(0, Private.roundHalfEven(seconds));
  if (whole < 60) {
    return trans().__('%1 s', whole);
  }
  const minutes = Private.roundHalfEven(whole / 60);
  if (minutes < 60) {
    return trans().__('%1 min', minutes);
  }
  return trans().__('%1 h %2 min', Math.floor(minutes / 60), minutes % 60);
}

/**
 * The budget's headline: `about 2 h 10 min left at $6.86/h`, from when the
 * binding budget acts at the current rate (`stop`); `null` when nothing runs
 * out (no budget, nothing billing, spent already, or acted); without the
 * rate (older servers), `about 14 min left`.
 */
export function timeLeftText(
  status: {
    stop?:
      | (Pick<IBudgetStop, 'in_s'> &
          Partial<Pick<IBudgetStop, 'rate_per_hour'>>)
      | null;
  },
  symbol: string
): string | null {
  const stop = status.stop;
  if (!stop || !Number.isFinite(stop.in_s) || stop.in_s < 0) {
    return null;
  }
  const rate = stop.rate_per_hour;
  if (rate === undefined || !Number.isFinite(rate)) {
    return trans().__('about %1 left', formatAhead(stop.in_s));
  }
  return trans().__(
    'about %1 left at %2',
    formatAhead(stop.in_s),
    formatRate(rate, symbol, trans())
  );
}

namespace Private {
  /**
   * Python's `round`: to the nearest integer, a tie to the even one.
   */
  export function roundHalfEven(x: number): number {
    const floor = Math.floor(x);
    const rest = x - floor;
    if (rest > 0.5) {
      return floor + 1;
    }
    if (rest < 0.5) {
      return floor;
    }
    return floor % 2 === 0 ? floor : floor + 1;
  }
}
