import { defineScript } from '../../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** Calls that wait holding no worker (see waiting-call.ts): parked and settled; a child run's call counted as waiting. (the Lua files beside this one). */
export const WAITING_SCRIPTS = {
  parkCall: defineScript(HERE, 'parkCall'),
  settleCall: defineScript(HERE, 'settleCall'),
  parkChild: defineScript(HERE, 'parkChild'),
} as const;
