// The shape of `GET /v1/overview`'s answer, shared by the server (which builds it) and the
// console (which charts it). Types only: the console's bundle takes nothing from here.

/** The overview's windows' names. */
export type OverviewWindow = 'hour' | 'day';

/** One bucket of the window: runs started and ended in it, the ended runs' durations, and the queues' depths. */
export interface OverviewBucket {
  at: number;
  started: number;
  completed: number;
  failed: number;
  cancelled: number;
  p50_ms: number | null;
  p95_ms: number | null;
  /** The queues' summed depths at the bucket's last sample; null when no sample fell in it. */
  waiting: number | null;
  active: number | null;
  delayed: number | null;
}

export interface AgentUsage {
  name: string;
  kind: 'agent' | 'workflow';
  runs: number;
  tokens: { input: number; output: number; total: number };
  /** Present when some of these runs' records have `usage.cost_usd` (priced models, SPEC §14). */
  cost_usd?: number;
}

export interface QueueDepth {
  name: string;
  waiting: number;
  active: number;
  delayed: number;
}

export interface Overview {
  window: OverviewWindow;
  from: number;
  to: number;
  bucket_ms: number;
  runs_in_window: number;
  runs_read: number;
  truncated: boolean;
  buckets: OverviewBucket[];
  duration_ms: { p50: number | null; p95: number | null; runs: number };
  agents: AgentUsage[];
  queues: QueueDepth[];
}
