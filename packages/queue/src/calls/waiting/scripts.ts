import { defineScript } from '../../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** Calls that wait for a person: an approval requested and resolved. (the Lua files beside this one). */
export const WAITING_SCRIPTS = {
  requestApproval: defineScript(HERE, 'requestApproval'),
  resolveApproval: defineScript(HERE, 'resolveApproval'),
} as const;
