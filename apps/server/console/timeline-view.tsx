// A run's timeline as SVG: a row per span on one time axis, so calls that ran in parallel stand side by side.
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { Event } from './api.ts';
import { Legend } from './charts.tsx';
import { type Span, type SpanOutcome, spanLength, timeline } from './timeline.ts';

const WIDTH = 960;
const LABEL_WIDTH = 230;
const ROW_HEIGHT = 18;
const ROW_GAP = 5;
const AXIS_HEIGHT = 20;
/** More rows than this are left out (and said so): a page is not the place to read thousands of calls. */
const MAX_ROWS = 400;

const OUTCOMES: readonly SpanOutcome[] = ['completed', 'failed', 'retried', 'waiting', 'running', 'cancelled', 'skipped'];
const KIND_MARK: Record<Span['kind'], string> = { provider: 'model', tool: 'tool', child: 'child', approval: 'wait', step: 'step' };

/** The timeline of a run's events; while `live`, its open spans grow with the clock. */
export function TimelineChart({ events, live }: { events: readonly Event[]; live: boolean }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!live) return;
    const timer = window.setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, [live]);
  const { spans, from, to } = useMemo(() => timeline(events, now), [events, now]);
  if (spans.length === 0) return <p class="muted">No calls yet.</p>;
  const shown = spans.slice(0, MAX_ROWS);
  const plot = WIDTH - LABEL_WIDTH - 10;
  const x = (at: number) => LABEL_WIDTH + ((at - from) / (to - from)) * plot;
  const height = AXIS_HEIGHT + shown.length * (ROW_HEIGHT + ROW_GAP);
  const ticks = roundTicks(to - from).map((ms) => from + ms);
  return (
    <div>
      <svg class="timeline" viewBox={`0 0 ${WIDTH} ${height}`} role="img" aria-label="timeline of the run's calls">
        {ticks.map((at) => (
          <g class="tick">
            <line x1={x(at)} x2={x(at)} y1={AXIS_HEIGHT - 4} y2={height} />
            <text x={x(at)} y={12} text-anchor={at === from ? 'start' : x(at) > WIDTH - 30 ? 'end' : 'middle'}>
              {offset(at - from)}
            </text>
          </g>
        ))}
        {shown.map((span, row) => {
          const y = AXIS_HEIGHT + row * (ROW_HEIGHT + ROW_GAP);
          const left = x(span.start);
          return (
            <g class="row" data-span={span.id}>
              <text class={`label ${span.kind}`} x={LABEL_WIDTH - 8} y={y + ROW_HEIGHT - 5} text-anchor="end">
                {`${KIND_MARK[span.kind]} · ${clip(span.label, 30)}`}
              </text>
              <rect
                class={`bar ${span.outcome}`}
                data-kind={span.kind}
                data-outcome={span.outcome}
                x={left}
                y={y}
                width={Math.max(2, x(span.end) - left)}
                height={ROW_HEIGHT}
                rx={3}
              >
                <title>{`${span.label} · ${spanLength(span)} · ${span.outcome}${span.note ? ` (${span.note})` : ''}`}</title>
              </rect>
            </g>
          );
        })}
      </svg>
      <Legend
        series={OUTCOMES.filter((outcome) => spans.some((span) => span.outcome === outcome)).map((outcome) => ({ key: outcome, label: outcome, tone: outcome }))}
        {...(spans.length > MAX_ROWS ? { note: `showing the first ${MAX_ROWS} of ${spans.length} spans` } : {})}
      />
    </div>
  );
}

/** Times from the run's start for the axis: round steps (1, 2 or 5 times a power of ten ms), four to eight of them. */
function roundTicks(span: number): number[] {
  const power = 10 ** Math.floor(Math.log10(Math.max(1, span / 4)));
  const step = [1, 2, 5, 10].map((each) => each * power).find((each) => span / each <= 8) ?? power * 10;
  return Array.from({ length: Math.floor(span / step) + 1 }, (_, at) => at * step);
}

/** A time from the run's start, as the axis shows it. */
function offset(ms: number): string {
  return ms < 1_000 ? `${Math.round(ms)} ms` : `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

function clip(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}
