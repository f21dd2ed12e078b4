import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A step's read, its recorded model responses and its saved state. (the Lua files beside this one). */
export const STEP_SCRIPTS = {
  loadStep: defineScript(HERE, 'loadStep'),
  recordResponse: defineScript(HERE, 'recordResponse'),
  saveState: defineScript(HERE, 'saveState'),
} as const;
