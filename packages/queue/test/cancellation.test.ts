import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL, testPrefix } from '@arcflow/testing';
import { CancellationListener } from '../src/runs/cancel.ts';

const channel = `{${testPrefix('cancellation')}}:cancel`;
const publisher = new Redis(TEST_REDIS_URL);
afterAll(() => publisher.quit());

const cancelled = (listener: CancellationListener, run_id: string) =>
  new Promise<void>((done) => {
    const probe = listener.watch(run_id);
    probe.watch(() => {
      probe.release();
      done();
    });
  });

describe('CancellationListener', () => {
  it("tells every piece of a run's work in flight, once, and cancels that run's work that starts afterwards at once", async () => {
    const listener = await CancellationListener.start(new Redis(TEST_REDIS_URL), channel);
    try {
      const handler = listener.watch('run_a');
      const provider = listener.signalFor('run_a');
      const other = listener.watch('run_b');
      const calls: string[] = [];
      handler.watch(() => calls.push('handler'));
      const stopped = handler.watch(() => calls.push('stopped watcher'));
      stopped();
      other.watch(() => calls.push('other run'));
      const seen = cancelled(listener, 'run_a');
      await publisher.publish(channel, 'run_a');
      await seen;
      expect(calls).toEqual(['handler']);
      expect(handler.cancelled).toBe(true);
      expect(provider.signal.aborted).toBe(true);
      expect(other.cancelled).toBe(false);
      // Work that starts after the cancel is cancelled from the start, and its watchers are told at once.
      const late = listener.watch('run_a');
      expect(late.cancelled).toBe(true);
      const lateCalls: string[] = [];
      late.watch(() => lateCalls.push('late'));
      expect(lateCalls).toEqual(['late']);
      expect(listener.signalFor('run_a').signal.aborted).toBe(true);
      expect(listener.watch('run_b').cancelled).toBe(false);
      late.release();
      handler.release();
      provider.release();
      other.release();
    } finally {
      await listener.close();
    }
  });
});
