import { randomBytes } from 'node:crypto';
import { PARTITIONED_RUN_ID_START, PARTITION_MARK } from '@arcflow/core';

/**
 * Partitions (SPEC §9): a run lives for life under one of N hash tags, named in its run id
 * (`run_p<k>_…`), so every command for it routes without a lookup. A run id without the mark
 * lives under the prefix's own tag, `{prefix}` (every run when there is one partition, and runs
 * made before partitions were added). Partition k's tag is `{<prefix>~p<k>~<n>}`, with `n` the
 * first number that puts the tag in slot `vdc(k) × 16384` or just after (`vdc` the base-2 radical
 * inverse: 0, ½, ¼, ¾, ⅛ …): for a power-of-two count, the partitions' slots are evenly spaced,
 * so with at least as many partitions as masters (slots split evenly), every master holds some.
 * A partition's tag depends on k alone: adding partitions moves no run.
 */
const SLOTS = 16_384;
/** How far past its target slot a partition's tag may land (keeps the search short). */
const SLOT_WINDOW = 64;

const tags = new Map<string, string>();

/** The hash tag of partition `k` under `prefix`. */
export function partitionTag(prefix: string, k: number): string {
  const cacheKey = `${prefix}\n${k}`;
  let tag = tags.get(cacheKey);
  if (!tag) {
    const target = Math.floor(radicalInverse(k) * SLOTS);
    for (let n = 0; ; n += 1) {
      const candidate = `${prefix}~p${k}~${n}`;
      if ((keySlot(candidate) - target + SLOTS) % SLOTS < SLOT_WINDOW) {
        tag = `{${candidate}}`;
        break;
      }
    }
    tags.set(cacheKey, tag);
  }
  return tag;
}

/** The partition a run id names, or undefined for a run under the prefix's own tag. */
export function partitionOf(run_id: string): number | undefined {
  const match = PARTITION_MARK.exec(run_id);
  return match ? Number(match[1]) : undefined;
}

/** A new run id in partition `k`: `run_p<k>_` and 128 random bits in base64url. */
export function partitionedRunId(k: number): string {
  return `${PARTITIONED_RUN_ID_START}${k}_${randomBytes(16).toString('base64url')}`;
}

/** The partition an idempotency key belongs to among `count` (the same in every process). */
export function partitionOfKey(key: string, count: number): number {
  return keySlot(key) % count;
}

/** Redis Cluster's slot of a hash tag's content: CRC16 (XMODEM) mod 16384. */
export function keySlot(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % SLOTS;
}

/** The base-2 radical inverse of k: its binary digits mirrored behind the point. */
function radicalInverse(k: number): number {
  let value = 0;
  let weight = 0.5;
  for (let rest = k; rest > 0; rest >>= 1, weight /= 2) if (rest & 1) value += weight;
  return value;
}
