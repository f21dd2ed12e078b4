// The bench agents on a single first-come queue: every job added without a priority, as before
// fair scheduling (SPEC §14). The baseline arm of `npm run bench -- tenants`'s per-call row; a
// worker loads it with `--module`, which patches the fair clock of this process.
import { FairClock } from '../packages/queue/src/tenancy/fair-clock.ts';

export * from './agents.ts';

/** BullMQ adds a job with no priority to its plain wait list, first come first served. */
FairClock.prototype.priority = async () => undefined as unknown as number;
