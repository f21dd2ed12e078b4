import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A workflow's steps: started, settled, a tool step opened. (the Lua files beside this one). */
export const WORKFLOW_SCRIPTS = {
  settleStep: defineScript(HERE, 'settleStep'),
  startSteps: defineScript(HERE, 'startSteps'),
  openToolStep: defineScript(HERE, 'openToolStep'),
} as const;
