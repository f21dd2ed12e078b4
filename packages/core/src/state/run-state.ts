import { byteSize } from '../canonical.ts';
import { RequestError } from '../errors.ts';
import { isPlainObject } from '../plain-object.ts';

/** A run's state (SPEC §17): a JSON object kept beside its messages. */
export type RunState = Readonly<Record<string, unknown>>;

/** The default of an agent's `max_state_bytes`: the most its state's JSON may take. */
export const DEFAULT_MAX_STATE_BYTES = 262_144;

/**
 * One change a handler made to the state, as it is recorded with the call's result and applied at
 * the join: values are JSON texts' parsed copies, never the handler's own objects.
 */
export type StateChange = readonly ['set', string, unknown] | readonly ['append', string, readonly unknown[]] | readonly ['delete', string];

/** What a handler reads and changes the run's state through (`ctx.state`). */
export interface StateAccess {
  /** The key's value (a copy), or undefined. */
  get(key: string): unknown;
  /** The keys the state has, sorted. */
  keys(): string[];
  /** Sets the key to a JSON value. */
  set(key: string, value: unknown): void;
  /** Appends items to the array the key holds (created when missing); throws if it holds something else. */
  append(key: string, ...items: unknown[]): void;
  delete(key: string): void;
}

/** A copy of a JSON value, made through its text: a value JSON cannot hold is refused, naming `what`. */
function jsonCopy(value: unknown, what: string): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`${what} must be JSON: ${(error as Error).message}`);
  }
  if (text === undefined) throw new TypeError(`${what} must be JSON, got ${typeof value}`);
  return JSON.parse(text);
}

function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) throw new TypeError(`a state key must be a non-empty string, got ${JSON.stringify(key) ?? typeof key}`);
}

/**
 * The state as one call sees it: the state its round began with, plus its own changes, which are
 * kept in order to be recorded with its result (a call's changes count only if it completes).
 */
export class CallState implements StateAccess {
  private readonly own = new Map<string, { value: unknown } | undefined>();
  readonly changes: StateChange[] = [];

  constructor(private readonly base: RunState) {}

  private current(key: string): unknown {
    if (this.own.has(key)) return this.own.get(key)?.value;
    return Object.hasOwn(this.base, key) ? this.base[key] : undefined;
  }

  get(key: string): unknown {
    checkKey(key);
    const value = this.current(key);
    return value === undefined ? undefined : structuredClone(value);
  }

  keys(): string[] {
    const keys = new Set(Object.keys(this.base));
    for (const [key, entry] of this.own) {
      if (entry) keys.add(key);
      else keys.delete(key);
    }
    return [...keys].sort();
  }

  set(key: string, value: unknown): void {
    checkKey(key);
    const copy = jsonCopy(value, `state '${key}'`);
    this.own.set(key, { value: copy });
    this.changes.push(['set', key, copy]);
  }

  append(key: string, ...items: unknown[]): void {
    checkKey(key);
    const held = this.current(key);
    if (held !== undefined && !Array.isArray(held))
      throw new TypeError(`state '${key}' holds ${typeof held === 'object' ? (held === null ? 'null' : 'an object') : `a ${typeof held}`}, not an array: append needs an array`);
    const copies = items.map((item, at) => jsonCopy(item, `state '${key}' item ${at}`));
    this.own.set(key, { value: [...((held as unknown[] | undefined) ?? []), ...copies] });
    this.changes.push(['append', key, copies]);
  }

  delete(key: string): void {
    checkKey(key);
    this.own.set(key, undefined);
    this.changes.push(['delete', key]);
  }
}

/**
 * The state after `changes`, applied in order, and the keys they touched (sorted). `state` is not
 * changed. An append to a key that holds no array (from a record that was altered) replaces the
 * key's value with the appended items.
 */
export function applyStateChanges(state: RunState, changes: readonly StateChange[]): { readonly state: RunState; readonly keys: readonly string[] } {
  const { state: next, keys } = applyChanges(state, changes, undefined);
  return { state: next, keys };
}

/**
 * {@link applyStateChanges}, with the JSON size of the result worked out from `size` (the size of
 * `state`'s JSON) and what the changes add and remove, without writing the whole state again: an
 * append costs its items, a set or delete the value it replaces.
 */
export function applyStateChangesSized(
  state: RunState,
  size: number,
  changes: readonly StateChange[],
): { readonly state: RunState; readonly keys: readonly string[]; readonly size: number } {
  const applied = applyChanges(state, changes, size);
  return { ...applied, size: applied.size! };
}

/** The one application of changes: with `size` (the JSON size of `state`), the result's size is kept up to date too. */
function applyChanges(state: RunState, changes: readonly StateChange[], size: number | undefined): { state: RunState; keys: readonly string[]; size: number | undefined } {
  if (changes.length === 0) return { state, keys: [], size };
  const next: Record<string, unknown> = { ...state };
  const keys = new Set<string>();
  let count = Object.keys(next).length;
  const json = (value: unknown) => byteSize(JSON.stringify(value));
  /** A member `"key":value`, and the comma between it and another. */
  const member = (key: string, value: unknown) => json(key) + 1 + json(value);
  for (const change of changes) {
    const [op, key] = change;
    const had = Object.hasOwn(next, key);
    if (op === 'append' && had && Array.isArray(next[key])) {
      const held = next[key] as unknown[];
      const items = change[2];
      if (items.length === 0) continue;
      if (size !== undefined) size += items.reduce<number>((sum, item) => sum + json(item), 0) + (held.length === 0 ? Math.max(0, items.length - 1) : items.length);
      put(next, key, [...held, ...items]);
      keys.add(key);
      continue;
    }
    if (op === 'delete') {
      // Deleting a key the state does not hold changes nothing.
      if (!had) continue;
      if (size !== undefined) size -= member(key, next[key]) + (count > 1 ? 1 : 0);
      delete next[key];
      count -= 1;
      keys.add(key);
      continue;
    }
    // A set, or an append to a key that held no array: the key's value is replaced in its place.
    const value = op === 'set' ? change[2] : [...change[2]];
    // Setting the value a key holds already changes nothing.
    if (had && JSON.stringify(next[key]) === JSON.stringify(value)) continue;
    if (size !== undefined) size += member(key, value) - (had ? member(key, next[key]) : count > 0 ? -1 : 0);
    if (!had) count += 1;
    put(next, key, value);
    keys.add(key);
  }
  return { state: next, keys: [...keys].sort(), size };
}

/** Sets `key` as the object's own property, whatever its name (`__proto__` too, which `=` would take as the prototype). */
function put(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * Whether a call's changes keep the state within `max_bytes` (SPEC §17, "the limit holds"): the
 * state its round began with (`base`, `base_size` bytes of JSON), plus the changes recorded so far
 * in the round, plus its own, applied in the model's order of the calls (`ordered`: each call's
 * changes, the call's own among them). The last call accepted in a round was checked against every
 * accepted call's changes, so the joined state is never over the limit, whatever the parallelism.
 */
export function changesFit(base: RunState, base_size: number, ordered: readonly (readonly StateChange[])[], max_bytes: number): boolean {
  return applyStateChangesSized(base, base_size, ordered.flat()).size <= max_bytes;
}

/** The bytes of a state's JSON (what `max_state_bytes` bounds). */
export function stateSize(state: RunState): number {
  return byteSize(JSON.stringify(state));
}

/**
 * Checks a run's initial `state` at enqueue: a JSON object of at most `max_bytes` of JSON, its keys
 * non-empty. Returns it as JSON reads it back. Throws `invalid_request` naming `state`; undefined
 * (none given) passes.
 */
export function checkInitialState(state: unknown, max_bytes = DEFAULT_MAX_STATE_BYTES): RunState | undefined {
  if (state === undefined) return undefined;
  if (!isPlainObject(state))
    throw new RequestError('invalid_request', `state must be a JSON object, got ${Array.isArray(state) ? 'an array' : state === null ? 'null' : typeof state}`);
  let text: string;
  try {
    text = JSON.stringify(state);
  } catch (error) {
    throw new RequestError('invalid_request', `state must be JSON: ${(error as Error).message}`);
  }
  const size = byteSize(text);
  if (size > max_bytes) throw new RequestError('invalid_request', `state is ${size} bytes of JSON, over the agent's max_state_bytes (${max_bytes})`);
  // The state as JSON has it, whoever runs it: a key whose value JSON leaves out (undefined, a
  // function) is not there, a Date is its string. What was measured is what is kept.
  const normal = JSON.parse(text) as RunState;
  if (Object.hasOwn(normal, ''))
    throw new RequestError('invalid_request', 'state has a key that is the empty string: a state key is a non-empty string (ctx.state could not reach it)');
  return normal;
}

/** A state as the changes that build it from nothing (how an initial state is recorded). */
export function stateAsChanges(state: RunState): StateChange[] {
  return Object.keys(state)
    .sort()
    .map((key) => ['set', key, state[key]] as const);
}

/** Reads a recorded list of changes (untrusted: written by another process); throws naming `what` when it is not one. */
export function readStateChanges(json: string, what: string): StateChange[] {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new TypeError(`${what} is not JSON`);
  }
  if (!Array.isArray(value)) throw new TypeError(`${what} is not a list of changes`);
  for (const change of value) {
    const ok =
      Array.isArray(change) &&
      typeof change[1] === 'string' &&
      ((change[0] === 'set' && change.length === 3) ||
        (change[0] === 'append' && change.length === 3 && Array.isArray(change[2])) ||
        (change[0] === 'delete' && change.length === 2));
    if (!ok) throw new TypeError(`${what} holds a change that is not one`);
  }
  return value as StateChange[];
}
