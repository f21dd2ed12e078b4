import { CallStore } from './calls/call-store.ts';
import { ApprovalStore } from './calls/waiting/approval-store.ts';
import { ChildStore } from './calls/waiting/child-store.ts';
import { ProviderPauses } from './loop/provider-pauses.ts';
import { PartitionMap } from './redis/partition-map.ts';
import { RunEndings } from './runs/ending.ts';
import { RunEvents } from './runs/events.ts';
import { RunListing } from './runs/listing.ts';
import { RunRecords } from './runs/records.ts';
import { StateLogs } from './steps/state-log.ts';
import { StepStore } from './steps/step-store.ts';
import { Transcripts } from './steps/transcripts.ts';
import type { StoreContext } from './store-context.ts';
import { StreamStore } from './streams/stream-store.ts';
import { ThreadStore } from './threads/thread-store.ts';
import { WatchdogStore } from './watchdog/watchdog-store.ts';
import { WorkflowStore } from './workflows/workflow-store.ts';

/** A run's record, listing, event log and end. */
export interface Runs {
  readonly records: RunRecords;
  readonly listing: RunListing;
  readonly events: RunEvents;
  readonly endings: RunEndings;
}

/**
 * Everything arcflow keeps in Redis, one store per part of a run, each built from one
 * {@link StoreContext} and the other stores it reads.
 */
export interface Store {
  readonly runs: Runs;
  readonly steps: StepStore;
  readonly threads: ThreadStore;
  readonly workflows: WorkflowStore;
  readonly calls: CallStore;
  readonly streams: StreamStore;
  readonly watchdog: WatchdogStore;
  readonly partitions: PartitionMap;
  /** Providers paused by a 429 (SPEC §16). */
  readonly pauses: ProviderPauses;
}

export function createStore(context: StoreContext): Store {
  const { redis, keys, prefix, scripts } = context;
  const partitions = new PartitionMap(redis, keys, prefix);
  const stateLogs = new StateLogs(redis, keys);
  const workflows = new WorkflowStore(context, stateLogs);
  const calls = new CallStore(context, new ApprovalStore(context), new ChildStore(context));
  const records = new RunRecords(context, { workflows, approvals: calls.approvals, partitions });
  const listing = new RunListing(context, partitions, records);
  return {
    runs: { records, listing, events: new RunEvents(context), endings: new RunEndings(context) },
    steps: new StepStore(context, new Transcripts(redis, keys), stateLogs),
    threads: new ThreadStore(redis, keys, prefix, partitions, scripts),
    workflows,
    calls,
    streams: new StreamStore(context),
    watchdog: new WatchdogStore(context, listing),
    partitions,
    pauses: new ProviderPauses(context),
  };
}
