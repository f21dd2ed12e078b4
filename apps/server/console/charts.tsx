// Small SVG charts for the overview: bars stacked per time bucket, lines per time bucket, and
// horizontal bars per name. Each mark carries its value (`data-value`) and a title to hover.

const WIDTH = 600;
const HEIGHT = 180;
const LEFT = 44;
const BOTTOM = 20;
const TOP = 8;

export interface Series {
  /** The field of each point the series reads. */
  key: string;
  label: string;
  /** Its colour, as a class (`completed`, `failed`, …). */
  tone: string;
}

/** A bucket of a time series: its start, and the fields the series read. */
type Point = { readonly at: number };

/** A point's value for a series (null: none in that bucket). */
function pointValue(point: Point, key: string): number | null {
  const value = (point as unknown as Record<string, unknown>)[key];
  return typeof value === 'number' ? value : null;
}

/** A chart's frame: the value axis (0 to the largest value) and times under the first, middle and last bucket. */
function Frame({ points, max, unit }: { points: readonly Point[]; max: number; unit: string }) {
  const plotWidth = WIDTH - LEFT - 4;
  const marks = [0, Math.floor((points.length - 1) / 2), points.length - 1];
  return (
    <g class="tick">
      {[0, 0.5, 1].map((share) => {
        const y = TOP + (1 - share) * (HEIGHT - TOP - BOTTOM);
        return (
          <g>
            <line x1={LEFT} x2={WIDTH} y1={y} y2={y} />
            <text x={LEFT - 4} y={y + 4} text-anchor="end">
              {short(max * share)}
              {share === 1 ? unit : ''}
            </text>
          </g>
        );
      })}
      {marks.map((index) => (
        <text x={LEFT + ((index + 0.5) / points.length) * plotWidth} y={HEIGHT - 5} text-anchor="middle">
          {points[index] ? clock(points[index]!.at) : ''}
        </text>
      ))}
    </g>
  );
}

/** Bars per bucket, the series stacked; `line` draws one more series as a line over them. */
export function StackedBars({ name, points, series, line, unit = '' }: { name: string; points: readonly Point[]; series: Series[]; line?: Series; unit?: string }) {
  const totals = points.map((point) => series.reduce((sum, each) => sum + (pointValue(point, each.key) ?? 0), 0));
  const max = nice(Math.max(1, ...totals, ...(line ? points.map((point) => pointValue(point, line.key) ?? 0) : [])));
  const plotWidth = WIDTH - LEFT - 4;
  const slot = plotWidth / points.length;
  const scale = (value: number) => (value / max) * (HEIGHT - TOP - BOTTOM);
  return (
    <svg class="chart" data-chart={name} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={name}>
      <Frame points={points} max={max} unit={unit} />
      {points.map((point, index) => {
        let base = HEIGHT - BOTTOM;
        return series.map((each) => {
          const value = pointValue(point, each.key) ?? 0;
          if (value === 0) return null;
          const height = scale(value);
          base -= height;
          return (
            <rect
              class={`bar ${each.tone}`}
              data-series={each.key}
              data-at={point.at}
              data-value={value}
              x={LEFT + index * slot + slot * 0.1}
              y={base}
              width={Math.max(1, slot * 0.8)}
              height={height}
            >
              <title>{`${clock(point.at)} · ${each.label}: ${value}${unit}`}</title>
            </rect>
          );
        });
      })}
      {line && <Polyline points={points} series={line} slot={slot} scale={scale} />}
    </svg>
  );
}

/** One line per series over the buckets (a gap where a bucket has no value). */
export function Lines({ name, points, series, unit = '' }: { name: string; points: readonly Point[]; series: Series[]; unit?: string }) {
  const max = nice(Math.max(1, ...points.flatMap((point) => series.map((each) => pointValue(point, each.key) ?? 0))));
  const slot = (WIDTH - LEFT - 4) / points.length;
  const scale = (value: number) => (value / max) * (HEIGHT - TOP - BOTTOM);
  return (
    <svg class="chart" data-chart={name} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={name}>
      <Frame points={points} max={max} unit={unit} />
      {series.map((each) => (
        <Polyline points={points} series={each} slot={slot} scale={scale} unit={unit} />
      ))}
    </svg>
  );
}

function Polyline({ points, series, slot, scale, unit = '' }: { points: readonly Point[]; series: Series; slot: number; scale: (value: number) => number; unit?: string }) {
  const at = (index: number, value: number) => [LEFT + (index + 0.5) * slot, HEIGHT - BOTTOM - scale(value)] as const;
  // Runs of consecutive buckets with a value, each its own path.
  const runs: string[] = [];
  let current = '';
  points.forEach((point, index) => {
    const value = pointValue(point, series.key);
    if (value === null) {
      if (current) runs.push(current);
      current = '';
      return;
    }
    const [x, y] = at(index, value);
    current += `${current ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`;
  });
  if (current) runs.push(current);
  return (
    <g class={`line ${series.tone}`} data-series={series.key}>
      {runs.map((d) => (
        <path d={d} />
      ))}
      {points.map((point, index) => {
        const value = pointValue(point, series.key);
        // A point marks a bucket with something in it; the line alone shows the zeros.
        if (value === null || value === 0) return null;
        const [x, y] = at(index, value);
        return (
          <circle cx={x} cy={y} r={2.5} data-at={point.at} data-value={value}>
            <title>{`${clock(point.at)} · ${series.label}: ${value}${unit}`}</title>
          </circle>
        );
      })}
    </g>
  );
}

/** One horizontal bar per row, in the order given (`key` names it in the page); `note` is written after the value. */
export function NamedBars({ name, rows, unit = '' }: { name: string; rows: { key: string; label: string; value: number; note?: string }[]; unit?: string }) {
  const max = Math.max(1, ...rows.map((row) => row.value));
  const row = 22;
  const labelWidth = 170;
  const height = Math.max(1, rows.length) * row + 4;
  return (
    <svg class="chart" data-chart={name} viewBox={`0 0 ${WIDTH} ${height}`} role="img" aria-label={name}>
      {rows.map((each, index) => {
        const width = (each.value / max) * (WIDTH - labelWidth - 140);
        const y = index * row + 2;
        return (
          <g data-row={each.key}>
            <text class="label" x={labelWidth - 6} y={y + 14} text-anchor="end">
              {each.label.length > 26 ? `${each.label.slice(0, 25)}…` : each.label}
            </text>
            <rect class="bar running" data-value={each.value} x={labelWidth} y={y} width={Math.max(1, width)} height={row - 6} rx={2}>
              <title>{`${each.label}: ${each.value}${unit}${each.note ? ` · ${each.note}` : ''}`}</title>
            </rect>
            <text x={labelWidth + width + 6} y={y + 14}>
              {`${short(each.value)}${unit}${each.note ? ` · ${each.note}` : ''}`}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

/** The series' colours and names, under a chart; `note` after them. */
export function Legend({ series, note }: { series: readonly Series[]; note?: string }) {
  return (
    <p class="legend">
      {series.map((each) => (
        <span class={`key ${each.tone}`}>{each.label}</span>
      ))}
      {note && <span class="muted">{note}</span>}
    </p>
  );
}

/** The axis's top: the value rounded up to 1, 2 or 5 times a power of ten. */
function nice(value: number): number {
  const power = 10 ** Math.floor(Math.log10(value));
  return ([1, 2, 5, 10].find((step) => step * power >= value) ?? 10) * power;
}

function short(value: number): string {
  if (value >= 1_000_000) return `${+(value / 1_000_000).toFixed(1)}M`;
  if (value >= 1_000) return `${+(value / 1_000).toFixed(1)}k`;
  return `${+value.toFixed(value < 10 && value % 1 !== 0 ? 1 : 0)}`;
}

function clock(ms: number): string {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}
