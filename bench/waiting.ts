// The watchdog beside runs that wait outside (SPEC §20): time to repair a run whose job was deleted
// by hand, beside 10,000 runs waiting on a browser tool, against beside one.
import { Redis } from 'ioredis';
import { repairBesideWaiting } from '../packages/queue/test/waiting-watchdog.ts';
import { REDIS_URL, type Row, ms } from './lib.ts';

/** ARCFLOW_WATCHDOG_MS for the measurement. */
export const WAITING_WATCHDOG_MS = 1_000;

export async function waitingWatchdogRow(prefix: (name: string) => string): Promise<Row> {
  const redis = new Redis(REDIS_URL);
  try {
    const alone = await repairBesideWaiting(redis, REDIS_URL, prefix('waiting-1'), 1, WAITING_WATCHDOG_MS);
    const crowded = await repairBesideWaiting(redis, REDIS_URL, prefix('waiting-10k'), 10_000, WAITING_WATCHDOG_MS);
    return {
      measure: `stuck run repaired beside 10,000 runs waiting on a browser tool (vs beside 1; watchdog ${WAITING_WATCHDOG_MS} ms)`,
      arcflow: ms(crowded.repairMs),
      baseline: ms(alone.repairMs),
      ratio: `${(crowded.repairMs / alone.repairMs).toFixed(2)}x`,
      target: `<= ${2 * WAITING_WATCHDOG_MS} ms`,
      verdict: crowded.repairMs <= 2 * WAITING_WATCHDOG_MS ? 'yes' : 'NO',
    };
  } finally {
    await redis.quit();
  }
}
