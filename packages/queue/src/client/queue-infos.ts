import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { ClientContext } from './context.ts';

/** An agent as the registry knows it (SPEC §8, `GET /v1/agents`). */
export interface AgentInfo {
  readonly name: string;
  readonly kind: 'agent' | 'workflow';
  readonly tools: readonly string[];
  readonly live_workers: number;
  /** A workflow's steps: id, type and dependencies, in definition order. */
  readonly steps?: readonly { readonly id: string; readonly type: 'agent' | 'tool'; readonly depends_on: readonly string[] }[];
}

/** A queue's depth and the workers taking its jobs now (SPEC §8, `GET /v1/queues`). */
export interface QueueInfo {
  readonly name: string;
  readonly waiting: number;
  readonly active: number;
  readonly delayed: number;
  readonly failed: number;
  readonly workers: number;
}

/** The agents registered under the prefix: their tools and how many live workers serve them now. */
export function agentInfos({ registry, reach }: Pick<ClientContext, 'registry' | 'reach'>): Promise<AgentInfo[]> {
  return reach(async () => {
    const names = await registry.known();
    const found = await Promise.all(names.map(async (name) => ({ name, registration: await registry.registration(name), live_workers: await registry.liveWorkers(name) })));
    return found.flatMap(({ name, registration, live_workers }) =>
      registration
        ? [
            registration.workflow
              ? { name, kind: 'workflow' as const, tools: registration.tools, live_workers, steps: registration.workflow.steps }
              : { name, kind: 'agent' as const, tools: registration.tools, live_workers },
          ]
        : [],
    );
  });
}

/** Every queue of the registered agents, workflows and tools: its depth and live workers (BullMQ's queues, so loaded with `enqueue.ts`). */
export function queueInfos({ store, registry, reach }: Pick<ClientContext, 'store' | 'registry' | 'reach'>, queues: Dispatcher): Promise<QueueInfo[]> {
  return reach(async () => {
    const names = await registry.queueNames();
    const tags = await store.tags();
    // A queue is one per partition: its depth is the sum over them, its workers those of its busiest partition.
    return Promise.all(
      names.map(async (name) => {
        const parts = await Promise.all(
          tags.map(async (tag) => {
            const queue = queues.get(name, tag);
            const [counts, workers] = await Promise.all([queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed'), queue.getWorkersCount()]);
            return { counts, workers };
          }),
        );
        const sum = (field: string) => parts.reduce((total, { counts }) => total + (counts[field] ?? 0), 0);
        return {
          name,
          waiting: sum('waiting') + sum('prioritized'),
          active: sum('active'),
          delayed: sum('delayed'),
          failed: sum('failed'),
          workers: Math.max(0, ...parts.map(({ workers }) => workers)),
        };
      }),
    );
  });
}
