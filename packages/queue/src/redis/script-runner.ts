import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Packr } from 'msgpackr';
import type { ScriptDefinition } from './scripts.ts';
import { refuseWrongType } from '../records/formats.ts';

/**
 * Scripts as functions of their keys and arguments: a list is sent as positions (the
 * scalars of the hottest scripts), a map as one msgpack argument read by name.
 */
export type ScriptCalls<Name extends string> = {
  readonly [name in Name]: (keys: readonly string[], args: readonly (string | number)[] | Readonly<Record<string, unknown>>) => Promise<unknown>;
};

// Plain msgpack maps (no record extension) that Redis's cmsgpack reads; an undefined field is nil, so absent in Lua.
// msgpackr is loaded by the first script call with a map, not on import: a client that only reads never needs it.
let packer: Packr | undefined;
let loadingPacker: Promise<Packr> | undefined;
const loadPacker = (): Promise<Packr> =>
  (loadingPacker ??= import('msgpackr').then(
    ({ Packr }) => (packer = new Packr({ useRecords: false, encodeUndefinedAsNil: true })),
    (error: unknown) => {
      loadingPacker = undefined; // a failed load is tried again by the next call
      throw error;
    },
  ));

/**
 * Calls each script by its SHA1 (`EVALSHA`); a server that does not have it yet (new, restarted,
 * flushed) answers NOSCRIPT, and that one call goes as `EVAL`, which caches it. Leaner than
 * ioredis's `defineCommand`, which wraps every call in further promises and a command subclass:
 * about 3 µs of worker CPU per call, on 23 calls per run (measured, see docs/architecture.md).
 */
export function scriptCalls<Name extends string>(redis: Redis, scripts: Readonly<Record<Name, ScriptDefinition>>): ScriptCalls<Name> {
  const entries = Object.entries<ScriptDefinition>(scripts).map(([name, script]) => {
    const sha = createHash('sha1').update(script.lua).digest('hex');
    const call = (keys: readonly string[], args: readonly (string | number)[] | Readonly<Record<string, unknown>>): Promise<unknown> => {
      if (!Array.isArray(args) && !packer) return loadPacker().then(() => call(keys, args));
      const sent = Array.isArray(args) ? (args as (string | number)[]) : [(packer as Packr).pack(args)];
      return (
        redis
          .evalsha(sha, script.numberOfKeys, ...keys, ...sent)
          .catch((error: unknown) => {
            if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
            return redis.eval(script.lua, script.numberOfKeys, ...keys, ...sent);
          })
          // A key another process wrote with another type: said so, naming the key the script was given, not as a raw Lua error.
          .catch(refuseWrongType(`a key of ${keys[0] ?? 'the prefix'} (read by the ${name} script)`))
      );
    };
    return [name, call] as const;
  });
  return Object.freeze(Object.fromEntries(entries)) as ScriptCalls<Name>;
}
