import { TEST_REDIS_URL, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { testResources } from './harness.ts';
import { repairBesideWaiting } from './waiting-watchdog.ts';

const { prefixes, redis } = testResources();

describe('the watchdog beside runs that wait outside (SPEC §20)', () => {
  it('repairs a run whose job was deleted by hand within 2 × ARCFLOW_WATCHDOG_MS beside 10,000 runs waiting on browser tools, none of which it scans', async () => {
    const prefix = testPrefix('wd-waiting');
    prefixes.push(prefix);
    const watchdog_ms = 1_000;
    const { repairMs, parkedScore, expiresAt } = await repairBesideWaiting(redis, TEST_REDIS_URL, prefix, 10_000, watchdog_ms);
    // A waiting run is off the scan until its call's timeout is due.
    expect(parkedScore).toBe(expiresAt);
    expect(repairMs).toBeLessThan(2 * watchdog_ms);
  }, 120_000);
});
