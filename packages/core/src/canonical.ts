import { createHash } from 'node:crypto';

/** JSON with object keys sorted recursively and no whitespace: equal values give equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) sorted[key] = sortKeys((value as Record<string, unknown>)[key]);
    return sorted;
  }
  return value;
}

/** First 16 hex characters of SHA-256 over the canonical JSON of `value`. */
export function shortHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, 16);
}

/** UTF-8 size of a string in bytes. */
export function byteSize(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

const LONE_SURROGATE = /\p{Cs}/gu;

/** `text` with each lone surrogate half made U+FFFD, as UTF-8 on the wire and in Redis makes it (`String.prototype.toWellFormed`). */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, '\uFFFD');
}
