import { readFileSync } from 'node:fs';
import {
  ACTIVE_RUNS_SUFFIX,
  RUNS_INDEX_SUFFIX,
  RUN_COUNTS_SUFFIX,
  RUN_KEY_SUFFIX,
  THREAD_INJECTED_BY_SUFFIX,
  THREAD_INJECTED_SUFFIX,
  THREAD_KEY_INFIX,
  THREAD_STAGED_SUFFIX,
  UNCOMPACTED_RUNS_SUFFIX,
} from './keys.ts';

/**
 * The store's Lua scripts, one file each beside the TypeScript that runs it (a header names its KEYS and its
 * arguments, and what it returns). Each is one atomic step, so a record and its events are written
 * together or not at all; each checks its arguments before its first write, and is safe to run
 * twice with the same arguments (a reply lost to a dropped connection makes the client send it
 * again).
 *
 * A script is sent the run's record key alone (KEYS[1]) and names the run's other keys from it,
 * as keys.ts does: every key of a run shares the record's hash tag, so they live in one slot. Its
 * arguments are named in its header: the hottest scripts (a tool call's start and result, a
 * provider job's read) take a few scalars as positions bound to named locals; the others take one
 * msgpack map (lists of events, a run's ending) read by name. Strings pass as bytes either way, so
 * any text a model or handler produced passes through untouched.
 *
 * Events are appended to a list that only grows: an event's `seq` is its position in the list
 * (gap-free by construction; the store adds it when it reads the log), and an event with a dedupe
 * id is written at most once per run.
 */
export interface ScriptDefinition {
  readonly numberOfKeys: number;
  readonly lua: string;
}

/** The includes the scripts share (`--- @include "name"`). */
const INCLUDES = new URL('./lua/', import.meta.url);

/** Names the scripts may use for key suffixes, filled in from keys.ts. */
const PLACEHOLDERS: Readonly<Record<string, string>> = {
  'RUN_KEY_SUFFIX.events': RUN_KEY_SUFFIX.events,
  'RUN_KEY_SUFFIX.dedupe': RUN_KEY_SUFFIX.dedupe,
  'RUN_KEY_SUFFIX.pending': RUN_KEY_SUFFIX.pending,
  'RUN_KEY_SUFFIX.index': RUN_KEY_SUFFIX.index,
  'RUN_KEY_SUFFIX.steps': RUN_KEY_SUFFIX.steps,
  'RUN_KEY_SUFFIX.outputs': RUN_KEY_SUFFIX.outputs,
  'RUN_KEY_SUFFIX.tail': RUN_KEY_SUFFIX.tail,
  'RUN_KEY_SUFFIX.approvals': RUN_KEY_SUFFIX.approvals,
  'RUN_KEY_SUFFIX.toolResults': RUN_KEY_SUFFIX.toolResults,
  'RUN_KEY_SUFFIX.stream': RUN_KEY_SUFFIX.stream,
  'RUN_KEY_SUFFIX.streamMeta': RUN_KEY_SUFFIX.streamMeta,
  'RUN_KEY_SUFFIX.archive': RUN_KEY_SUFFIX.archive,
  'RUN_KEY_SUFFIX.rootSpan': RUN_KEY_SUFFIX.rootSpan,
  ACTIVE_RUNS_SUFFIX,
  RUNS_INDEX_SUFFIX,
  RUN_COUNTS_SUFFIX,
  THREAD_KEY_INFIX,
  THREAD_STAGED_SUFFIX,
  THREAD_INJECTED_SUFFIX,
  THREAD_INJECTED_BY_SUFFIX,
  UNCOMPACTED_RUNS_SUFFIX,
};

/**
 * A script's text: `<name>.lua` in `folder`, with `--- @include "name"` lines replaced by `lua/name.lua`
 * of this folder, and placeholders filled.
 */
export function loadScript(folder: URL, name: string): string {
  const read = (url: URL) => readFileSync(url, 'utf8');
  const expanded = read(new URL(`${name}.lua`, folder)).replace(/^--- @include "([a-z-]+)"$/gm, (_line, include: string) => read(new URL(`${include}.lua`, INCLUDES)));
  return expanded.replace(/\{\{([A-Za-z_.]+)\}\}/g, (_match, key: string) => {
    const value = PLACEHOLDERS[key];
    if (value === undefined) throw new Error(`script ${name}: unknown placeholder {{${key}}}`);
    return value;
  });
}

/**
 * A script of a folder's table: each folder declares the scripts beside its TypeScript as
 * `{ name: defineScript(new URL('./', import.meta.url), 'name') }`, loaded when the table is first imported.
 */
export const defineScript = (folder: URL, name: string, numberOfKeys = 1): ScriptDefinition => ({ numberOfKeys, lua: loadScript(folder, name) });
