// Small pieces shared by the views.
import type { Run } from './api.ts';

export const duration = (run: Run) => (run.finished_at ? `${run.finished_at - run.created_at} ms` : '…');
export const time = (ms: number) => new Date(ms).toLocaleTimeString();
export const Badge = ({ status }: { status: string }) => <span class={`badge ${status}`}>{status}</span>;
/** A link to a run's page, by its id. */
export const RunLink = ({ run_id }: { run_id: string }) => (
  <a class="mono" href={`#/runs/${encodeURIComponent(run_id)}`}>
    {run_id}
  </a>
);
