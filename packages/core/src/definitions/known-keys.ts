import { ConfigError } from '../errors.ts';

/** Every key of `T`, and of each member when `T` is a union (a workflow step is an agent step or a tool step). */
type KeysOf<T> = T extends unknown ? keyof T & string : never;

/**
 * The keys a config object may have, as `{ key: true }`. Declare each table next to its interface
 * with `satisfies KnownKeys<Config>`: the compiler then refuses a table that misses an option of the
 * interface or names one it lacks, so adding an option is one line here and one in the interface.
 */
export type KnownKeys<T> = { readonly [K in KeysOf<T>]: true };

/**
 * What the object is, which decides the wording of its refusal: a definition's options
 * (`unknown option 'k' in agent 'u'`), or a run config at a path (`config.budget has unknown key 'k'`).
 */
export type KeysOwner = 'definition' | 'config';

/**
 * Refuses the first key of `value` that `known` lacks, with a {@link ConfigError} naming the key,
 * `where` it is (`agent 'u'`, `config.budget`), and the nearest known key when one is close, else
 * every known key; `elsewhere` names where a key that belongs in a nested object goes. JavaScript callers and JSON configs have no compiler to catch `tool_exection`;
 * without this check it would be silently ignored.
 */
export function checkKnownKeys(value: object, known: Readonly<Record<string, true>>, where: string, owner: KeysOwner, elsewhere: Readonly<Record<string, string>> = {}): void {
  for (const key of Object.keys(value)) {
    if (Object.hasOwn(known, key)) continue;
    const keys = Object.keys(known);
    const head = owner === 'definition' ? `unknown option '${clipped(key)}' in ${where}` : `${where} has unknown key '${clipped(key)}'`;
    // A key that belongs one level down (`temperature` → `model_settings.temperature`).
    const nearest = Object.hasOwn(elsewhere, key) ? elsewhere[key] : nearestKey(key, keys);
    throw new ConfigError(nearest ? `${head}; did you mean '${nearest}'?` : `${head} (allowed: ${keys.join(', ')})`);
  }
}

/** A name from outside, cut to at most `max` characters for a message (a 100 KB key must not come back as a 100 KB error). */
export function clipped(name: string, max = 64): string {
  return name.length > max ? `${name.slice(0, max)}…` : name;
}

/**
 * The known key closest to `key`, ignoring case, if it is close: an edit distance (a transposition
 * counts one) of at most 2 or a third of the longer name, and less than the shorter name's length,
 * so `timeout` finds `timeout_ms` and `maxIterations` finds `max_iterations` while `ok` finds no `id`.
 * Ties go to the first in `known`.
 */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    const limit = Math.min(Math.max(2, Math.ceil(Math.max(key.length, candidate.length) / 3)), Math.min(key.length, candidate.length) - 1);
    if (distance <= limit && (!best || distance < best.distance)) best = { key: candidate, distance };
  }
  return best?.key;
}

/** Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent transpositions. */
function editDistance(a: string, b: string): number {
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, before[j - 2]! + 1);
      current[j] = distance;
    }
    before = previous;
    previous = current;
  }
  return previous[b.length]!;
}
