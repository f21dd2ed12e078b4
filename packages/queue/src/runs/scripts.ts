import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A run's record and events: created, appended to, finished. (the Lua files beside this one). */
export const RUN_SCRIPTS = {
  createRun: defineScript(HERE, 'createRun', 2),
  appendEvents: defineScript(HERE, 'appendEvents'),
  finishRun: defineScript(HERE, 'finishRun'),
  dumpRun: defineScript(HERE, 'dumpRun'),
  compactRun: defineScript(HERE, 'compactRun'),
  claimRootSpan: defineScript(HERE, 'claimRootSpan'),
} as const;
