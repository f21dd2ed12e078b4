import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A run's stream of model output. (the Lua files beside this one). */
export const STREAM_SCRIPTS = {
  appendStream: defineScript(HERE, 'appendStream'),
} as const;
