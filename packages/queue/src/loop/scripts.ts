import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A model's pause after its provider asked to slow down. (the Lua files beside this one). */
export const LOOP_SCRIPTS = {
  pauseProvider: defineScript(HERE, 'pauseProvider'),
} as const;
