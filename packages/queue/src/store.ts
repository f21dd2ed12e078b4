import { CallStore } from './calls/call-store.ts';
import { WaitingStore } from './calls/waiting/waiting-store.ts';
import { ChildStore } from './calls/waiting/child-store.ts';
import { ProviderPauses } from './loop/provider-pauses.ts';
import { PartitionMap } from './redis/partition-map.ts';
import { RunCompaction } from './runs/compaction.ts';
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
  /** An ended run folded into its record and one archive. */
  readonly compaction: RunCompaction;
}

/**
 * Everything arcflow keeps in Redis, one store per part of a run, each built from one
 * {@link StoreContext} and the other stores it reads.
 */
export class Store {
  readonly runs: Runs;
  readonly steps: StepStore;
  readonly threads: ThreadStore;
  /** A workflow run's steps. */
  readonly workflows: WorkflowStore;
  /** A round's calls, and the calls that wait (approvals, results from outside, child runs). */
  readonly calls: CallStore;
  /** The runs' streams of text (SPEC §12). */
  readonly streams: StreamStore;
  /** What the watchdog reads of runs that have gone quiet. */
  readonly watchdog: WatchdogStore;
  /** How many partitions runs spread over (SPEC §9). */
  readonly partitions: PartitionMap;
  /** Providers paused by a 429 (SPEC §16). */
  readonly pauses: ProviderPauses;

  constructor(context: StoreContext) {
    const { redis, keys, prefix, scripts } = context;
    this.partitions = new PartitionMap(redis, keys, prefix);
    const stateLogs = new StateLogs(redis, keys);
    this.workflows = new WorkflowStore(context, stateLogs);
    this.calls = new CallStore(context, { approvals: new WaitingStore('approval', context), toolResults: new WaitingStore('result', context) }, new ChildStore(context));
    const { approvals, toolResults } = this.calls;
    const records = new RunRecords(context, { workflows: this.workflows, approvals, toolResults, partitions: this.partitions });
    const listing = new RunListing(context, this.partitions, records);
    this.runs = { records, listing, events: new RunEvents(context), endings: new RunEndings(context), compaction: new RunCompaction(context, listing) };
    this.steps = new StepStore(context, new Transcripts(redis, keys), stateLogs);
    this.threads = new ThreadStore(redis, keys, prefix, this.partitions, scripts);
    this.streams = new StreamStore(context);
    this.watchdog = new WatchdogStore(context, listing);
    this.pauses = new ProviderPauses(context);
  }
}
