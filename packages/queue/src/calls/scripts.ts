import { defineScript } from '../redis/scripts.ts';

const HERE = new URL('./', import.meta.url);

/** A tool call's start, result and move to its next try. (the Lua files beside this one). */
export const CALL_SCRIPTS = {
  startToolCall: defineScript(HERE, 'startToolCall'),
  recordToolResult: defineScript(HERE, 'recordToolResult'),
  moveCall: defineScript(HERE, 'moveCall'),
} as const;
