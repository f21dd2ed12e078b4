import type { Redis } from 'ioredis';
import { CALL_SCRIPTS } from './calls/scripts.ts';
import { WAITING_SCRIPTS } from './calls/waiting/scripts.ts';
import { LOOP_SCRIPTS } from './loop/scripts.ts';
import { type ScriptCalls, scriptCalls } from './redis/script-runner.ts';
import { RUN_SCRIPTS } from './runs/scripts.ts';
import { STEP_SCRIPTS } from './steps/scripts.ts';
import { STREAM_SCRIPTS } from './streams/scripts.ts';
import { THREAD_SCRIPTS } from './threads/scripts.ts';
import { WORKFLOW_SCRIPTS } from './workflows/scripts.ts';

/** Every script of the store, from each folder's table, loaded once when this module is first imported. */
export const SCRIPTS = {
  ...RUN_SCRIPTS,
  ...STEP_SCRIPTS,
  ...CALL_SCRIPTS,
  ...WAITING_SCRIPTS,
  ...WORKFLOW_SCRIPTS,
  ...THREAD_SCRIPTS,
  ...STREAM_SCRIPTS,
  ...LOOP_SCRIPTS,
} as const;
export type ScriptName = keyof typeof SCRIPTS;

/** The store's scripts as functions of their keys and arguments (see `redis/script-runner.ts`). */
export type StoreScripts = ScriptCalls<ScriptName>;

export const storeScripts = (redis: Redis): StoreScripts => scriptCalls(redis, SCRIPTS);
