import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A job's priority from its tenant's virtual time, and a tenant's limits (the Lua files beside this one). */
export const TENANCY_SCRIPTS = {
  fairPriority: defineScript(HERE, 'fairPriority', 2),
  admitRun: defineScript(HERE, 'admitRun', 1),
  countEnqueue: defineScript(HERE, 'countEnqueue', 1),
} as const;
