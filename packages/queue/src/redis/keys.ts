import { partitionOf, partitionTag } from './partitions.ts';

/**
 * Every Redis key and queue name arcflow uses, built in this one file. What is global (the
 * registry, the partition map, the watchdog's lock) lives under the prefix's hash tag,
 * `{prefix}`; a run's keys and its BullMQ jobs live under its partition's tag (see
 * `partitions.ts`; `{prefix}` too when there is one partition), so each run is one slot.
 */
export function hashTag(prefix: string): string {
  return `{${prefix}}`;
}

/** The hash tag a run's keys and jobs live under: its partition's, or the prefix's own. */
export function runTag(prefix: string, run_id: string): string {
  const k = partitionOf(run_id);
  return k === undefined ? hashTag(prefix) : partitionTag(prefix, k);
}

export interface Keys {
  readonly tag: string;
  readonly run: (run_id: string) => RunKeys;
  /** A run's record key, which is all the store's scripts are sent (the same as `run(id).record`). */
  readonly record: (run_id: string) => string;
  /** The hash tag of a run (its partition's). */
  readonly tagOf: (run_id: string) => string;
  /** An idempotency key, under a partition's tag (the prefix's by default). */
  readonly idempotency: (key: string, tag?: string) => string;
  /** The partition count (a number) and every count it has had (a list, oldest first). */
  readonly partitions: string;
  readonly partitionHistory: string;
  /** A partition's set of runs not ended (see ACTIVE_RUNS_SUFFIX). */
  readonly activeRunsIn: (tag: string) => string;
  /** A partition's set of ended runs not compacted yet (see UNCOMPACTED_RUNS_SUFFIX). */
  readonly uncompactedRunsIn: (tag: string) => string;
  /** A partition's listing indexes (see RUNS_INDEX_SUFFIX). */
  readonly runsIndexIn: (tag: string, agent?: string) => string;
  readonly agent: (name: string) => string;
  readonly agentWorkers: (name: string) => string;
  /** The names of every agent registered under the prefix. */
  readonly agentNames: string;
  /** The tenant settings the workers published (SPEC §14: weights, limits), JSON. */
  readonly tenancy: string;
  /** A tenant's admitted runs not known to have ended (a set of run ids; SPEC §14 `max_active_runs`). */
  readonly tenantActive: (tenant: string) => string;
  /** A tenant's enqueues in one minute (epoch minutes; SPEC §14 `runs_per_minute`). */
  readonly tenantMinute: (tenant: string, minute: number) => string;
  /** A tenant's spend in one UTC day (`YYYY-MM-DD`; a hash of `spent` and `held` micro-dollars; SPEC §14 `tenant_budgets`). */
  readonly tenantSpend: (tenant: string, day: string) => string;
  /** A run's cost holds for its calls in flight (SPEC §14), under the prefix's tag beside its tenant's day, so one script holds both. */
  readonly runCost: (run_id: string) => string;
  readonly workers: string;
  /** Which live worker holds which definition of a tool name: a ZSET of `<worker_id>|<definition_hash>`, scored by heartbeat. */
  readonly toolHolders: (tool_name: string) => string;
  /** The partitions a worker serves, when it serves some only (expires with its heartbeat). */
  readonly workerPartitions: (worker_id: string) => string;
  /** Held by the one worker whose watchdog scans this round. */
  readonly watchdogLock: string;
  /** Held by the worker sweeping uncompacted runs for one round (see `runs/compaction-sweep.ts`). */
  readonly compactionSweepLock: string;
  readonly cancelChannel: string;
  /** A partition's channel of runs that ended (sharded pub/sub, in the partition's slot). */
  readonly finishedChannelIn: (tag: string) => string;
  /** A provider paused by a 429, by its id (SPEC §16): lives as long as the pause. */
  readonly providerPause: (provider_id: string) => string;
  /**
   * The console overview's queue-depth samples: a ZSET scored by the sample's minute (ms), each
   * member the queues' depths then (JSON), written by `arcflow serve` at most once a minute while
   * someone reads the overview, trimmed to a day (docs/decisions/0027-console-overview.md).
   */
  readonly overviewQueueDepths: string;
}

/**
 * `{prefix}:active`: every run not ended yet, scored by when it last made progress (Redis server
 * time, ms). The store's scripts add a run when it is created, move its score when one of its
 * responses is recorded and remove it when it ends; the watchdog reads the oldest.
 */
export const ACTIVE_RUNS_SUFFIX = ':active';

/**
 * `{prefix}:uncompacted`: ended runs not compacted yet, scored by when each ended (Redis server
 * time, ms). The script that ends a run adds it and the one that compacts it removes it; a run
 * whose ending process died in between is compacted by the sweep (`runs/compaction-sweep.ts`).
 */
export const UNCOMPACTED_RUNS_SUFFIX = ':uncompacted';

/**
 * `{prefix}:runs` and `{prefix}:runs:agent:<name>`: every run created under the prefix (and each
 * agent's), scored by creation time (ms), for listing newest first. Entries of runs that
 * retention removed are dropped when a listing meets them, and older than the retention period
 * when a run is listed.
 */
export const RUNS_INDEX_SUFFIX = ':runs';

/**
 * `{prefix}:metrics:runs` (one per partition's tag): runs ended, counted by the script that ends
 * each run, in fields `agent|<name>|<status>` or `workflow|<name>|<status>`, with `|<tenant>` after
 * them for a run of a tenant other than `default`; what `arcflow serve` reports as the
 * deployment's `arcflow.runs` (SPEC §18), the tenants no worker names summed as `_OTHER`. Never
 * expires: it is a counter.
 */
export const RUN_COUNTS_SUFFIX = ':metrics:runs';

/**
 * A run's keys other than its record, as suffixes of the record's key: its events, the dedupe ids
 * of events written exactly once, the pending rounds, the index of every key of the run (so
 * retention expires them together), the root-span claim, and a workflow run's steps (status and
 * start time per step) and their outputs and errors, and `tail`: the pub/sub channel told (with
 * no message) each time events are appended, which event followers (`arcflow serve`) subscribe to,
 * and the run's stream (SPEC §12): `stream`, a Redis Stream of chunks whose entry ids are their
 * offsets (`0-<offset>`), and `stream-meta`, which attempt of each iteration it shows (see
 * `redis/lua/stream.lua`), and `archive`: an ended run's other keys folded into one value once it
is compacted (`records/archive.ts`; `rootSpan` is only read, for runs of earlier versions: the
claim is the record's `root_span` now). The store's Lua scripts name them the
 * same way from the record key (`redis/lua/prelude.lua`), so each is sent one key.
 */
export const RUN_KEY_SUFFIX = Object.freeze({
  events: ':events',
  dedupe: ':dedupe',
  pending: ':pending',
  index: ':keys',
  rootSpan: ':root-span',
  steps: ':steps',
  outputs: ':outputs',
  tail: ':tail',
  approvals: ':approvals',
  toolResults: ':tool-results',
  stream: ':stream',
  streamMeta: ':stream-meta',
  archive: ':archive',
});

/** A step's state key: `<record>:<step>:state`. */
export function stateKey(record: string, step_id: string): string {
  return `${record}:${step_id}:state`;
}

/**
 * A step's transcript: its messages, one JSON each, in a list that is only appended to (by the
 * save that commits them; see `saveState.lua`): `<record>:<step>:transcript`.
 */
export function transcriptKey(record: string, step_id: string): string {
  return `${record}:${step_id}:transcript`;
}

/**
 * A step's state log (SPEC §17): the run state's recorded changes, one JSON list of changes per
 * entry (the initial state, then each round that changed it), only appended to by the save that
 * commits a round: `<record>:<step>:state-log`.
 */
export function stateLogKey(record: string, step_id: string): string {
  return `${record}:${step_id}:state-log`;
}

/** A round's key of one kind (`response`, `results`, `spans`, `changes`: each completed call's state changes): `<record>:<step>:<kind>:<n>`. */
export function roundKey(record: string, step_id: string, kind: 'response' | 'results' | 'spans' | 'changes', iteration: number): string {
  return `${record}:${step_id}:${kind}:${iteration}`;
}

/** A run's keys. A class, so building them per store call allocates no closures. */
export class RunKeys {
  readonly record: string;
  readonly events: string;
  /**
   * Per round of fanned-out calls: `step|n` → how many are still open (the call that settles the
   * last one enqueues the join), and `step|n|calls` → those calls, as a JSON list of
   * `[tool_call_id, tool_name]`, for a cancel to close.
   */
  readonly pending: string;
  /** Claimed by the one process that emits the run's root span. */
  readonly rootSpan: string;
  /**
   * A workflow run's steps: `<step_id>` → status, `<step_id>|t0` → start (ms), `<step_id>|state_at` → the index of its
   * entry in the run's state log (a completed step that changed the state), `|first_failed` → the step that failed first.
   */
  readonly steps: string;
  /** A workflow run's step outputs: `<step_id>` → output, `<step_id>|error` → error JSON. */
  readonly outputs: string;
  /** The channel published to when the run's events grow (one message per script that appends). */
  readonly tail: string;
  /**
   * Calls that waited for approval: `<tool_call_id>` → the request (JSON, with its tool job),
   * `…|place` → `<step>|<n>`, `…|status` → pending, approved, rejected or timed_out,
   * `…|resolution` → the resolution (JSON).
   */
  readonly approvals: string;
  /** Calls that waited for a result from outside (SPEC §20), laid out as `approvals` (status pending, answered or timed_out). */
  readonly toolResults: string;
  /** The run's stream (SPEC §12): a Redis Stream, entry id `0-<offset>`, field `c` the chunk's JSON. */
  readonly stream: string;
  /** An ended run's other keys, folded into one value (see `runs/archive.ts`). */
  readonly archive: string;

  constructor(private readonly base: string) {
    this.record = base;
    this.events = base + RUN_KEY_SUFFIX.events;
    this.pending = base + RUN_KEY_SUFFIX.pending;
    this.rootSpan = base + RUN_KEY_SUFFIX.rootSpan;
    this.steps = base + RUN_KEY_SUFFIX.steps;
    this.outputs = base + RUN_KEY_SUFFIX.outputs;
    this.tail = base + RUN_KEY_SUFFIX.tail;
    this.approvals = base + RUN_KEY_SUFFIX.approvals;
    this.toolResults = base + RUN_KEY_SUFFIX.toolResults;
    this.stream = base + RUN_KEY_SUFFIX.stream;
    this.archive = base + RUN_KEY_SUFFIX.archive;
  }

  state(step_id: string): string {
    return stateKey(this.base, step_id);
  }

  transcript(step_id: string): string {
    return transcriptKey(this.base, step_id);
  }

  stateLog(step_id: string): string {
    return stateLogKey(this.base, step_id);
  }

  response(step_id: string, iteration: number): string {
    return roundKey(this.base, step_id, 'response', iteration);
  }

  changes(step_id: string, iteration: number): string {
    return roundKey(this.base, step_id, 'changes', iteration);
  }

  results(step_id: string, iteration: number): string {
    return roundKey(this.base, step_id, 'results', iteration);
  }

  /** The `execute_tool` span of each call of a round (`tool_call_id` → traceparent), for the join's links. */
  spans(step_id: string, iteration: number): string {
    return roundKey(this.base, step_id, 'spans', iteration);
  }
}

export function keysFor(prefix: string): Keys {
  const tag = hashTag(prefix);
  const record = (run_id: string) => `${runTag(prefix, run_id)}:run:${run_id}`;
  return {
    tag,
    run: (run_id) => new RunKeys(record(run_id)),
    record,
    tagOf: (run_id) => runTag(prefix, run_id),
    idempotency: (key, inTag = tag) => `${inTag}:idempotency:${key}`,
    partitions: `${tag}:partitions`,
    partitionHistory: `${tag}:partitions:history`,
    activeRunsIn: (inTag) => `${inTag}${ACTIVE_RUNS_SUFFIX}`,
    uncompactedRunsIn: (inTag) => `${inTag}${UNCOMPACTED_RUNS_SUFFIX}`,
    runsIndexIn: (inTag, agent) => (agent === undefined ? `${inTag}${RUNS_INDEX_SUFFIX}` : `${inTag}${RUNS_INDEX_SUFFIX}:agent:${agent}`),
    agent: (name) => `${tag}:agent:${name}`,
    agentWorkers: (name) => `${tag}:agent:${name}:workers`,
    agentNames: `${tag}:agents`,
    tenancy: `${tag}:tenancy`,
    tenantActive: (tenant) => `${tag}:tenant-active:${tenant}`,
    tenantMinute: (tenant, minute) => `${tag}:tenant-minute:${minute}:${tenant}`,
    tenantSpend: (tenant, day) => `${tag}:tenant-spend:${day}:${tenant}`,
    runCost: (run_id) => `${tag}:run-cost:${run_id}`,
    workers: `${tag}:workers`,
    toolHolders: (tool_name) => `${tag}:tool:${tool_name}:holders`,
    workerPartitions: (worker_id) => `${tag}:worker:${worker_id}:partitions`,
    watchdogLock: `${tag}:watchdog`,
    compactionSweepLock: `${tag}:compaction-sweep`,
    cancelChannel: `${tag}:cancel`,
    finishedChannelIn: (inTag) => `${inTag}:finished`,
    providerPause: (provider_id) => `${tag}:provider-pause:${provider_id}`,
    overviewQueueDepths: `${tag}:overview:queue-depths`,
  };
}

/**
 * A thread's keys (SPEC §11), under the tag of the partition its runs are minted in (so a run's
 * ending script reaches its thread in the same slot): `<tag>:thread:<id>` its messages (one JSON
 * each, appended by the script that completes a run), `…:runs` its runs in enqueue order,
 * `…:active` the one run that may run now and `…:waiting` the runs queued behind it. The
 * store's scripts name them the same way from the run's tag and its record's `thread_id`.
 */
export const THREAD_KEY_INFIX = ':thread:';
/** A run's messages staged for its thread, moved there by the write that completes the run. */
export const THREAD_STAGED_SUFFIX = ':thread-staged';
/** Messages steered into a thread's active run by later runs (`on_busy: steer`), taken by its next call. */
export const THREAD_INJECTED_SUFFIX = ':injected';
/** Beside `:injected`, the steering run of each message there, in the same order. */
export const THREAD_INJECTED_BY_SUFFIX = ':injected-by';

export function threadKeys(tag: string, thread_id: string): { readonly messages: string; readonly runs: string; readonly active: string; readonly waiting: string } {
  const messages = `${tag}${THREAD_KEY_INFIX}${thread_id}`;
  return { messages, runs: `${messages}:runs`, active: `${messages}:active`, waiting: `${messages}:waiting` };
}

/** Queue names (BullMQ forbids `:` in them). */
export const QueueName = {
  /** An agent's provider jobs: only workers serving the agent take them. */
  agent: (agent: string) => `agent-${agent}`,
  /**
   * A tool's jobs, one queue per definition (its definition hash): a call only ever goes to the
   * workers holding the definition it was planned with, whatever other workers on the prefix
   * define under the same name.
   */
  tool: (tool_name: string, definition_hash: string) => `tool-${tool_name}-${definition_hash}`,
} as const;

/**
 * BullMQ job ids: deterministic, so a re-delivered fan-out adds nothing twice. No `:` allowed.
 * Run ids, step ids and tool call ids hold no `.` (`NamePattern`; call ids are normalised at the
 * provider boundary), so distinct calls never share a job id.
 */
export const JobId = {
  provider: (run_id: string, step_id: string, iteration: number) => `${run_id}.${step_id}.p${iteration}`,
  tool: (run_id: string, step_id: string, iteration: number, tool_call_id: string) => `${run_id}.${step_id}.i${iteration}.${tool_call_id}`,
  /** The delayed job that times a waiting call out. */
  approvalTimeout: (run_id: string, step_id: string, iteration: number, tool_call_id: string) => `${run_id}.${step_id}.i${iteration}.${tool_call_id}.timeout`,
  /** The timeout of a call's wait for a result from outside (SPEC §20); a call may wait for its approval first, under the id above. */
  resultTimeout: (run_id: string, step_id: string, iteration: number, tool_call_id: string) => `${run_id}.${step_id}.i${iteration}.${tool_call_id}.result-timeout`,
} as const;
