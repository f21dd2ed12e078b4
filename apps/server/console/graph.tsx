// A workflow run drawn as a graph: its steps as boxes in dependency layers, left to right, an
// arrow from each dependency to the step that waits for it, each box in its step's status colour.
import type { Run } from './api.ts';
import { layers } from './fold.ts';

const BOX_WIDTH = 170;
const BOX_HEIGHT = 46;
const GAP_X = 70;
const GAP_Y = 18;
const PAD = 4;

export interface GraphStep {
  id: string;
  depends_on: string[];
}

/** The workflow's steps (from its definition) with the statuses the run's record gives them. */
export function WorkflowGraph({ steps, run }: { steps: GraphStep[]; run: Run }) {
  const columns = layers(steps);
  const at = new Map<string, { x: number; y: number }>();
  for (const [c, column] of columns.entries()) {
    for (const [r, step] of column.entries()) at.set(step.id, { x: PAD + c * (BOX_WIDTH + GAP_X), y: PAD + r * (BOX_HEIGHT + GAP_Y) });
  }
  const tallest = Math.max(1, ...columns.map((column) => column.length));
  const width = PAD * 2 + columns.length * BOX_WIDTH + Math.max(0, columns.length - 1) * GAP_X;
  const height = PAD * 2 + tallest * BOX_HEIGHT + (tallest - 1) * GAP_Y;
  const status = (id: string) => run.steps?.[id]?.status ?? 'pending';
  return (
    <svg class="workflow" viewBox={`0 0 ${width} ${height}`} width={width} role="img" aria-label="workflow graph">
      <defs>
        <marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0,0 L8,4 L0,8 z" class="arrowhead" />
        </marker>
      </defs>
      {steps.flatMap((step) =>
        step.depends_on.map((dependency) => {
          const from = at.get(dependency);
          const to = at.get(step.id);
          if (!from || !to) return null;
          const x1 = from.x + BOX_WIDTH;
          const y1 = from.y + BOX_HEIGHT / 2;
          const x2 = to.x;
          const y2 = to.y + BOX_HEIGHT / 2;
          const bend = (x2 - x1) / 2;
          return (
            <path
              class={`edge ${status(dependency)}`}
              data-edge={`${dependency}->${step.id}`}
              d={`M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`}
              marker-end="url(#arrow)"
            />
          );
        }),
      )}
      {steps.map((step) => {
        const place = at.get(step.id)!;
        return (
          <g class={`node ${status(step.id)}`} data-step={step.id} data-status={status(step.id)} transform={`translate(${place.x},${place.y})`}>
            <title>{step.depends_on.length > 0 ? `${step.id}, after ${step.depends_on.join(', ')}` : step.id}</title>
            <rect width={BOX_WIDTH} height={BOX_HEIGHT} rx={6} />
            <text class="name" x={10} y={19}>
              {step.id.length > 22 ? `${step.id.slice(0, 21)}…` : step.id}
            </text>
            <text class="status" x={10} y={36}>
              {status(step.id)}
            </text>
          </g>
        );
      })}
    </svg>
  );
}
