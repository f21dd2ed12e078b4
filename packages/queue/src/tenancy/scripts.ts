import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A job's priority from its tenant's virtual time (the Lua file beside this one). */
export const TENANCY_SCRIPTS = {
  fairPriority: defineScript(HERE, 'fairPriority', 2),
} as const;
