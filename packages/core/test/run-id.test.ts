import { describe, expect, it } from 'vitest';
import { NamePattern, PARTITIONED_RUN_ID_START, newRunId } from '../src/index.ts';

describe('newRunId', () => {
  it('never starts as a partitioned run id does, over 300,000 ids (about 12 would by chance)', () => {
    let partitionedLooking = 0;
    for (let index = 0; index < 300_000; index += 1) {
      const id = newRunId();
      if (id.startsWith(PARTITIONED_RUN_ID_START)) partitionedLooking += 1;
    }
    expect(partitionedLooking).toBe(0);
  });

  it('is run_ and 22 base64url characters, a valid run id', () => {
    const id = newRunId();
    expect(id).toMatch(/^run_[A-Za-z0-9_-]{22}$/);
    expect(NamePattern.runId.test(id)).toBe(true);
  });
});
