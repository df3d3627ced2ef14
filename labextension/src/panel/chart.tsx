import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { formatMoney, formatRate } from '../format';
import { IHistoryAnswer } from './types';

/**
 * The drawing area of the chart, in SVG user units.
 */
export const CHART_WIDTH = 640;
export const CHART_HEIGHT = 180;
export const CHART_MARGIN = { top: 10, right: 44, bottom: 22, left: 52 };

/**
 * The narrowest the chart is drawn, in pixels (a narrower panel scrolls).
 */
export const CHART_MIN_WIDTH = 240;

/**
 * The width to draw the chart at: the width it is given, in whole pixels,
 * so that one SVG unit is one pixel and its labels keep their font size.
 */
export function chartWidth(available: number | null | undefined): number {
  if (!available || !Number.isFinite(available) || available <= 0) {
    return CHART_WIDTH;
  }
  return Math.max(CHART_MIN_WIDTH, Math.floor(available));
}

/**
 * A line of the chart: its points in SVG coordinates.
 */
export interface IChartSeries {
  /** `rate`, or `gpu-<index>` for a GPU's utilisation. */
  key: string;
  label: string;
  /** The `d` attribute of the SVG path ('' when there is nothing to draw). */
  path: string;
  /** The latest value, as shown in the legend. */
  last: number | null;
}

/**
 * Everything the chart draws, computed from a history answer.
 */
export interface IChartGeometry {
  series: IChartSeries[];
  /** The top of the rate axis (per hour), a "nice" number. */
  rateMax: number;
  /** Ticks of the rate axis (values, labels and y positions). */
  rateTicks: { value: number; label: string; y: number }[];
  /** Start and end of the time axis (ms since the epoch). */
  start: number;
  end: number;
  /** Number of points in the history. */
  points: number;
}

/**
 * The smallest of 1, 2, 2.5, 5 × 10^n that is ≥ `value` (and > 0).
 */
export function niceCeiling(value: number): number {
  if (!Number.isFinite(value) || value <= 0) {
    return 1;
  }
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * power >= value - 1e-12) {
      return step * power;
    }
  }
  return 10 * power;
}

/**
 * The decimals the ticks of one axis are all written with: none when every
 * tick is a whole number from 10 up, else the cents (two) or as many more as a
 * tick needs to be exact (up to six): `$0`, `$5`, `$10`; `$0.00`, `$1.25`,
 * `$2.50`; `$0.0000`, `$0.0125`, `$0.0250`.
 */
export function axisDecimals(values: number[]): number {
  const exact = (d: number): boolean =>
    values.every(v => {
      const scaled = v * Math.pow(10, d);
      return Math.abs(scaled - Math.round(scaled)) < 1e-6;
    });
  const top = Math.max(0, ...values.filter(Number.isFinite));
  if (top >= 10 && exact(0)) {
    return 0;
  }
  for (let d = 2; d < 6; d++) {
    if (exact(d)) {
      return d;
    }
  }
  return 6;
}

/**
 * Scale a history to the chart: the spend rate on the left axis (the server's
 * currency per hour, labelled with its `symbol`), each GPU's utilisation on the
 * right axis (0–100 %), time along the bottom.
 */
export function chartGeometry(
  history: IHistoryAnswer,
  trans: TranslationBundle,
  symbol: string,
  width: number = CHART_WIDTH
): IChartGeometry {
  const { top, right, bottom, left } = CHART_MARGIN;
  const plotW = width - left - right;
  const plotH = CHART_HEIGHT - top - bottom;
  const times = history.points.map(p => Date.parse(p.t));
  // a young session fills the chart: the axis starts at the first point
  const windowStart = Number.isFinite(Date.parse(history.start))
    ? Date.parse(history.start)
    : (times[0] ?? 0);
  const start = Math.max(windowStart, times[0] ?? windowStart);
  const end = Number.isFinite(Date.parse(history.end))
    ? Date.parse(history.end)
    : (times[times.length - 1] ?? 0);
  const span = Math.max(end - start, 1);
  const x = (t: number): number =>
    left + (Math.min(Math.max(t - start, 0), span) / span) * plotW;
  const rates = history.points.map(p => p.rate_per_hour);
  const rateMax = niceCeiling(Math.max(0, ...rates.filter(Number.isFinite)));
  const yRate = (v: number): number =>
    top + plotH - (Math.min(Math.max(v, 0), rateMax) / rateMax) * plotH;
  const yPct = (v: number): number =>
    top + plotH - (Math.min(Math.max(v, 0), 100) / 100) * plotH;

  const path = (values: (number | null)[]): string => {
    let d = '';
    let pen = false;
    values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v) || !Number.isFinite(times[i])) {
        pen = false; // a gap: no reading at this point
        return;
      }
      d += `${pen ? 'L' : 'M'}${x(times[i]).toFixed(1)},${(v as number).toFixed(1)}`;
      pen = true;
    });
    return d;
  };

  const series: IChartSeries[] = [
    {
      key: 'rate',
      label: trans.__('spend rate (%1/h)', symbol.trim()),
      path: path(rates.map(r => (Number.isFinite(r) ? yRate(r) : null))),
      last: rates.length ? rates[rates.length - 1] : null
    }
  ];
  for (const gpu of history.gpus) {
    const values = history.points.map(p => {
      const reading = p.gpus.find(g => g.index === gpu.index);
      return reading && reading.utilization_pct !== null
        ? reading.utilization_pct
        : null;
    });
    const known = values.filter((v): v is number => v !== null);
    series.push({
      key: `gpu-${gpu.index}`,
      label: trans.__('GPU %1 utilisation (%)', gpu.index),
      path: path(values.map(v => (v === null ? null : yPct(v)))),
      last: known.length ? known[known.length - 1] : null
    });
  }
  const tickValues = [0, 0.5, 1].map(f => rateMax * f);
  const decimals = axisDecimals(tickValues);
  const rateTicks = tickValues.map(value => ({
    value,
    label: `${symbol}${value.toFixed(decimals)}`,
    y: yRate(value)
  }));
  return {
    series,
    rateMax,
    rateTicks,
    start,
    end,
    points: history.points.length
  };
}

/**
 * A window as an adjective: `15-minute`, `1-hour`, `24-hour`, `7-day`.
 */
export function windowLabel(seconds: number, trans: TranslationBundle): string {
  if (seconds >= 2 * 86400 && seconds % 86400 === 0) {
    return trans.__('%1-day', seconds / 86400);
  }
  if (seconds >= 3600 && seconds % 3600 === 0) {
    return trans.__('%1-hour', seconds / 3600);
  }
  return trans.__('%1-minute', Math.round(seconds / 60));
}

/**
 * A step as a noun after "one point per": `hour`, `5 minutes`, `second`.
 */
export function stepLabel(seconds: number, trans: TranslationBundle): string {
  if (seconds >= 3600 && seconds % 3600 === 0) {
    return seconds === 3600
      ? trans.__('hour')
      : trans.__('%1 hours', seconds / 3600);
  }
  if (seconds >= 60 && seconds % 60 === 0) {
    return seconds === 60
      ? trans.__('minute')
      : trans.__('%1 minutes', seconds / 60);
  }
  return seconds === 1 ? trans.__('second') : trans.__('%1 seconds', seconds);
}

/**
 * What the chart area says while there is no line to draw (fewer than two
 * points): how the window is sampled, and what the one point there is says.
 */
export function emptyChartText(
  history: IHistoryAnswer,
  symbol: string,
  trans: TranslationBundle
): string {
  const per = trans.__(
    'The %1 view has one point per %2',
    windowLabel(history.window_s, trans),
    stepLabel(history.step_s, trans)
  );
  const point = history.points[0];
  if (!point) {
    return trans.__('%1, and no reading in this window yet.', per);
  }
  return trans.__(
    '%1, and only one so far (up to %2): %3 spent, at %4. The line is drawn from the second point.',
    per,
    clock(Date.parse(point.t), history.window_s > 86400),
    formatMoney(point.cost, symbol),
    formatRate(point.rate_per_hour, symbol, trans)
  );
}

/**
 * A clock time for the time axis.
 */
function clock(ms: number, withDate: boolean): string {
  const date = new Date(ms);
  const time = date.toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit'
  });
  return withDate
    ? `${date.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}`
    : time;
}

/**
 * The chart: an SVG that takes its colours from the JupyterLab theme.
 */
export function CostChart(props: {
  history: IHistoryAnswer;
  symbol: string;
  trans: TranslationBundle;
}): React.ReactElement {
  const { history, symbol, trans } = props;
  // drawn at the width it has: a scaled drawing would shrink its labels
  const host = React.useRef<HTMLDivElement>(null);
  const [width, setWidth] = React.useState(CHART_WIDTH);
  const empty = history.points.length < 2;
  React.useLayoutEffect(() => {
    const node = host.current;
    if (!node || typeof ResizeObserver === 'undefined') {
      return;
    }
    const measure = (): void => setWidth(chartWidth(node.clientWidth));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(node);
    return () => observer.disconnect();
  }, [empty]);
  const geometry = chartGeometry(history, trans, symbol, width);
  const { top, right, bottom, left } = CHART_MARGIN;
  const plotBottom = CHART_HEIGHT - bottom;
  const withDate = geometry.end - geometry.start > 20 * 3600 * 1000;
  if (geometry.points < 2) {
    return (
      <div className="jp-gpucost-chart-empty" ref={host}>
        {emptyChartText(history, symbol, trans)}
      </div>
    );
  }
  return (
    <figure className="jp-gpucost-chart">
      <div className="jp-gpucost-chart-area" ref={host}>
        <svg
          viewBox={`0 0 ${width} ${CHART_HEIGHT}`}
          width={width}
          height={CHART_HEIGHT}
          role="img"
          aria-label={trans.__(
            'Spend rate and GPU utilisation over the last %1',
            history.window_s >= 86400
              ? trans.__('%1 days', Math.round(history.window_s / 86400))
              : trans.__('%1 minutes', Math.round(history.window_s / 60))
          )}
          preserveAspectRatio="none"
        >
          {geometry.rateTicks.map(tick => (
            <g key={tick.value} className="jp-gpucost-chart-grid">
              <line x1={left} x2={width - right} y1={tick.y} y2={tick.y} />
              <text x={left - 4} y={tick.y + 4} textAnchor="end">
                {tick.label}
              </text>
            </g>
          ))}
          <g className="jp-gpucost-chart-axis">
            <text x={width - right + 4} y={top + 8}>
              100%
            </text>
            <text x={width - right + 4} y={plotBottom}>
              0%
            </text>
            <text x={left} y={CHART_HEIGHT - 6}>
              {clock(geometry.start, withDate)}
            </text>
            <text x={width - right} y={CHART_HEIGHT - 6} textAnchor="end">
              {clock(geometry.end, withDate)}
            </text>
          </g>
          {geometry.series.map((s, i) => (
            <path
              key={s.key}
              d={s.path}
              className={`jp-gpucost-chart-line jp-gpucost-chart-series-${i % 6}`}
              data-series={s.key}
              fill="none"
              vectorEffect="non-scaling-stroke"
            />
          ))}
        </svg>
      </div>
      <figcaption className="jp-gpucost-chart-legend">
        {geometry.series.map((s, i) => (
          <span key={s.key} className="jp-gpucost-chart-legend-item">
            <span
              className={`jp-gpucost-chart-swatch jp-gpucost-chart-series-${i % 6}`}
            />
            {s.label}
            {s.last !== null &&
              `: ${s.key === 'rate' ? formatMoney(s.last, symbol) : `${Math.round(s.last)}`}`}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
