import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** Reserving a call's worst case and settling it (SPEC §14; the Lua files beside this one). */
export const COST_SCRIPTS = {
  reserveCost: defineScript(HERE, 'reserveCost', 2),
  settleCost: defineScript(HERE, 'settleCost', 1),
} as const;
