import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A thread's runs, history, staged and injected messages, and its deletion. (the Lua files beside this one). */
export const THREAD_SCRIPTS = {
  joinThread: defineScript(HERE, 'joinThread'),
  threadHistory: defineScript(HERE, 'threadHistory'),
  stageThreadMessages: defineScript(HERE, 'stageThreadMessages'),
  takeInjected: defineScript(HERE, 'takeInjected'),
  deleteThread: defineScript(HERE, 'deleteThread'),
} as const;
