import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import { StoredFormatError } from './formats.ts';

/**
 * An ended run, compacted (docs/decisions/0031-compaction.md): its record hash stays as it was
 * (every field a listing, a wait or a script reads), and every other key of the run is folded into
 * one value, `<record>:archive`, which expires with the record. The archive is the run's keys by
 * suffix, each with its type and its value as Redis gave it, as JSON, compressed with raw deflate
 * (format `d1`; the record's `archived` field names it). Readers read a run's live keys first and
 * fall back on the archive when a key is gone, so a run compacted or not (one written by a version
 * before compaction, or one whose ending process died before compacting it) reads the same.
 */
export const ARCHIVE_FORMAT = 'd1';

/** One key of an archived run: its Redis type and its value (a list's items, a hash's or stream's entries). */
export type ArchivedKey =
  | { readonly t: 'string'; readonly v: string }
  | { readonly t: 'list'; readonly v: readonly string[] }
  | { readonly t: 'hash'; readonly v: readonly string[] }
  | { readonly t: 'stream'; readonly v: readonly [string, string[]][] };

/** An archived run's keys, by suffix of the record's key (`:events`, `:s1:transcript`, …). */
export class ArchivedRun {
  constructor(private readonly keys: Readonly<Record<string, ArchivedKey>>) {}

  /** A list's items (empty when the run had no such list). */
  list(suffix: string): readonly string[] {
    const key = this.keys[suffix];
    return key?.t === 'list' ? key.v : [];
  }

  /** A hash's fields (empty when the run had no such hash). */
  hash(suffix: string): Record<string, string> {
    const flat = this.hashEntries(suffix);
    const fields: Record<string, string> = {};
    for (let at = 0; at + 1 < flat.length; at += 2) fields[flat[at]!] = flat[at + 1]!;
    return fields;
  }

  /** A hash's fields and values in one list, as HGETALL gives them. */
  hashEntries(suffix: string): readonly string[] {
    const key = this.keys[suffix];
    return key?.t === 'hash' ? key.v : [];
  }

  /** A string's value, or null. */
  string(suffix: string): string | null {
    const key = this.keys[suffix];
    return key?.t === 'string' ? key.v : null;
  }

  /** A stream's entries, as XRANGE gives them. */
  stream(suffix: string): readonly [string, string[]][] {
    const key = this.keys[suffix];
    return key?.t === 'stream' ? key.v : [];
  }
}

/** The archive's bytes for a run's dumped keys (flat suffix, type, value triples from dumpRun.lua). */
export function encodeArchive(flat: readonly unknown[]): Buffer {
  const keys: Record<string, unknown> = {};
  for (let at = 0; at < flat.length; at += 3) keys[flat[at] as string] = { t: flat[at + 1], v: flat[at + 2] };
  return deflateRawSync(JSON.stringify(keys));
}

export function decodeArchive(bytes: Buffer, what = 'archive'): ArchivedRun {
  let keys: unknown;
  try {
    keys = JSON.parse(inflateRawSync(bytes).toString('utf8'));
  } catch {
    throw new StoredFormatError(what, 'malformed');
  }
  if (keys === null || typeof keys !== 'object' || Array.isArray(keys)) throw new StoredFormatError(what, 'malformed');
  return new ArchivedRun(keys as Record<string, ArchivedKey>);
}

/** A run's archive, or undefined when it has none (not compacted, or gone). */
export async function readArchive(redis: Redis, keys: Keys, run_id: string): Promise<ArchivedRun | undefined> {
  const bytes = await redis.getBuffer(keys.run(run_id).archive);
  return bytes ? decodeArchive(bytes, `archive of run ${run_id}`) : undefined;
}
