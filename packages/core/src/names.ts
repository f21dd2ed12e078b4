/**
 * The forms of the names and ids arcflow keeps. They become parts of Redis keys, BullMQ job ids
 * and terminal output, so each is checked against its form before anything uses it.
 */
export const NamePattern = {
  /** A tool's name (`tool()`), and the only names a model's call can run. */
  tool: /^[A-Za-z0-9_-]{1,64}$/,
  /** A tool call id as arcflow keeps it: unique in its response (see `normalizeResponse`). */
  toolCallId: /^[A-Za-z0-9_-]{1,64}$/,
  /** A step id (`s1` for an agent run; a workflow's own step ids). */
  stepId: /^[A-Za-z0-9_-]{1,64}$/,
  /** An agent's or workflow's name. */
  agent: /^[A-Za-z0-9_.-]{1,100}$/,
  /** A run id: `run_` and 22 base64url characters when arcflow mints it; callers of `runLocal` may pick their own. */
  runId: /^[A-Za-z0-9_-]{1,100}$/,
} as const;
